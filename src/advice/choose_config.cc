// posenc/choose.h, the --from part: reads an existing model and writes the exact change that
// gives it another RoPE frequency scheme, then checks the change with posenc's own loader before
// anyone sees it. config.json: a JSON merge patch (RFC 7386, nlohmann's merge_patch) following
// HF's modeling_rope_utils.py semantics (per type: ConfigJsonChange). GGUF: the same parameters
// applied to the loaded ModelConfig, answered with the GGUF keys and the llama.cpp options
// (GgufChange).
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "choose_internal.h"
#include "posenc/error.h"
#include "posenc/rope_scaling.h"

namespace posenc::advice {

using nlohmann::json;

namespace {

bool IsGgufFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::string(magic, 4) == "GGUF";
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("from: cannot read '" + path + "'");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

json Pairs(const RopeScaling& before, const RopeScaling& after) {
  json pairs = json::array();
  const std::size_t n = std::min(before.pairs.size(), after.pairs.size());
  if (n == 0) return pairs;
  for (std::size_t i : {std::size_t{0}, n / 4, n / 2, (3 * n) / 4, n - 1}) {
    const double b = before.pairs[i].wavelength, a = after.pairs[i].wavelength;
    pairs.push_back({{"pair", i},
                     {"wavelength_before", std::isfinite(b) ? json(b) : json("inf")},
                     {"wavelength_after", std::isfinite(a) ? json(a) : json("inf")},
                     {"region", RopePairRegionName(after.pairs[i].region)}});
    if (n == 1) break;
  }
  return pairs;
}

json Checked(const RopeScaling& before, const RopeScaling& after, std::int64_t max_pos) {
  double longest = 0;
  for (const auto& p : after.pairs) {
    if (std::isfinite(p.wavelength)) longest = std::max(longest, p.wavelength);
  }
  return {{"loaded", true},
          {"rope_type", RopeScalingTypeName(after.type)},
          {"factor", after.factor},
          {"effective_theta", after.effective_theta},
          {"attention_factor", after.frequencies.attention_factor},
          {"max_position_embeddings", max_pos},
          {"longest_wavelength", longest},
          {"pairs", Pairs(before, after)}};
}

// The JSON object of the text model and the path prefix of the patch.
struct RopeSite {
  json* model = nullptr;  // the object holding the rope keys
  bool text_config = false;
  std::string dict_key;    // "rope_parameters" or "rope_scaling"
  std::string nested_key;  // "full_attention" (or the first) when nested, else ""
};

// The text model's object (`text_config` when present) and the file's own
// convention: `rope_parameters` (flat, or its full_attention entry when
// nested per layer type) or the legacy `rope_scaling`.
RopeSite FindSite(json& root) {
  RopeSite s;
  s.text_config = root.contains("text_config") && root["text_config"].is_object();
  s.model = s.text_config ? &root["text_config"] : &root;
  json& m = *s.model;
  if (m.contains("rope_parameters") && m["rope_parameters"].is_object()) {
    s.dict_key = "rope_parameters";
    const json& rp = m["rope_parameters"];
    bool nested = !rp.empty();
    for (const auto& [k, v] : rp.items()) nested = nested && v.is_object();
    if (nested) s.nested_key = rp.contains("full_attention") ? "full_attention" : rp.begin().key();
  } else {
    s.dict_key = "rope_scaling";
  }
  return s;
}

// The config.json change: a JSON merge patch on the text model's object
// (FindSite), in the file's own convention. Per type (factor f, train
// length L, target length T, base b, rotary dim d), following HF's
// modeling_rope_utils.py semantics:
//  - linear: {rope_type linear, factor f}, max_position_embeddings T;
//  - yarn: {rope_type yarn, factor f, original_max_position_embeddings L},
//    max_position_embeddings T (a top-level original_max_position_embeddings,
//    Phi-3's, takes priority in HF and is set to L too);
//  - dynamic: {rope_type dynamic, factor f} with max_position_embeddings left
//    at L: HF's dynamic base uses max_position_embeddings as the original
//    length (b' = b (f n / max_pos - f + 1)^(d/(d-2)) at length n);
//  - ntk (static NTK-aware): transformers has no static type, so the change is
//    the rescaled base itself (rope_theta = b f^(d/(d-2)), posenc's ntk
//    scaling) with no scaling block, which every engine reads;
//  - default: no scaling block, max_position_embeddings T.
// The patched text is parsed by ParseModelConfig and its frequencies at T are
// computed by ModelRopeScaling; the answer shows both.
json ConfigJsonChange(const FromModel& model, const std::string& type, double factor,
                      std::int64_t train, std::int64_t target, double ntk_theta) {
  json root = json::parse(model.json_text);
  RopeSite site = FindSite(root);
  json& m = *site.model;
  json block = json::object();  // the new rope keys (merge patch of the dict)
  const json* old = nullptr;
  if (m.contains(site.dict_key) && m[site.dict_key].is_object()) {
    old = site.nested_key.empty() ? &m[site.dict_key] : &m[site.dict_key][site.nested_key];
  }
  if (old != nullptr) {
    // Drop the old scaling keys; keep theta and the rotary fraction, and a
    // YaRN model's own YaRN settings (beta_fast/slow, mscale, mscale_all_dim:
    // DeepSeek's softmax scale depends on them) when it stays YaRN.
    const std::string old_type = old->value("rope_type", old->value("type", std::string()));
    const bool yarn_to_yarn = old_type == "yarn" && type == "yarn";
    for (const auto& [k, v] : old->items()) {
      const bool keep = k == "rope_theta" || k == "partial_rotary_factor" ||
                        (yarn_to_yarn && (k == "beta_fast" || k == "beta_slow" || k == "mscale" ||
                                          k == "mscale_all_dim" || k == "truncate"));
      if (!keep) block[k] = nullptr;
    }
  }
  json model_patch = json::object();
  std::int64_t max_pos = target;
  if (type == "linear" || type == "yarn" || type == "dynamic") {
    block["rope_type"] = type;
    block["factor"] = factor;
    if (type == "yarn") block["original_max_position_embeddings"] = train;
    if (type == "dynamic") max_pos = train;
  } else if (site.dict_key == "rope_parameters") {
    block["rope_type"] = "default";
  } else {
    block = nullptr;  // no rope_scaling at all
  }
  if (type == "ntk") {
    if (site.dict_key == "rope_parameters" && block.is_object()) {
      block["rope_theta"] = ntk_theta;
    } else {
      model_patch["rope_theta"] = ntk_theta;
    }
  }
  if (site.dict_key == "rope_parameters" && !site.nested_key.empty()) {
    model_patch[site.dict_key][site.nested_key] = block;
  } else {
    model_patch[site.dict_key] = block;
  }
  model_patch["max_position_embeddings"] = max_pos;
  if (m.contains("original_max_position_embeddings") && type == "yarn") {
    model_patch["original_max_position_embeddings"] = train;
  }
  json patch = site.text_config ? json{{"text_config", model_patch}} : model_patch;
  root.merge_patch(patch);
  const ModelConfig changed = ParseModelConfig(root.dump(), model.path + " (changed)");
  const RopeScaling before = ModelRopeScaling(model.config, "", target);
  const RopeScaling after = ModelRopeScaling(changed, "", target);
  const json& changed_model = site.text_config ? root["text_config"] : root;
  json result = {
      {"max_position_embeddings", changed_model.value("max_position_embeddings", json())}};
  if (changed_model.contains(site.dict_key)) result[site.dict_key] = changed_model[site.dict_key];
  if (changed_model.contains("rope_theta")) result["rope_theta"] = changed_model["rope_theta"];
  json out = {{"format", "config.json"},
              {"merge_patch", patch},
              {"result", result},
              {"checked", Checked(before, after, changed.max_position_embeddings)}};
  if (type == "ntk") {
    out["note"] = Format(
        "static NTK-aware scaling as the rescaled base (transformers has no "
        "static 'ntk' type); vLLM also reads {\"rope_type\": \"ntk\", "
        "\"factor\": %g}",
        factor);
  } else if (type == "dynamic") {
    out["note"] =
        "max_position_embeddings stays at the train length: HF's dynamic NTK uses it "
        "as the original length";
  }
  if (!changed.warnings.empty()) out["checked"]["loader_warnings"] = changed.warnings;
  return out;
}

// The GGUF change: the same parameters applied to the loaded ModelConfig and
// checked by posenc's scaling code; the answer gives the GGUF keys and the
// llama.cpp options (llama.cpp has no dynamic NTK).
json GgufChange(const FromModel& model, const std::string& type, double factor, std::int64_t train,
                std::int64_t target, double ntk_theta) {
  const LayerRope& layer = SelectLayerRope(model.config, "");
  RopeScalingParams p = layer.scaling;
  const std::string arch = model.config.model_type.empty() ? "llama" : model.config.model_type;
  json keys = json::object();
  std::string options;
  p.factor.reset();
  p.attention_factor.reset();
  if (type == "linear" || type == "yarn") {
    p.type = ParseRopeScalingType(type);
    p.factor = factor;
    p.original_max_position_embeddings = train;
    p.max_position_embeddings = target;
    keys[arch + ".rope.scaling.type"] = type;
    keys[arch + ".rope.scaling.factor"] = factor;
    keys[arch + ".rope.scaling.original_context_length"] = train;
    options = Format("--rope-scaling %s --rope-scale %g%s", type.c_str(), factor,
                     type == "yarn"
                         ? Format(" --yarn-orig-ctx %lld", static_cast<long long>(train)).c_str()
                         : "");
  } else if (type == "dynamic") {
    p.type = RopeScalingType::kDynamic;
    p.factor = factor;
    p.max_position_embeddings = train;
  } else {
    p.type = RopeScalingType::kDefault;
    p.max_position_embeddings = target;
    keys[arch + ".rope.scaling.type"] = "none";
    if (type == "ntk") {
      p.theta = ntk_theta;
      keys[arch + ".rope.freq_base"] = ntk_theta;
      options = Format("--rope-freq-base %.17g", ntk_theta);
    }
  }
  keys[arch + ".context_length"] = target;
  options += Format("%s-c %lld", options.empty() ? "" : " ", static_cast<long long>(target));
  ValidateRopeScalingParams(p);
  const RopeScaling before = ComputeRopeScaling(layer.scaling, target);
  const RopeScaling after = ComputeRopeScaling(p, target);
  json out = {{"format", "gguf"}, {"keys", keys}, {"checked", Checked(before, after, target)}};
  if (type == "dynamic") {
    out["llama.cpp"] = nullptr;
    out["note"] = "llama.cpp has no dynamic NTK (its frequency base is fixed per context)";
  } else {
    out["llama.cpp"] = options;
  }
  if (!p.freq_factors.empty()) {
    out["note"] =
        "the file's rope_freqs tensor (per-pair divisors) stays applied by llama.cpp "
        "and is included in the check";
  }
  return out;
}

}  // namespace

FromModel LoadFromModel(const std::string& path) {
  FromModel m;
  m.path = path;
  m.config = LoadModelConfig(path);
  if (!IsGgufFile(path)) m.json_text = ReadText(path);
  if (m.config.alibi) {
    m.scheme = "alibi";
    m.rope_type = "none";
  } else {
    const LayerRope& layer = SelectLayerRope(m.config, "");
    m.scheme = layer.mrope_section.empty() ? "rope" : "mrope";
    m.rope_type = std::string(RopeScalingTypeName(layer.scaling.type));
  }
  m.context_length = m.config.max_position_embeddings;
  m.train_length = m.config.original_max_position_embeddings > 0
                       ? m.config.original_max_position_embeddings
                       : m.config.max_position_embeddings;
  return m;
}

json SuggestRopeChange(const FromModel& model, const std::string& type, std::int64_t train,
                       std::int64_t target) {
  const double factor = static_cast<double>(target) / static_cast<double>(train);
  // The static NTK-aware base by posenc's scaling code (rope_type ntk).
  RopeScalingParams ntk = SelectLayerRope(model.config, "").scaling;
  double ntk_theta = ntk.theta;
  if (type == "ntk" && factor > 1) {
    ntk.type = RopeScalingType::kNtk;
    ntk.factor = factor;
    ntk.freq_factors.clear();
    ntk_theta = ComputeRopeScaling(ntk, target).effective_theta;
  }
  const std::string t = factor > 1 ? type : "default";
  json out = model.json_text.empty() ? GgufChange(model, t, factor, train, target, ntk_theta)
                                     : ConfigJsonChange(model, t, factor, train, target, ntk_theta);
  out["rope_type"] = t;
  out["factor"] = factor;
  return out;
}

}  // namespace posenc::advice
