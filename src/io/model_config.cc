// Hugging Face config.json -> rope parameters per layer type.
// Schema, priorities and error format: include/posenc/model_config.h.
//
// Matches HF transformers (commit c49429ed) RotaryEmbeddingConfigMixin:
// convert_rope_params_to_dict (rope_scaling -> rope_parameters, top-level
// rope_theta / partial_rotary_factor), standardize_rope_params (rope_type from
// `type`, Phi-3's top-level original_max_position_embeddings with priority,
// else max_position_embeddings for llama3/yarn/longrope) and the
// _validate_*_rope_parameters rules. HF raises only for missing required keys
// and warns for the rest; posenc raises a ConfigError for every value that
// would make the frequencies wrong or undefined (wrong type, factor < 1, list
// length, high <= low) and keeps HF's warnings for the benign cases.
#include "posenc/model_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/model_config_internal.h"
#include "posenc/alibi.h"
#include "posenc/error.h"
#include "posenc/gguf.h"

namespace posenc {

namespace {

using model_config_internal::json;
using model_config_internal::LayerSource;
using model_config_internal::ModelFields;
using model_config_internal::Num;
using model_config_internal::ParseLayer;
using model_config_internal::Reader;
using model_config_internal::Scope;
using model_config_internal::Show;

// Deepest nesting of objects and arrays a config may have.
constexpr int kMaxJsonDepth = 64;

// ALiBi models (model_config.h): fills cfg.alibi and returns true.
bool ParseAlibi(const Reader& rd, const Scope& scope, ModelConfig& cfg) {
  const json& obj = *scope.text;
  std::optional<std::int64_t> heads;
  double max_bias = 8.0;
  std::string heads_path;
  const auto first_int = [&](std::initializer_list<const char*> keys) {
    for (const char* k : keys) {
      if (const auto v = rd.Int(obj, k, scope.text_prefix + k)) {
        heads_path = scope.text_prefix + k;
        return v;
      }
    }
    heads_path = scope.text_prefix + *keys.begin();
    return std::optional<std::int64_t>{};
  };
  if (cfg.model_type == "bloom") {
    heads = first_int({"n_head", "num_attention_heads"});
  } else if (cfg.model_type == "mpt") {
    const json* attn = Reader::Find(obj, "attn_config");
    if (attn == nullptr || !attn->is_object()) return false;
    const auto alibi = rd.Bool(*attn, "alibi", scope.text_prefix + "attn_config.alibi");
    if (!alibi || !*alibi) return false;
    heads = first_int({"n_heads", "num_attention_heads"});
    max_bias = rd.Number(*attn, "alibi_bias_max", scope.text_prefix + "attn_config.alibi_bias_max",
                         "a number > 0")
                   .value_or(8.0);
    if (!(max_bias > 0.0)) {
      rd.Fail(scope.text_prefix + "attn_config.alibi_bias_max", Num(max_bias), "a number > 0");
    }
  } else {
    const auto alibi = rd.Bool(obj, "alibi", scope.text_prefix + "alibi");
    if (!alibi || !*alibi) return false;
    heads = first_int({"num_attention_heads", "n_head"});
  }
  if (!heads) rd.Fail(heads_path, "nothing (missing)", "the head count of an ALiBi model");
  if (*heads > kMaxAlibiHeads) rd.Fail(heads_path, std::to_string(*heads), "at most 65536 heads");
  ModelAlibi a;
  a.num_heads = *heads;
  a.max_bias = max_bias;
  AlibiParams ap;
  ap.num_heads = a.num_heads;
  ap.max_bias = a.max_bias;
  a.slopes = AlibiSlopes(ap);
  for (const char* k : {"hidden_size", "n_embed", "d_model"}) {
    if (const auto hidden = rd.Int(obj, k, scope.text_prefix + k)) {
      if (*hidden % a.num_heads == 0) cfg.head_dim = *hidden / a.num_heads;
      break;
    }
  }
  for (const char* k : {"max_position_embeddings", "seq_length", "max_seq_len"}) {
    if (const auto ctx = rd.Int(obj, k, scope.text_prefix + k)) {
      cfg.max_position_embeddings = cfg.original_max_position_embeddings = *ctx;
      break;
    }
  }
  cfg.alibi = std::move(a);
  return true;
}

// The document, with nesting bounded before it is built (printing or
// copying a deeper document recurses once per level and would overflow the
// stack) and every JSON failure mapped to IoError / ConfigError.
json ParseJson(std::string_view json_text, std::string_view source) {
  try {
    const json::parser_callback_t depth_limit = [&](int depth, json::parse_event_t, json&) {
      if (depth > kMaxJsonDepth) {
        throw ConfigError(std::string(source) + ": JSON nesting deeper than " +
                          std::to_string(kMaxJsonDepth) +
                          " levels (limit of the config loader; HF configs use fewer than 10)");
      }
      return true;
    };
    return json::parse(json_text, depth_limit);
  } catch (const json::parse_error& e) {
    throw IoError(std::string(source) + ": not valid JSON: " + e.what());
  } catch (const json::out_of_range& e) {  // 406: a number beyond the double range
    throw ConfigError(std::string(source) +
                      ": a number does not fit in a double (|x| < 1.8e308): " + e.what());
  } catch (const json::exception& e) {
    throw ConfigError(std::string(source) + ": cannot read the JSON: " + e.what());
  }
}

// Lookups in the text model's scope (text_config first, then the top level).
struct ScopedReader {
  const Reader& rd;
  const Scope& scope;
  std::optional<std::int64_t> Int(const std::string& key) const {
    auto [obj, path] = scope.Where(key);
    return obj != nullptr ? rd.Int(*obj, key, path) : std::nullopt;
  }
  std::optional<double> Number(const std::string& key, const std::string& expected) const {
    auto [obj, path] = scope.Where(key);
    return obj != nullptr ? rd.Number(*obj, key, path, expected) : std::nullopt;
  }
};

// Head dim, context length, theta and rotary fraction at the model level.
ModelFields ReadModelFields(const ScopedReader& get, std::optional<std::int64_t> qk_rope) {
  const Reader& rd = get.rd;
  const Scope& scope = get.scope;
  ModelFields m;
  if (qk_rope) {
    m.head_dim = *qk_rope;
  } else if (const auto hd = get.Int("head_dim")) {
    m.head_dim = *hd;
  } else {
    const auto hidden = get.Int("hidden_size");
    const auto heads = get.Int("num_attention_heads");
    if (!hidden || !heads) {
      rd.Fail(scope.text_prefix + "head_dim", "nothing (missing)",
              "an integer > 0, or hidden_size and num_attention_heads");
    }
    m.head_dim = *hidden / *heads;
  }
  if (m.head_dim < 2 || m.head_dim > 65536) {
    rd.Fail(scope.text_prefix + "head_dim", std::to_string(m.head_dim), "a head dim in [2, 65536]");
  }
  m.max_pos = get.Int("max_position_embeddings").value_or(0);
  m.top_original_max = get.Int("original_max_position_embeddings");
  for (const char* key : {"rope_theta", "rotary_emb_base"}) {
    if (m.top_theta) break;
    m.top_theta = get.Number(key, "a number > 1");
    if (m.top_theta && !(*m.top_theta > 1.0)) {
      rd.Fail(scope.Where(key).second, Num(*m.top_theta), "a number > 1");
    }
  }
  m.top_prf = get.Number("partial_rotary_factor", "a number in (0, 1]");
  if (!m.top_prf) m.top_prf = get.Number("rotary_pct", "a number in (0, 1]");
  if (!m.top_prf) {
    if (const auto rot = get.Int("rotary_dim")) {  // GPT-J: absolute rotary dim
      if (*rot > m.head_dim || *rot % 2 != 0) {
        rd.Fail(scope.Where("rotary_dim").second, std::to_string(*rot),
                "an even integer <= head_dim (" + std::to_string(m.head_dim) + ")");
      }
      m.top_prf = static_cast<double>(*rot) / static_cast<double>(m.head_dim);
    }
  }
  return m;
}

// Query and key/value head counts under their names in HF's model families
// (Falcon: n_head / n_head_kv, or multi_query for one kv head).
void ReadHeadCounts(const ScopedReader& get, ModelConfig& cfg) {
  for (const char* key : {"num_attention_heads", "n_head", "n_heads"}) {
    if (const auto h = get.Int(key)) {
      if (*h < 1) get.rd.Fail(get.scope.Where(key).second, std::to_string(*h), "an integer >= 1");
      cfg.num_heads = *h;
      break;
    }
  }
  for (const char* key : {"num_key_value_heads", "num_kv_heads", "n_head_kv"}) {
    if (const auto h = get.Int(key)) {
      if (*h < 1 || (cfg.num_heads > 0 && cfg.num_heads % *h != 0)) {
        get.rd.Fail(get.scope.Where(key).second, std::to_string(*h),
                    "an integer >= 1 that divides the head count " + std::to_string(cfg.num_heads));
      }
      cfg.num_kv_heads = *h;
      break;
    }
  }
  if (cfg.num_kv_heads == 0) {
    const auto [obj, path] = get.scope.Where("multi_query");
    const auto mq = obj != nullptr ? get.rd.Bool(*obj, "multi_query", path) : std::nullopt;
    cfg.num_kv_heads = mq && *mq && cfg.num_heads > 0 ? 1 : cfg.num_heads;
  }
}

// The rope dict (rope_parameters, else the legacy rope_scaling): one layer
// per layer type when nested, else one (plus Gemma 3's sliding layers).
void ParseRopeLayers(const ScopedReader& get, ModelFields& m, ModelConfig& cfg) {
  const Reader& rd = get.rd;
  const Scope& scope = get.scope;
  auto [dict_obj, dict_path] = scope.Where("rope_parameters");
  std::string dict_key = "rope_parameters";
  if (dict_obj == nullptr) {
    std::tie(dict_obj, dict_path) = scope.Where("rope_scaling");
    dict_key = "rope_scaling";
  }
  const json empty = json::object();
  const json* dict = dict_obj != nullptr ? &(*dict_obj)[dict_key] : &empty;
  if (!dict->is_object()) rd.Fail(dict_path, Show(*dict), "an object of rope parameters");
  m.nested = !dict->empty();
  for (const auto& [key, value] : dict->items()) m.nested = m.nested && value.is_object();
  if (m.nested) {
    for (const auto& [key, value] : dict->items()) {
      cfg.layers.push_back(ParseLayer(
          rd, scope, m, LayerSource{value, dict_path + "." + key, key, {}}, cfg.warnings));
    }
    return;
  }
  const auto local = get.Number("rope_local_base_freq", "a number > 1");
  cfg.layers.push_back(ParseLayer(
      rd, scope, m,
      LayerSource{*dict, dict_obj != nullptr ? dict_path : "", local ? "full_attention" : "", {}},
      cfg.warnings));
  if (local) {  // Gemma 3: sliding layers use default rope with the local base.
    const json sliding = {{"rope_type", "default"}};
    cfg.layers.push_back(ParseLayer(rd, scope, m,
                                    LayerSource{sliding, scope.text_prefix + "rope_local_base_freq",
                                                "sliding_attention", local},
                                    cfg.warnings));
  }
}

// DeepSeek MLA: interleaved pairing by default, and with yarn's
// mscale_all_dim the softmax scale (qk_nope + qk_rope)^-0.5 * mscale^2.
void ReadDeepSeek(const ScopedReader& get, const ModelFields& m, std::int64_t qk_rope,
                  ModelConfig& cfg) {
  const RopeScalingParams& first = SelectLayerRope(cfg, "").scaling;
  auto [ri_obj, ri_path] = get.scope.Where("rope_interleave");
  const bool interleave = ri_obj == nullptr || *get.rd.Bool(*ri_obj, "rope_interleave", ri_path);
  cfg.pairing = interleave ? RopePairing::kInterleaved : RopePairing::kHalfSplit;
  if (first.type != RopeScalingType::kYarn || !first.mscale_all_dim ||
      *first.mscale_all_dim == 0.0) {
    return;
  }
  const auto nope = get.Int("qk_nope_head_dim");
  if (!nope) {
    get.rd.Fail(get.scope.text_prefix + "qk_nope_head_dim", "nothing (missing)",
                "an integer > 0 (DeepSeek softmax scale uses qk_nope_head_dim + qk_rope_head_dim)");
  }
  const double factor = first.factor
                            ? *first.factor
                            : static_cast<double>(m.max_pos) /
                                  static_cast<double>(first.original_max_position_embeddings);
  const double mscale = YarnGetMscale(factor, *first.mscale_all_dim);
  cfg.deepseek_softmax_scale =
      std::pow(static_cast<double>(*nope + qk_rope), -0.5) * mscale * mscale;
}

}  // namespace

ModelConfig ParseModelConfig(std::string_view json_text, std::string_view source) {
  const Reader rd{std::string(source)};
  const json root = ParseJson(json_text, source);
  if (!root.is_object()) rd.Fail("(top level)", Show(root), "a JSON object");
  Scope scope{&root, "", &root};
  if (const json* tc = Reader::Find(root, "text_config")) {
    if (!tc->is_object()) rd.Fail("text_config", Show(*tc), "an object (the text model's config)");
    scope = Scope{tc, "text_config.", &root};
  }
  const ScopedReader get{rd, scope};
  ModelConfig cfg;
  cfg.source = std::string(source);
  if (const json* mt = Reader::Find(*scope.text, "model_type"); mt != nullptr && mt->is_string()) {
    cfg.model_type = mt->get<std::string>();
  } else if (const json* mt2 = Reader::Find(root, "model_type");
             mt2 != nullptr && mt2->is_string()) {
    cfg.model_type = mt2->get<std::string>();
  }
  if (ParseAlibi(rd, scope, cfg)) {
    cfg.num_heads = cfg.num_kv_heads = cfg.alibi->num_heads;  // BLOOM and MPT: no GQA
    return cfg;
  }
  ReadHeadCounts(get, cfg);
  const auto qk_rope = get.Int("qk_rope_head_dim");
  ModelFields m = ReadModelFields(get, qk_rope);
  cfg.head_dim = m.head_dim;
  cfg.max_position_embeddings = m.max_pos;
  ParseRopeLayers(get, m, cfg);
  const RopeScalingParams& first = SelectLayerRope(cfg, "").scaling;
  cfg.original_max_position_embeddings = first.original_max_position_embeddings > 0
                                             ? first.original_max_position_embeddings
                                             : m.top_original_max.value_or(m.max_pos);
  if (qk_rope) ReadDeepSeek(get, m, *qk_rope, cfg);
  return cfg;
}

ModelConfig LoadModelConfig(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw IoError(path + ": is a directory, expected a config.json or .gguf file");
  }
  if (IsGgufFile(path)) return LoadGgufModelConfig(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open for reading");
  if (std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) == 0) {
    throw IoError(path + ": the file is empty (0 bytes), expected a config.json or .gguf file");
  }
  if (std::filesystem::path(path).extension() == ".gguf") {
    throw IoError(path + ": not a GGUF file (the first 4 bytes are not \"GGUF\")");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw IoError(path + ": read failed");
  return ParseModelConfig(ss.str(), path);
}

const LayerRope& SelectLayerRope(const ModelConfig& config, std::string_view layer_type) {
  if (config.alibi) {
    throw ConfigError(config.source + ": the model uses ALiBi (" +
                      std::to_string(config.alibi->num_heads) + " heads), not RoPE");
  }
  if (config.layers.empty()) throw ConfigError(config.source + ": no rope layers");
  std::string names;
  bool has_default = false;
  for (const LayerRope& l : config.layers) {
    if (l.layer_type == layer_type) return l;
    if (l.layer_type.empty()) {
      has_default = true;
    } else {
      names += (names.empty() ? "" : ", ") + l.layer_type;
    }
  }
  if (names.empty()) {
    names = "none (the model has one rope for every layer: leave layer_type empty)";
  } else if (has_default) {
    names += ", or empty for the model's default rope";
  }
  if (layer_type.empty()) {
    for (const LayerRope& l : config.layers) {
      if (l.layer_type == "full_attention") return l;
    }
    return config.layers.front();
  }
  throw InvalidArgument(ArgMessage("layer_type", std::string(layer_type),
                                   "one of the config's layer types: " + names));
}

RopeScaling ModelRopeScaling(const ModelConfig& config, std::string_view layer_type,
                             std::int64_t seq_len, RopeNumerics numerics) {
  RopeScalingParams p = SelectLayerRope(config, layer_type).scaling;
  p.numerics = numerics;
  return ComputeRopeScaling(p, seq_len);
}

RopeParams ModelRopeParams(const ModelConfig& config, std::string_view layer_type,
                           std::int64_t seq_len, RopeNumerics numerics) {
  const RopeScaling s = ModelRopeScaling(config, layer_type, seq_len, numerics);
  RopeParams rp;
  rp.head_dim = config.head_dim;
  rp.rotary_dim = s.rotary_dim;
  rp.theta = SelectLayerRope(config, layer_type).scaling.theta;
  rp.pairing = RopePairing::kHalfSplit;
  rp.numerics = numerics;
  rp.frequencies = s.frequencies;
  return rp;
}

}  // namespace posenc
