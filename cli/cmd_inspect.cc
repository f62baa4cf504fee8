// `posenc inspect CONFIG.json|MODEL.gguf`: what a Hugging Face config (or a
// llama.cpp GGUF file, read by posenc/gguf.h: metadata only) makes of RoPE
// (or ALiBi). User-facing behaviour: the --help text and README.md.
//
//   posenc inspect CONFIG.json|MODEL.gguf [--seq-len L] [--layer-type T] [--json]
//       [--numerics hf|accurate] [--longrope-switch seq_len|context|always_long]
//       [--context-length N]
//
// Output: PrintText, PrintJson, or PrintAlibi for ALiBi models (what each
// prints: above it). Loader warnings go to stderr.
#include <cmath>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "posenc/error.h"
#include "posenc/model_config.h"
#include "posenc/rope_scaling.h"

namespace posenc::cli {
namespace {

struct InspectArgs {
  std::string config;
  std::int64_t seq_len = 0;
  std::string layer_type;
  bool json = false;
  std::string numerics = "hf";
  std::string longrope_switch = "seq_len";
  std::int64_t context_length = 0;
};

std::string LayerNames(const ModelConfig& cfg) {
  std::string names;
  for (const LayerRope& l : cfg.layers) {
    if (!l.layer_type.empty()) names += (names.empty() ? "" : ", ") + l.layer_type;
  }
  return names;
}

std::string SourceLine(const ModelConfig& cfg) {
  return fmt::format("config: {}{}{}\n", cfg.source,
                     cfg.model_type.empty() ? "" : " (" + cfg.model_type + ")",
                     cfg.format == "gguf" ? " [GGUF]" : "");
}

// ALiBi models (BLOOM, MPT, ...): position_encoding "alibi", num_heads,
// max_bias and slopes instead of the RoPE fields (text: one row per head).
void PrintAlibi(const ModelConfig& cfg, const InspectArgs& a) {
  const ModelAlibi& al = *cfg.alibi;
  if (a.json) {
    nlohmann::json j;
    j["config"] = cfg.source;
    j["format"] = cfg.format;
    j["model_type"] = cfg.model_type;
    j["position_encoding"] = "alibi";
    j["num_heads"] = al.num_heads;
    j["max_bias"] = al.max_bias;
    j["slopes"] = al.slopes;
    j["head_dim"] = cfg.head_dim;
    j["max_position_embeddings"] = cfg.max_position_embeddings;
    j["warnings"] = cfg.warnings;
    std::cout << j.dump(1) << '\n';
    return;
  }
  std::string out = SourceLine(cfg);
  out +=
      fmt::format("position encoding: ALiBi, {} heads, max bias {}\n", al.num_heads, al.max_bias);
  out +=
      fmt::format("context: {}\n\n{:>5}  {:>14}\n", cfg.max_position_embeddings, "head", "slope");
  for (std::size_t h = 0; h < al.slopes.size(); ++h) {
    out += fmt::format("{:>5}  {:>14.8g}\n", h, al.slopes[h]);
  }
  std::cout << out;
}

// Text: a model summary (rope type, head and rotary dims, theta, attention
// factor, original and extended context, yarn correction range, longrope
// factors in use, DeepSeek softmax correction, M-RoPE sections), then one
// table row per frequency pair (index, inv_freq, wavelength in tokens, ratio
// to the unscaled table, region).
void PrintText(const ModelConfig& cfg, const LayerRope& layer, const RopeScaling& s,
               const InspectArgs& a) {
  std::string out = SourceLine(cfg);
  if (!layer.layer_type.empty()) {
    out += fmt::format("layer type: {} (config has: {})\n", layer.layer_type, LayerNames(cfg));
  }
  out += fmt::format("rope type: {}\n", RopeScalingTypeName(s.type));
  out += fmt::format("head dim: {}   rotary dim: {}   pairing: {}\n", s.head_dim, s.rotary_dim,
                     RopePairingName(cfg.pairing));
  out += fmt::format("theta: {}", layer.scaling.theta);
  if (s.effective_theta != layer.scaling.theta)
    out += fmt::format("   effective theta: {}", s.effective_theta);
  out += fmt::format("\nfactor: {}   attention factor (cos/sin): {}\n", s.factor,
                     s.frequencies.attention_factor);
  out += fmt::format("context: original {} -> extended {}\n", cfg.original_max_position_embeddings,
                     cfg.max_position_embeddings);
  if (a.seq_len > 0) out += fmt::format("evaluated at seq_len: {}\n", a.seq_len);
  if (s.type == RopeScalingType::kYarn) {
    out += fmt::format(
        "yarn correction range (pairs): [{}, {}] ({})\n", s.yarn_low, s.yarn_high,
        layer.scaling.truncate == YarnTruncate::kTruncate ? "truncated" : "not truncated");
  }
  if (s.longrope_factors != LongRopeFactors::kNotLongRope) {
    out += fmt::format("longrope factors in use: {} (switch policy {})\n",
                       LongRopeFactorsName(s.longrope_factors), a.longrope_switch);
  }
  if (cfg.deepseek_softmax_scale) {
    out += fmt::format(
        "DeepSeek softmax scale: {} = qk_head_dim^-0.5 x get_mscale(factor, mscale_all_dim)^2 "
        "(multiplier {}, separate from the cos/sin factor)\n",
        *cfg.deepseek_softmax_scale, s.deepseek_softmax_factor);
  }
  if (!layer.scaling.freq_factors.empty()) {
    out += "frequency divisors per pair (GGUF rope_freqs): applied after the scaling\n";
  }
  if (!layer.mrope_section.empty()) {
    out += fmt::format("mrope_section: [{}, {}, {}] ({})\n", layer.mrope_section[0],
                       layer.mrope_section[1], layer.mrope_section[2],
                       MRopeLayoutName(layer.mrope_layout));
  }
  out += fmt::format("\n{:>5}  {:>14}  {:>14}  {:>12}  {}\n", "pair", "inv_freq", "wavelength",
                     "ratio", "region");
  for (const RopePairInfo& p : s.pairs) {
    out += fmt::format("{:>5}  {:>14.8g}  {:>14.8g}  {:>12.6g}  {}\n", p.index, p.inv_freq,
                       p.wavelength, p.ratio_to_default, RopePairRegionName(p.region));
  }
  std::cout << out;
}

// --json: the same as PrintText as one object with at least rope_type,
// head_dim, rotary_dim, theta, attention_factor, inv_freq,
// max_position_embeddings, original_max_position_embeddings and pairs, plus
// position_encoding "rope" and format ("config.json" or "gguf");
// freq_factors when the model divides its frequencies (a GGUF `rope_freqs`
// tensor). Under --numerics hf (default) inv_freq holds float32 values,
// printed as the shortest double that reads back to them.
void PrintJson(const ModelConfig& cfg, const LayerRope& layer, const RopeScaling& s,
               const InspectArgs& a) {
  nlohmann::json j;
  j["config"] = cfg.source;
  j["format"] = cfg.format;
  j["model_type"] = cfg.model_type;
  j["position_encoding"] = "rope";
  j["layer_type"] = layer.layer_type;
  j["rope_type"] = RopeScalingTypeName(s.type);
  j["head_dim"] = s.head_dim;
  j["rotary_dim"] = s.rotary_dim;
  j["pairing"] = RopePairingName(cfg.pairing);
  j["theta"] = layer.scaling.theta;
  j["effective_theta"] = s.effective_theta;
  j["factor"] = s.factor;
  j["attention_factor"] = s.frequencies.attention_factor;
  j["numerics"] = a.numerics;
  j["seq_len"] = a.seq_len;
  j["max_position_embeddings"] = cfg.max_position_embeddings;
  j["original_max_position_embeddings"] = cfg.original_max_position_embeddings;
  j["inv_freq"] = s.frequencies.inv_freq;
  if (!layer.scaling.freq_factors.empty()) j["freq_factors"] = layer.scaling.freq_factors;
  if (s.type == RopeScalingType::kYarn) j["yarn_correction_range"] = {s.yarn_low, s.yarn_high};
  if (s.longrope_factors != LongRopeFactors::kNotLongRope) {
    j["longrope_factors"] = LongRopeFactorsName(s.longrope_factors);
    j["longrope_switch"] = a.longrope_switch;
  }
  j["deepseek_softmax_scale"] = cfg.deepseek_softmax_scale
                                    ? nlohmann::json(*cfg.deepseek_softmax_scale)
                                    : nlohmann::json(nullptr);
  j["deepseek_softmax_factor"] = s.deepseek_softmax_factor;
  if (!layer.mrope_section.empty()) {
    j["mrope_section"] = layer.mrope_section;
    j["mrope_layout"] = MRopeLayoutName(layer.mrope_layout);
  }
  nlohmann::json pairs = nlohmann::json::array();
  for (const RopePairInfo& p : s.pairs) {
    pairs.push_back({{"index", p.index},
                     {"inv_freq", p.inv_freq},
                     {"default_inv_freq", p.default_inv_freq},
                     {"wavelength", std::isfinite(p.wavelength) ? nlohmann::json(p.wavelength)
                                                                : nlohmann::json(nullptr)},
                     {"ratio_to_default", p.ratio_to_default},
                     {"region", RopePairRegionName(p.region)}});
  }
  j["pairs"] = std::move(pairs);
  j["warnings"] = cfg.warnings;
  // Invalid UTF-8 in a path or string becomes U+FFFD instead of an exception.
  std::cout << j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

void RunInspect(const InspectArgs& a) {
  Require(a.seq_len >= 0 && a.seq_len <= kMaxPosition + 1, "--seq-len", a.seq_len,
          "an integer in [0, 2^24] (0: at initialisation)");
  Require(a.context_length >= 0, "--context-length", a.context_length, "an integer >= 0");
  const RopeNumerics numerics = ParseRopeNumerics(a.numerics, "--numerics");
  const LongRopeSwitch sw = ParseLongRopeSwitch(a.longrope_switch, "--longrope-switch");
  const ModelConfig cfg = LoadModelConfig(a.config);
  for (const std::string& w : cfg.warnings)
    std::cerr << "posenc: warning: " << cfg.source << ": " << w << '\n';
  if (cfg.alibi) {
    PrintAlibi(cfg, a);
    return;
  }
  const LayerRope* layer = nullptr;
  try {
    layer = &SelectLayerRope(cfg, a.layer_type);
  } catch (const InvalidArgument&) {
    throw InvalidArgument(ArgMessage("--layer-type", a.layer_type,
                                     "one of the config's layer types: " + LayerNames(cfg)));
  }
  RopeScalingParams p = layer->scaling;
  p.numerics = numerics;
  p.longrope_switch = sw;
  p.context_length = a.context_length;
  const RopeScaling s = ComputeRopeScaling(p, a.seq_len);
  if (a.json) {
    PrintJson(cfg, *layer, s, a);
  } else {
    PrintText(cfg, *layer, s, a);
  }
}

}  // namespace

void RegisterInspectCommand(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "Show the RoPE (or ALiBi) a Hugging Face config.json or a llama.cpp GGUF file defines: "
      "scaling, frequencies, regions");
  cmd->add_option("config", args->config,
                  "Path to the model's config.json or .gguf file (GGUF: metadata only)")
      ->required();
  cmd->add_option(
      "--seq-len", args->seq_len,
      "Sequence length of the call (max position + 1): dynamic and longrope depend on it "
      "(default 0: at initialisation)");
  cmd->add_option(
      "--layer-type", args->layer_type,
      "Layer type of a per-layer config (full_attention, sliding_attention; default: full)");
  cmd->add_flag("--json", args->json, "Print one JSON object instead of text");
  cmd->add_option("--numerics", args->numerics,
                  "hf (default: HF's float32 steps) or accurate (float64)");
  cmd->add_option(
      "--longrope-switch", args->longrope_switch,
      "LongRoPE factor choice: seq_len (HF, default), context (llama.cpp), always_long (vLLM)");
  cmd->add_option(
      "--context-length", args->context_length,
      "Configured context for --longrope-switch context (default: max_position_embeddings)");
  cmd->footer(
      "Regions: kept (default frequency), interpolated (divided by the factor), blended\n"
      "(in between), unrotated (frequency 0). Warnings of the config loader go to stderr.");
  cmd->callback([args] { RunInspect(*args); });
}

}  // namespace posenc::cli
