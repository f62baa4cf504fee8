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
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "posenc/alibi.h"
#include "posenc/error.h"
#include "posenc/gguf.h"

namespace posenc {

namespace {

using json = nlohmann::json;

// Deepest nesting of objects and arrays a config may have.
constexpr int kMaxJsonDepth = 64;

// Shortest text of a number ("0.3", "4", "1e+06").
std::string Num(double d) {
  if (d == std::floor(d) && std::abs(d) < 1e15) return std::to_string(static_cast<std::int64_t>(d));
  return json(d).dump();
}

std::string Show(const json& v) {
  std::string text = v.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text + " (" + v.type_name() + ")";
}

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void Fail(const std::string& path, const std::string& got,
                         const std::string& expected) const {
    throw ConfigError(source_ + ": " + path + ": got " + got + ", expected " + expected);
  }

  // Present and non-null.
  static const json* Find(const json& obj, const std::string& key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }

  std::optional<double> Number(const json& obj, const std::string& key, const std::string& path,
                               const std::string& expected = "a number") const {
    const json* v = Find(obj, key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) Fail(path, Show(*v), expected);
    const double d = v->get<double>();
    if (!std::isfinite(d)) Fail(path, Show(*v), expected);
    return d;
  }

  std::optional<std::int64_t> Int(const json& obj, const std::string& key, const std::string& path,
                                  const std::string& expected = "an integer > 0") const {
    const json* v = Find(obj, key);
    if (v == nullptr) return std::nullopt;
    if (v->is_number_integer()) {
      const auto i = v->get<std::int64_t>();
      if (i <= 0) Fail(path, Show(*v), expected);
      return i;
    }
    if (v->is_number_float()) {
      const double d = v->get<double>();
      if (d == std::floor(d) && d > 0 && d < 9e15) return static_cast<std::int64_t>(d);
    }
    Fail(path, Show(*v), expected);
  }

  std::optional<bool> Bool(const json& obj, const std::string& key, const std::string& path) const {
    const json* v = Find(obj, key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) Fail(path, Show(*v), "true or false");
    return v->get<bool>();
  }

  std::vector<double> NumberList(const json& v, const std::string& path) const {
    if (!v.is_array()) Fail(path, Show(v), "a list of numbers");
    std::vector<double> out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string p = path + "[" + std::to_string(i) + "]";
      if (!v[i].is_number()) Fail(p, Show(v[i]), "a number");
      out.push_back(v[i].get<double>());
      if (!std::isfinite(out.back()) || out.back() <= 0.0) Fail(p, Show(v[i]), "a finite number > 0");
    }
    return out;
  }

  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

// A key looked up in the text model first, then at the top level.
struct Scope {
  const json* text;
  std::string text_prefix;  // "text_config." or ""
  const json* root;

  std::pair<const json*, std::string> Where(const std::string& key) const {
    if (Reader::Find(*text, key) != nullptr) return {text, text_prefix + key};
    if (text != root && Reader::Find(*root, key) != nullptr) return {root, key};
    return {nullptr, text_prefix + key};
  }
};

// Keys each rope type reads (HF's required + optional keys), plus the ones
// every type may carry.
const std::set<std::string>& AllowedKeys(RopeScalingType type) {
  using T = RopeScalingType;
  static const std::set<std::string> common = {"rope_type", "type", "rope_theta",
                                               "partial_rotary_factor", "mrope_section",
                                               "mrope_interleaved"};
  static const auto with = [](std::initializer_list<const char*> extra) {
    std::set<std::string> s = common;
    for (const char* k : extra) s.insert(k);
    return s;
  };
  static const std::set<std::string> def = common, linear = with({"factor"}),
                                      ntk = with({"factor", "alpha"}),
                                      yarn = with({"factor", "original_max_position_embeddings",
                                                   "attention_factor", "beta_fast", "beta_slow",
                                                   "mscale", "mscale_all_dim", "truncate"}),
                                      llama3 = with({"factor", "original_max_position_embeddings",
                                                     "low_freq_factor", "high_freq_factor"}),
                                      longrope = with({"short_factor", "long_factor", "factor",
                                                       "original_max_position_embeddings",
                                                       "attention_factor"}),
                                      prop = with({"factor"});
  switch (type) {
    case T::kDefault: return def;
    case T::kLinear:
    case T::kDynamic: return linear;
    case T::kNtk: return ntk;
    case T::kYarn: return yarn;
    case T::kLlama3: return llama3;
    case T::kLongRope: return longrope;
    case T::kProportional: return prop;
  }
  return def;
}

struct ModelFields {
  std::int64_t head_dim = 0;
  std::int64_t max_pos = 0;
  std::optional<std::int64_t> top_original_max;
  std::optional<double> top_theta, top_prf;
  bool nested = false;
};

LayerRope ParseLayer(const Reader& rd, const Scope& scope, const ModelFields& m,
                     const json& dict, const std::string& path, const std::string& layer_type,
                     std::optional<double> theta_override, std::vector<std::string>& warnings) {
  using T = RopeScalingType;
  const auto at = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
  LayerRope layer;
  layer.layer_type = layer_type;
  RopeScalingParams& p = layer.scaling;
  p.numerics = RopeNumerics::kHF;
  p.head_dim = m.head_dim;
  p.max_position_embeddings = m.max_pos;

  // Type: rope_type, else the legacy `type`; "mrope" is default + sections.
  std::string type_name = "default";
  std::string type_path = at("rope_type");
  for (const char* key : {"type", "rope_type"}) {
    if (const json* v = Reader::Find(dict, key)) {
      if (!v->is_string()) rd.Fail(at(key), Show(*v), "a string naming the rope type");
      type_name = v->get<std::string>();
      type_path = at(key);
    }
  }
  if (type_name == "mrope") type_name = "default";
  try {
    p.type = ParseRopeScalingType(type_name);
  } catch (const InvalidArgument&) {
    rd.Fail(type_path, "\"" + type_name + "\"",
            "one of " + std::string(KnownRopeScalingTypes()) + " (\"mrope\" means default)");
  }
  const std::string tn(RopeScalingTypeName(p.type));
  for (const auto& [key, value] : dict.items()) {
    if (!AllowedKeys(p.type).contains(key)) {
      warnings.push_back(at(key) + ": unrecognized key for rope_type '" + tn + "', ignored");
    }
  }

  // theta and rotary fraction.
  const auto dict_theta = rd.Number(dict, "rope_theta", at("rope_theta"), "a number > 1");
  p.theta = dict_theta ? *dict_theta : theta_override ? *theta_override : m.top_theta ? *m.top_theta : 10000.0;
  if (!(p.theta > 1.0)) rd.Fail(at("rope_theta"), Num(p.theta), "a number > 1");
  const auto dict_prf = rd.Number(dict, "partial_rotary_factor", at("partial_rotary_factor"),
                                  "a number in (0, 1]");
  if (dict_prf && m.top_prf && *dict_prf != *m.top_prf) {
    warnings.push_back(at("partial_rotary_factor") + ": " + Num(*dict_prf) +
                       " differs from the top-level value " + Num(*m.top_prf) +
                       "; using the top-level value (HF standardize_rope_params)");
  }
  p.partial_rotary_factor = m.top_prf ? *m.top_prf : dict_prf ? *dict_prf : 1.0;
  if (!(p.partial_rotary_factor > 0.0 && p.partial_rotary_factor <= 1.0)) {
    rd.Fail(at("partial_rotary_factor"), Num(p.partial_rotary_factor), "a number in (0, 1]");
  }
  const std::int64_t d = p.RotaryDim();
  if (p.type != T::kProportional && (d < 2 || d % 2 != 0)) {
    rd.Fail(at("partial_rotary_factor"), Num(p.partial_rotary_factor),
            "a fraction giving an even rotary dim >= 2 (head_dim " + std::to_string(m.head_dim) +
                " * factor = " + std::to_string(d) + ")");
  }
  if ((p.type == T::kDynamic || p.type == T::kNtk) && d < 4) {
    rd.Fail(at("partial_rotary_factor"), Num(p.partial_rotary_factor),
            "a rotary dim >= 4 for NTK scaling (got " + std::to_string(d) + ")");
  }

  // factor.
  const std::string factor_expect =
      p.type == T::kProportional ? "a number > 0" : "a number >= 1 for rope_type '" + tn + "'";
  p.factor = rd.Number(dict, "factor", at("factor"), factor_expect);
  if (p.type == T::kNtk && !p.factor) p.factor = rd.Number(dict, "alpha", at("alpha"), factor_expect);
  const bool factor_required = p.type == T::kLinear || p.type == T::kDynamic ||
                               p.type == T::kNtk || p.type == T::kLlama3;
  if (!p.factor && factor_required) rd.Fail(at("factor"), "nothing (missing)", factor_expect);
  if (p.factor) {
    const bool ok = p.type == T::kProportional ? *p.factor > 0.0 : *p.factor >= 1.0;
    if (!ok) rd.Fail(at("factor"), Num(*p.factor), factor_expect);
  }
  if (p.type == T::kDynamic && m.max_pos <= 0) {
    rd.Fail(scope.text_prefix + "max_position_embeddings", "nothing (missing)",
            "an integer > 0 (rope_type 'dynamic' scales relative to it)");
  }

  // original_max_position_embeddings (Phi-3's top-level value has priority).
  if (p.type == T::kYarn || p.type == T::kLlama3 || p.type == T::kLongRope) {
    const auto in_dict = rd.Int(dict, "original_max_position_embeddings",
                                at("original_max_position_embeddings"));
    const auto orig = (m.top_original_max && !m.nested) ? m.top_original_max : in_dict;
    p.original_max_position_embeddings = orig ? *orig : m.max_pos;
    if (p.original_max_position_embeddings <= 0) {
      rd.Fail(at("original_max_position_embeddings"), "nothing (missing)",
              "an integer > 0 (or max_position_embeddings) for rope_type '" + tn + "'");
    }
    if (!p.factor && p.type != T::kLlama3) {
      if (m.max_pos <= 0) {
        rd.Fail(at("factor"), "nothing (missing)",
                "a number >= 1, or max_position_embeddings to derive it from for rope_type '" + tn + "'");
      }
      const double derived = static_cast<double>(m.max_pos) /
                             static_cast<double>(p.original_max_position_embeddings);
      if (p.type == T::kYarn) {
        if (derived < 1.0) {
          rd.Fail(at("factor"), "nothing (missing; max/original = " + Num(derived) + ")",
                  "a number >= 1");
        }
        warnings.push_back(at("factor") + ": missing (HF's validator requires it); derived " +
                           Num(derived) + " = max_position_embeddings / original_max_position_embeddings");
      }
    }
  }

  switch (p.type) {
    case T::kYarn: {
      p.attention_factor = rd.Number(dict, "attention_factor", at("attention_factor"), "a number > 0");
      if (p.attention_factor && *p.attention_factor <= 0.0) {
        rd.Fail(at("attention_factor"), Num(*p.attention_factor), "a number > 0");
      }
      p.beta_fast = rd.Number(dict, "beta_fast", at("beta_fast"), "a number >= 0 (0 means 32)");
      p.beta_slow = rd.Number(dict, "beta_slow", at("beta_slow"), "a number >= 0 (0 means 1)");
      for (auto [key, v] : {std::pair{"beta_fast", p.beta_fast}, std::pair{"beta_slow", p.beta_slow}}) {
        if (v && *v < 0.0) rd.Fail(at(key), Num(*v), "a number >= 0");
      }
      const double bf = (p.beta_fast && *p.beta_fast != 0.0) ? *p.beta_fast : 32.0;
      const double bs = (p.beta_slow && *p.beta_slow != 0.0) ? *p.beta_slow : 1.0;
      if (bf < bs) {
        warnings.push_back(at("beta_fast") + ": beta_fast=" + Num(bf) +
                           " is smaller than beta_slow=" + Num(bs) + " (HF warns; used as given)");
      }
      p.mscale = rd.Number(dict, "mscale", at("mscale"));
      p.mscale_all_dim = rd.Number(dict, "mscale_all_dim", at("mscale_all_dim"));
      const auto truncate = rd.Bool(dict, "truncate", at("truncate"));
      if (truncate && m.nested) {
        warnings.push_back(at("truncate") + ": HF reads truncate only from a flat rope dict, so this "
                           "per-layer value is ignored (truncate=true), as in HF");
      } else if (truncate) {
        p.truncate = *truncate ? YarnTruncate::kTruncate : YarnTruncate::kExact;
      }
      if (p.factor && m.max_pos > 0) {
        const double implicit = static_cast<double>(m.max_pos) /
                                static_cast<double>(p.original_max_position_embeddings);
        if (implicit != *p.factor && implicit != 1.0) {
          warnings.push_back(at("factor") + ": explicit factor " + Num(*p.factor) +
                             " differs from max_position_embeddings / original_max_position_embeddings = " +
                             Num(implicit) + "; using the explicit factor (as HF)");
        }
      }
      break;
    }
    case T::kLongRope: {
      for (auto [key, list] : {std::pair{"short_factor", &p.short_factor},
                               std::pair{"long_factor", &p.long_factor}}) {
        const json* v = Reader::Find(dict, key);
        if (v == nullptr) rd.Fail(at(key), "nothing (missing)", "a list of rotary_dim/2 = " + std::to_string(d / 2) + " numbers");
        *list = rd.NumberList(*v, at(key));
        if (static_cast<std::int64_t>(list->size()) != d / 2) {
          rd.Fail(at(key), "a list of " + std::to_string(list->size()) + " numbers",
                  "rotary_dim/2 = " + std::to_string(d / 2) + " numbers");
        }
      }
      p.attention_factor = rd.Number(dict, "attention_factor", at("attention_factor"), "a number > 0");
      if (p.attention_factor && *p.attention_factor <= 0.0) {
        rd.Fail(at("attention_factor"), Num(*p.attention_factor), "a number > 0");
      }
      break;
    }
    case T::kLlama3: {
      const auto low = rd.Number(dict, "low_freq_factor", at("low_freq_factor"), "a number > 0");
      const auto high = rd.Number(dict, "high_freq_factor", at("high_freq_factor"), "a number > low_freq_factor");
      if (!low) rd.Fail(at("low_freq_factor"), "nothing (missing)", "a number > 0 (required for rope_type 'llama3')");
      if (!high) rd.Fail(at("high_freq_factor"), "nothing (missing)", "a number (required for rope_type 'llama3')");
      if (*low <= 0.0) rd.Fail(at("low_freq_factor"), Num(*low), "a number > 0");
      if (*high <= *low) {
        rd.Fail(at("high_freq_factor"), Num(*high),
                "a number > low_freq_factor (" + Num(*low) + ")");
      }
      p.low_freq_factor = *low;
      p.high_freq_factor = *high;
      if (m.max_pos > 0 && p.original_max_position_embeddings >= m.max_pos) {
        warnings.push_back(at("original_max_position_embeddings") + ": " +
                           std::to_string(p.original_max_position_embeddings) +
                           " is not below max_position_embeddings = " + std::to_string(m.max_pos) + " (HF warns)");
      }
      break;
    }
    case T::kProportional:
      if (!dict_prf && !m.top_prf) {
        warnings.push_back(at("partial_rotary_factor") + ": missing for rope_type 'proportional'; "
                           "1.0 makes it equivalent to linear scaling (HF warns)");
      }
      break;
    default: break;
  }

  // Multimodal sections: in the dict or at the top level.
  const auto [sec_obj, sec_path] = Reader::Find(dict, "mrope_section") != nullptr
                                       ? std::pair{&dict, at("mrope_section")}
                                       : scope.Where("mrope_section");
  if (sec_obj != nullptr) {
    const json& sec = (*sec_obj)["mrope_section"];
    if (!sec.is_array() || sec.size() != 3) rd.Fail(sec_path, Show(sec), "a list of 3 integers (t, h, w)");
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < 3; ++i) {
      if (!sec[i].is_number_integer() || sec[i].get<std::int64_t>() < 0) {
        rd.Fail(sec_path + "[" + std::to_string(i) + "]", Show(sec[i]), "an integer >= 0");
      }
      layer.mrope_section.push_back(sec[i].get<std::int64_t>());
      sum += layer.mrope_section.back();
    }
    if (sum != d / 2) {
      rd.Fail(sec_path, Show(sec), "sections summing to rotary_dim/2 = " + std::to_string(d / 2));
    }
    const auto [il_obj, il_path] = Reader::Find(dict, "mrope_interleaved") != nullptr
                                       ? std::pair{&dict, at("mrope_interleaved")}
                                       : scope.Where("mrope_interleaved");
    if (il_obj != nullptr && *rd.Bool(*il_obj, "mrope_interleaved", il_path)) {
      layer.mrope_layout = MRopeLayout::kInterleaved;
    }
  }
  ValidateRopeScalingParams(p);  // every rule above makes this pass; kept as an invariant
  return layer;
}

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
                         "a number > 0").value_or(8.0);
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

}  // namespace

ModelConfig ParseModelConfig(std::string_view json_text, std::string_view source) {
  const Reader rd{std::string(source)};
  json root;
  try {
    // Nesting is bounded before it is built: printing or copying a deeper
    // document recurses once per level and would overflow the stack.
    const json::parser_callback_t depth_limit = [&](int depth, json::parse_event_t, json&) {
      if (depth > kMaxJsonDepth) {
        throw ConfigError(std::string(source) + ": JSON nesting deeper than " +
                          std::to_string(kMaxJsonDepth) +
                          " levels (limit of the config loader; HF configs use fewer than 10)");
      }
      return true;
    };
    root = json::parse(json_text, depth_limit);
  } catch (const json::parse_error& e) {
    throw IoError(std::string(source) + ": not valid JSON: " + e.what());
  } catch (const json::out_of_range& e) {  // 406: a number beyond the double range
    throw ConfigError(std::string(source) +
                      ": a number does not fit in a double (|x| < 1.8e308): " + e.what());
  } catch (const json::exception& e) {
    throw ConfigError(std::string(source) + ": cannot read the JSON: " + e.what());
  }
  if (!root.is_object()) rd.Fail("(top level)", Show(root), "a JSON object");
  Scope scope{&root, "", &root};
  if (const json* tc = Reader::Find(root, "text_config")) {
    if (!tc->is_object()) rd.Fail("text_config", Show(*tc), "an object (the text model's config)");
    scope = Scope{tc, "text_config.", &root};
  }
  const auto get_int = [&](const std::string& key) {
    auto [obj, path] = scope.Where(key);
    return obj != nullptr ? rd.Int(*obj, key, path) : std::nullopt;
  };
  const auto get_num = [&](const std::string& key, const std::string& expected) {
    auto [obj, path] = scope.Where(key);
    return obj != nullptr ? rd.Number(*obj, key, path, expected) : std::nullopt;
  };

  ModelConfig cfg;
  cfg.source = std::string(source);
  if (const json* mt = Reader::Find(*scope.text, "model_type"); mt != nullptr && mt->is_string()) {
    cfg.model_type = mt->get<std::string>();
  } else if (const json* mt2 = Reader::Find(root, "model_type"); mt2 != nullptr && mt2->is_string()) {
    cfg.model_type = mt2->get<std::string>();
  }
  if (ParseAlibi(rd, scope, cfg)) return cfg;

  // Head dim.
  ModelFields m;
  const auto qk_rope = get_int("qk_rope_head_dim");
  if (qk_rope) {
    m.head_dim = *qk_rope;
  } else if (const auto hd = get_int("head_dim")) {
    m.head_dim = *hd;
  } else {
    const auto hidden = get_int("hidden_size");
    const auto heads = get_int("num_attention_heads");
    if (!hidden || !heads) {
      rd.Fail(scope.text_prefix + "head_dim", "nothing (missing)",
              "an integer > 0, or hidden_size and num_attention_heads");
    }
    m.head_dim = *hidden / *heads;
  }
  if (m.head_dim < 2 || m.head_dim > 65536) {
    rd.Fail(scope.text_prefix + "head_dim", std::to_string(m.head_dim), "a head dim in [2, 65536]");
  }
  cfg.head_dim = m.head_dim;
  m.max_pos = get_int("max_position_embeddings").value_or(0);
  cfg.max_position_embeddings = m.max_pos;
  m.top_original_max = get_int("original_max_position_embeddings");
  for (const char* key : {"rope_theta", "rotary_emb_base"}) {
    if (m.top_theta) break;
    m.top_theta = get_num(key, "a number > 1");
    if (m.top_theta && !(*m.top_theta > 1.0)) rd.Fail(scope.Where(key).second, Num(*m.top_theta), "a number > 1");
  }
  m.top_prf = get_num("partial_rotary_factor", "a number in (0, 1]");
  if (!m.top_prf) m.top_prf = get_num("rotary_pct", "a number in (0, 1]");
  if (!m.top_prf) {
    if (const auto rot = get_int("rotary_dim")) {  // GPT-J: absolute rotary dim
      if (*rot > m.head_dim || *rot % 2 != 0) {
        rd.Fail(scope.Where("rotary_dim").second, std::to_string(*rot),
                "an even integer <= head_dim (" + std::to_string(m.head_dim) + ")");
      }
      m.top_prf = static_cast<double>(*rot) / static_cast<double>(m.head_dim);
    }
  }

  // The rope dict: rope_parameters (new) or rope_scaling (legacy).
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
      cfg.layers.push_back(ParseLayer(rd, scope, m, value, dict_path + "." + key, key, std::nullopt, cfg.warnings));
    }
  } else {
    const auto local = get_num("rope_local_base_freq", "a number > 1");
    cfg.layers.push_back(ParseLayer(rd, scope, m, *dict, dict_obj != nullptr ? dict_path : "",
                                    local ? "full_attention" : "", std::nullopt, cfg.warnings));
    if (local) {  // Gemma 3: sliding layers use default rope with the local base.
      json sliding = {{"rope_type", "default"}};
      cfg.layers.push_back(ParseLayer(rd, scope, m, sliding, scope.text_prefix + "rope_local_base_freq",
                                      "sliding_attention", *local, cfg.warnings));
    }
  }

  const RopeScalingParams& first = SelectLayerRope(cfg, "").scaling;
  cfg.original_max_position_embeddings = first.original_max_position_embeddings > 0
                                             ? first.original_max_position_embeddings
                                             : m.top_original_max.value_or(m.max_pos);
  if (qk_rope) {  // DeepSeek MLA
    auto [ri_obj, ri_path] = scope.Where("rope_interleave");
    const bool interleave = ri_obj == nullptr || *rd.Bool(*ri_obj, "rope_interleave", ri_path);
    cfg.pairing = interleave ? RopePairing::kInterleaved : RopePairing::kHalfSplit;
    if (first.type == RopeScalingType::kYarn && first.mscale_all_dim && *first.mscale_all_dim != 0.0) {
      const auto nope = get_int("qk_nope_head_dim");
      if (!nope) {
        rd.Fail(scope.text_prefix + "qk_nope_head_dim", "nothing (missing)",
                "an integer > 0 (DeepSeek softmax scale uses qk_nope_head_dim + qk_rope_head_dim)");
      }
      const double factor = first.factor ? *first.factor
                                         : static_cast<double>(m.max_pos) /
                                               static_cast<double>(first.original_max_position_embeddings);
      const double mscale = YarnGetMscale(factor, *first.mscale_all_dim);
      cfg.deepseek_softmax_scale =
          std::pow(static_cast<double>(*nope + *qk_rope), -0.5) * mscale * mscale;
    }
  }
  return cfg;
}

ModelConfig LoadModelConfig(const std::string& path) {
  if (IsGgufFile(path)) return LoadGgufModelConfig(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open for reading");
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
  for (const LayerRope& l : config.layers) {
    if (l.layer_type == layer_type) return l;
    names += (names.empty() ? "" : ", ") + (l.layer_type.empty() ? std::string("\"\"") : l.layer_type);
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
