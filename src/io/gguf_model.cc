// GGUF metadata -> ModelConfig (contract: include/posenc/gguf.h), read as llama.cpp reads it
// (src/llama-model.cpp llama_model::load_hparams at 00342301, llama_model_rope_type; key names of
// gguf-py/gguf/constants.py and the converter convert_hf_to_gguf.py at 0024aa74; see
// tests/golden/gguf/README.md). The keys and tensors each step reads, with their defaults, are
// listed above the function that reads them: ReadSizes, ReadRopeDims, ReadScaling (SetYarn,
// SetLongRope), FromGguf (rope_freqs.weight), ReadSections, AddLayers, SetAlibi.
// Everything is numerics kHF, like the config.json loader: the frequencies of a GGUF file and of
// the HF config.json it was converted from agree within float32 rounding (tests/unit/gguf_test.cc).
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>

#include "posenc/alibi.h"
#include "posenc/error.h"
#include "posenc/gguf.h"

namespace posenc {

namespace {

enum class ArchRope : std::uint8_t { kNone, kNorm, kNeox, kMRope, kIMRope };

struct ArchInfo {
  const char* name;
  ArchRope rope;
  bool alibi;
};

// llama_model_rope_type (llama.cpp src/llama-model.cpp) and the ALiBi models
// among its NONE architectures.
constexpr ArchInfo kArchs[] = {
    {"llama", ArchRope::kNorm, false},
    {"deci", ArchRope::kNorm, false},
    {"baichuan", ArchRope::kNorm, false},
    {"starcoder", ArchRope::kNorm, false},
    {"plamo", ArchRope::kNorm, false},
    {"orion", ArchRope::kNorm, false},
    {"internlm2", ArchRope::kNorm, false},
    {"minicpm", ArchRope::kNorm, false},
    {"xverse", ArchRope::kNorm, false},
    {"command-r", ArchRope::kNorm, false},
    {"cohere2", ArchRope::kNorm, false},
    {"olmo", ArchRope::kNorm, false},
    {"arctic", ArchRope::kNorm, false},
    {"deepseek", ArchRope::kNorm, false},
    {"deepseek2", ArchRope::kNorm, false},
    {"chatglm", ArchRope::kNorm, false},
    {"granite", ArchRope::kNorm, false},
    {"granitemoe", ArchRope::kNorm, false},
    {"chameleon", ArchRope::kNorm, false},
    {"falcon", ArchRope::kNeox, false},
    {"grok", ArchRope::kNeox, false},
    {"dbrx", ArchRope::kNeox, false},
    {"bert", ArchRope::kNeox, false},
    {"nomic-bert", ArchRope::kNeox, false},
    {"stablelm", ArchRope::kNeox, false},
    {"bitnet", ArchRope::kNeox, false},
    {"qwen", ArchRope::kNeox, false},
    {"qwen2", ArchRope::kNeox, false},
    {"qwen2moe", ArchRope::kNeox, false},
    {"qwen3", ArchRope::kNeox, false},
    {"qwen3moe", ArchRope::kNeox, false},
    {"olmo2", ArchRope::kNeox, false},
    {"olmoe", ArchRope::kNeox, false},
    {"phi2", ArchRope::kNeox, false},
    {"phi3", ArchRope::kNeox, false},
    {"phimoe", ArchRope::kNeox, false},
    {"gemma", ArchRope::kNeox, false},
    {"gemma2", ArchRope::kNeox, false},
    {"gemma3", ArchRope::kNeox, false},
    {"starcoder2", ArchRope::kNeox, false},
    {"openelm", ArchRope::kNeox, false},
    {"gptneox", ArchRope::kNeox, false},
    {"codeshell", ArchRope::kNeox, false},
    {"nemotron", ArchRope::kNeox, false},
    {"exaone", ArchRope::kNeox, false},
    {"minicpm3", ArchRope::kNeox, false},
    {"qwen2vl", ArchRope::kMRope, false},
    {"qwen3vl", ArchRope::kIMRope, false},
    {"qwen3vlmoe", ArchRope::kIMRope, false},
    {"gpt2", ArchRope::kNone, false},
    {"gptj", ArchRope::kNone, false},
    {"mamba", ArchRope::kNone, false},
    {"t5", ArchRope::kNone, false},
    {"t5encoder", ArchRope::kNone, false},
    {"rwkv6", ArchRope::kNone, false},
    {"rwkv6qwen2", ArchRope::kNone, false},
    {"wavtokenizer-dec", ArchRope::kNone, false},
    {"bloom", ArchRope::kNone, true},
    {"mpt", ArchRope::kNone, true},
    {"refact", ArchRope::kNone, true},
    {"jina-bert-v2", ArchRope::kNone, true},
    {"jais", ArchRope::kNone, true},
};

const ArchInfo* FindArch(const std::string& arch) {
  for (const ArchInfo& a : kArchs) {
    if (arch == a.name) return &a;
  }
  return nullptr;
}

std::string Num(double d) { return detail::ToText(d); }

// Typed access to the metadata with ConfigErrors naming file and key.
class Meta {
 public:
  Meta(const GgufFile& f, std::vector<std::string>& warnings) : f_(f), warnings_(warnings) {}

  [[noreturn]] void Fail(const std::string& key, const std::string& got,
                         const std::string& expected) const {
    throw ConfigError(f_.source + ": " + key + ": got " + got + ", expected " + expected);
  }

  static std::string Show(const GgufValue& v) {
    const std::string t(GgufTypeName(v.type));
    if (v.type == GgufType::kString) return t + " \"" + v.text.substr(0, 60) + "\"";
    if (v.type == GgufType::kArray) {
      return t + " of " + std::to_string(v.count) + " " + std::string(GgufTypeName(v.element_type));
    }
    return t + " " + (v.IsInteger() ? std::to_string(v.integer) : Num(v.number));
  }

  std::optional<std::string> Text(const std::string& key) const {
    const GgufValue* v = f_.Find(key);
    if (v == nullptr) return std::nullopt;
    if (v->type != GgufType::kString) Fail(key, Show(*v), "a string");
    return v->text;
  }

  std::optional<double> Number(const std::string& key, const std::string& expected) const {
    const GgufValue* v = f_.Find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->IsNumber() || !std::isfinite(v->number)) Fail(key, Show(*v), expected);
    return v->number;
  }

  // An integer >= min; an integer array (per-layer values) gives its first
  // non-zero entry, with a warning when the entries differ.
  std::optional<std::int64_t> Int(const std::string& key, std::int64_t min,
                                  const std::string& expected) {
    const GgufValue* v = f_.Find(key);
    if (v == nullptr) return std::nullopt;
    std::int64_t value = 0;
    if (v->IsInteger()) {
      value = v->integer;
    } else if (v->type == GgufType::kArray && !v->numbers.empty() &&
               v->element_type != GgufType::kFloat32 && v->element_type != GgufType::kFloat64 &&
               v->element_type != GgufType::kBool) {
      const auto nz =
          std::find_if(v->numbers.begin(), v->numbers.end(), [](double x) { return x != 0; });
      value = static_cast<std::int64_t>(nz == v->numbers.end() ? 0.0 : *nz);
      if (std::any_of(v->numbers.begin(), v->numbers.end(),
                      [&](double x) { return x != 0 && x != static_cast<double>(value); })) {
        warnings_.push_back(key + ": per-layer values differ; using the first non-zero one, " +
                            std::to_string(value));
      }
    } else {
      Fail(key, Show(*v), expected);
    }
    if (value < min) Fail(key, std::to_string(value), expected);
    return value;
  }

 private:
  const GgufFile& f_;
  std::vector<std::string>& warnings_;
};

// partial_rotary_factor such that int(head_dim * prf) == rot.
double RotaryFraction(std::int64_t rot, std::int64_t head_dim) {
  double prf = static_cast<double>(rot) / static_cast<double>(head_dim);
  while (static_cast<std::int64_t>(static_cast<double>(head_dim) * prf) < rot) {
    prf = std::nextafter(prf, 2.0);
  }
  return std::min(prf, 1.0);
}

using TensorReader = std::function<std::vector<float>(std::string_view name)>;

std::vector<double> PairTensor(const GgufFile& f, const TensorReader& read, const std::string& name,
                               std::int64_t pairs) {
  const std::vector<float> values = read(name);
  if (static_cast<std::int64_t>(values.size()) != pairs) {
    throw ConfigError(f.source + ": tensor '" + name + "': got " + std::to_string(values.size()) +
                      " values, expected rotary_dim/2 = " + std::to_string(pairs));
  }
  return {values.begin(), values.end()};
}

// Builds the metadata keys `{arch}.{suffix}` of one architecture.
struct ArchKeys {
  std::string arch;
  std::string operator()(const char* suffix) const { return arch + "." + suffix; }
};

// Reads `general.architecture`, which must be a non-empty string.
std::string ReadArchitecture(const Meta& m) {
  const auto arch_text = m.Text("general.architecture");
  if (!arch_text || arch_text->empty()) {
    m.Fail("general.architecture", "nothing (missing)", "the model's architecture name");
  }
  return *arch_text;
}

// The head count and embedding length a file declares (empty when absent).
struct GgufSizes {
  std::optional<std::int64_t> heads;
  std::optional<std::int64_t> embd;
};

// Reads the head counts, embedding and context lengths, setting cfg's head counts and contexts;
// warns when the kv head count does not divide the head count. Keys: `{arch}.attention.head_count`
// (an array of per-layer counts takes its first non-zero entry, with a warning: Meta::Int),
// `.head_count_kv`, `{arch}.embedding_length`, context `{arch}.context_length`.
GgufSizes ReadSizes(Meta& m, const ArchKeys& key, ModelConfig& cfg) {
  const auto heads = m.Int(key("attention.head_count"), 1, "an integer >= 1");
  const auto kv_heads = m.Int(key("attention.head_count_kv"), 1, "an integer >= 1");
  cfg.num_heads = heads.value_or(0);
  cfg.num_kv_heads = kv_heads.value_or(cfg.num_heads);
  if (heads && kv_heads && *heads % *kv_heads != 0) {
    cfg.warnings.push_back(key("attention.head_count_kv") + ": " + std::to_string(*kv_heads) +
                           " does not divide " + key("attention.head_count") + " = " +
                           std::to_string(*heads) + " (per-layer counts?)");
  }
  const auto embd = m.Int(key("embedding_length"), 1, "an integer >= 1");
  const auto ctx = m.Int(key("context_length"), 1, "an integer >= 1");
  cfg.max_position_embeddings = ctx.value_or(0);
  cfg.original_max_position_embeddings = cfg.max_position_embeddings;
  return {heads, embd};
}

// Sets cfg.alibi (and cfg.head_dim when the embedding splits evenly) for an ALiBi model, whose
// max bias is max_alibi, else llama.cpp's fixed 8: ALiBi architectures (bloom, jais, refact,
// jina-bert-v2: the fixed 8; mpt, and any file with `{arch}.attention.max_alibi_bias`: that
// value). Slopes as ggml_soft_max_ext.
void SetAlibi(const Meta& m, const ArchKeys& key, const GgufSizes& sizes,
              const std::optional<double>& max_alibi, ModelConfig& cfg) {
  if (!sizes.heads)
    m.Fail(key("attention.head_count"), "nothing (missing)", "the head count of an ALiBi model");
  ModelAlibi a;
  a.num_heads = *sizes.heads;
  a.max_bias = max_alibi.value_or(8.0);
  if (!(a.max_bias > 0.0)) m.Fail(key("attention.max_alibi_bias"), Num(a.max_bias), "a number > 0");
  if (a.num_heads > kMaxAlibiHeads) {
    m.Fail(key("attention.head_count"), std::to_string(a.num_heads), "at most 65536 heads");
  }
  AlibiParams ap;
  ap.num_heads = a.num_heads;
  ap.max_bias = a.max_bias;
  a.slopes = AlibiSlopes(ap);
  if (sizes.embd && *sizes.embd % a.num_heads == 0) cfg.head_dim = *sizes.embd / a.num_heads;
  cfg.alibi = std::move(a);
}

// Fails for an architecture llama.cpp gives no RoPE; warns for one not in kArchs (NEOX assumed).
void CheckRopeArch(const Meta& m, const std::string& arch, const ArchInfo* info,
                   std::vector<std::string>& warnings) {
  if (info != nullptr && info->rope == ArchRope::kNone) {
    m.Fail("general.architecture", "\"" + arch + "\"",
           "an architecture with RoPE or ALiBi (llama.cpp gives '" + arch + "' neither)");
  }
  if (info == nullptr) {
    warnings.push_back("general.architecture: '" + arch +
                       "' is not in posenc's table of llama.cpp architectures; assuming NEOX "
                       "(half_split) rope pairing");
  }
}

// The checked head dim, rotary dim and base of a RoPE model, and its explicit key_length if any.
struct RopeDims {
  std::optional<std::int64_t> key_length;
  std::int64_t head_dim = 0;
  std::int64_t rot = 0;
  double theta = 0.0;
};

// Reads and checks the head dim (key_length, else embedding / heads; MLA: the rope dim), the
// rotary dim (default: head dim) and the base (default 10000). Keys: head dim
// `{arch}.attention.key_length`, else embedding_length / head_count; MLA models
// (`{arch}.attention.kv_lora_rank`, DeepSeek-V2/V3) take the rope dim as head dim, as HF's
// qk_rope_head_dim; rotary dim `{arch}.rope.dimension_count`; theta `{arch}.rope.freq_base`.
RopeDims ReadRopeDims(const GgufFile& f, Meta& m, const ArchKeys& key, const GgufSizes& sizes) {
  RopeDims d;
  d.key_length = m.Int(key("attention.key_length"), 2, "an integer >= 2");
  if (d.key_length) {
    d.head_dim = *d.key_length;
  } else if (sizes.heads && sizes.embd) {
    d.head_dim = *sizes.embd / *sizes.heads;
  } else {
    m.Fail(key("attention.key_length"), "nothing (missing)",
           "the head dim, or " + key("embedding_length") + " and " + key("attention.head_count"));
  }
  const auto rot_key = m.Int(key("rope.dimension_count"), 2, "an even integer >= 2");
  if (f.Find(key("attention.kv_lora_rank")) != nullptr && rot_key) d.head_dim = *rot_key;  // MLA
  if (d.head_dim < 2 || d.head_dim > 65536) {
    m.Fail(key("attention.key_length"), std::to_string(d.head_dim), "a head dim in [2, 65536]");
  }
  d.rot = rot_key.value_or(d.head_dim);
  if (d.rot % 2 != 0 || d.rot > d.head_dim) {
    m.Fail(key("rope.dimension_count"), std::to_string(d.rot),
           "an even integer <= the head dim " + std::to_string(d.head_dim));
  }
  d.theta = m.Number(key("rope.freq_base"), "a number > 1").value_or(10000.0);
  if (!(d.theta > 1.0)) m.Fail(key("rope.freq_base"), Num(d.theta), "a number > 1");
  return d;
}

// The scaling keys shared by all types: the type ("none" if absent), the factor (empty if absent
// or 0) and the original context.
struct ScalingKeys {
  std::string type;
  std::optional<double> factor;
  std::optional<std::int64_t> orig;
};

// Reads the scaling type and factor (else the legacy `rope.scale_linear`) and the original
// context; fails for a factor below 1. A factor of 0 is llama.cpp's ropescale 0: no factor.
ScalingKeys ReadScalingKeys(Meta& m, const ArchKeys& key) {
  std::string type = m.Text(key("rope.scaling.type")).value_or("none");
  auto factor = m.Number(key("rope.scaling.factor"), "a number >= 1");
  if (!m.Text(key("rope.scaling.type"))) {
    if (const auto legacy = m.Number(key("rope.scale_linear"), "a number >= 1")) {
      type = "linear";
      factor = legacy;
    }
  }
  if (factor && *factor == 0.0) factor.reset();  // llama.cpp: 0 means no scaling
  if (factor && *factor < 1.0) m.Fail(key("rope.scaling.factor"), Num(*factor), "a number >= 1");
  const auto orig = m.Int(key("rope.scaling.original_context_length"), 1, "an integer >= 1");
  return {type, factor, orig};
}

// Sets p to yarn from the `rope.scaling.yarn_*` keys; warns for an ext factor other than 1.
// Keys of `{arch}.rope.scaling`: `.factor`, `.original_context_length` (default: context),
// `.yarn_beta_fast` / `.yarn_beta_slow` (default 32 / 1, HF's too), `.yarn_attn_factor` (HF's
// explicit attention_factor, which is what the converter writes there), `.yarn_log_multiplier` m
// (DeepSeek: 0.1 * mscale_all_dim, so mscale = mscale_all_dim = 10 m: cos/sin factor 1 and the
// softmax factor get_mscale(factor, 10 m)^2); `.yarn_ext_factor` other than 1 has no HF
// equivalent and is ignored with a warning.
void SetYarn(Meta& m, const ArchKeys& key, const ScalingKeys& s, ModelConfig& cfg,
             RopeScalingParams& p) {
  p.type = RopeScalingType::kYarn;
  if (!s.factor) m.Fail(key("rope.scaling.factor"), "nothing (missing)", "a number >= 1 for yarn");
  p.factor = s.factor;
  p.original_max_position_embeddings = s.orig.value_or(cfg.max_position_embeddings);
  if (p.original_max_position_embeddings <= 0) {
    m.Fail(key("rope.scaling.original_context_length"), "nothing (missing)",
           "an integer >= 1 (or " + key("context_length") + ") for yarn");
  }
  p.beta_fast = m.Number(key("rope.scaling.yarn_beta_fast"), "a number >= 0");
  p.beta_slow = m.Number(key("rope.scaling.yarn_beta_slow"), "a number >= 0");
  p.attention_factor = m.Number(key("rope.scaling.yarn_attn_factor"), "a number > 0");
  if (const auto log_mul = m.Number(key("rope.scaling.yarn_log_multiplier"), "a number")) {
    p.mscale = p.mscale_all_dim = *log_mul / 0.1;
  }
  const auto ext = m.Number(key("rope.scaling.yarn_ext_factor"), "a number");
  if (ext && *ext != 1.0) {
    cfg.warnings.push_back(key("rope.scaling.yarn_ext_factor") + ": " + Num(*ext) +
                           " has no Hugging Face equivalent; the full YaRN ramp (1) is used");
  }
}

// Sets p to longrope with the short/long factor tensors of rot/2 values each
// (`rope_factors_short.weight` / `rope_factors_long.weight`), `{arch}.rope.scaling`'s
// `.original_context_length` and `.attn_factor`.
void SetLongRope(const GgufFile& f, const TensorReader& read, const Meta& m, const ArchKeys& key,
                 const ScalingKeys& s, std::int64_t rot, RopeScalingParams& p) {
  p.type = RopeScalingType::kLongRope;
  p.factor = s.factor;
  p.original_max_position_embeddings = s.orig.value_or(0);
  if (!s.orig) {
    m.Fail(key("rope.scaling.original_context_length"), "nothing (missing)",
           "the original context of a longrope model");
  }
  p.short_factor = PairTensor(f, read, "rope_factors_short.weight", rot / 2);
  p.long_factor = PairTensor(f, read, "rope_factors_long.weight", rot / 2);
  p.attention_factor = m.Number(key("rope.scaling.attn_factor"), "a number > 0");
}

// Sets p's scaling type and its parameters from the `rope.scaling.*` keys:
// `{arch}.rope.scaling.type` absent or "none" -> default; "linear" -> linear with `.factor`
// (absent or 0: 1), the legacy `{arch}.rope.scale_linear` likewise; "yarn" -> SetYarn;
// "longrope" -> SetLongRope.
void ReadScaling(const GgufFile& f, const TensorReader& read, Meta& m, const ArchKeys& key,
                 std::int64_t rot, ModelConfig& cfg, RopeScalingParams& p) {
  const ScalingKeys s = ReadScalingKeys(m, key);
  if (s.type == "none") {
    p.type = RopeScalingType::kDefault;
  } else if (s.type == "linear") {
    p.type = RopeScalingType::kLinear;
    p.factor = s.factor.value_or(1.0);
  } else if (s.type == "yarn") {
    SetYarn(m, key, s, cfg, p);
  } else if (s.type == "longrope") {
    SetLongRope(f, read, m, key, s, rot, p);
  } else {
    m.Fail(key("rope.scaling.type"), "\"" + s.type + "\"", "one of none, linear, yarn, longrope");
  }
}

// Sets layer's mrope_section (and the interleaved layout for IMROPE architectures: qwen3vl,
// qwen3vlmoe) from `rope.dimension_sections` (t, h, w; a 4th entry must be 0), whose first 3
// entries must sum to rot/2.
void ReadSections(const GgufFile& f, const Meta& m, const ArchKeys& key, const ArchInfo* info,
                  std::int64_t rot, LayerRope& layer) {
  const GgufValue* sec = f.Find(key("rope.dimension_sections"));
  if (sec == nullptr) return;
  if (sec->type != GgufType::kArray || sec->numbers.size() < 3 || sec->numbers.size() > 4 ||
      (sec->numbers.size() == 4 && sec->numbers[3] != 0.0)) {
    m.Fail(key("rope.dimension_sections"), Meta::Show(*sec),
           "an array of 3 or 4 section sizes (t, h, w, 0)");
  }
  std::int64_t sum = 0;
  for (int i = 0; i < 3; ++i) {
    const double s = sec->numbers[static_cast<std::size_t>(i)];
    if (!(s >= 0.0) || s != std::floor(s)) {
      m.Fail(key("rope.dimension_sections"), Num(s), "integer section sizes >= 0");
    }
    layer.mrope_section.push_back(static_cast<std::int64_t>(s));
    sum += layer.mrope_section.back();
  }
  if (sum != rot / 2) {
    m.Fail(key("rope.dimension_sections"), "sections summing to " + std::to_string(sum),
           "sections summing to rotary_dim/2 = " + std::to_string(rot / 2));
  }
  if (info != nullptr && info->rope == ArchRope::kIMRope)
    layer.mrope_layout = MRopeLayout::kInterleaved;
}

// ValidateRopeScalingParams(p), its InvalidArgument rethrown as a ConfigError naming the file.
void ValidateScaling(const GgufFile& f, const RopeScalingParams& p) {
  try {
    ValidateRopeScalingParams(p);
  } catch (const InvalidArgument& e) {
    throw ConfigError(f.source + ": " + e.what());
  }
}

// Appends layer to cfg.layers; with `rope.freq_base_swa`, as full_attention followed by a
// sliding_attention copy with default rope at that base (as Gemma 3's rope_local_base_freq).
void AddLayers(Meta& m, const ArchKeys& key, LayerRope layer, ModelConfig& cfg) {
  const auto swa_theta = m.Number(key("rope.freq_base_swa"), "a number > 1");
  if (swa_theta) {
    if (!(*swa_theta > 1.0)) m.Fail(key("rope.freq_base_swa"), Num(*swa_theta), "a number > 1");
    layer.layer_type = "full_attention";
    LayerRope sliding;
    sliding.layer_type = "sliding_attention";
    sliding.scaling = layer.scaling;
    sliding.scaling.type = RopeScalingType::kDefault;
    sliding.scaling.theta = *swa_theta;
    sliding.scaling.factor.reset();
    sliding.scaling.freq_factors.clear();
    cfg.layers.push_back(std::move(layer));
    cfg.layers.push_back(std::move(sliding));
  } else {
    cfg.layers.push_back(std::move(layer));
  }
}

ModelConfig FromGguf(const GgufFile& f, const TensorReader& read) {
  ModelConfig cfg;
  cfg.source = f.source;
  cfg.format = "gguf";
  Meta m(f, cfg.warnings);
  const ArchKeys key{ReadArchitecture(m)};
  cfg.model_type = key.arch;
  const GgufSizes sizes = ReadSizes(m, key, cfg);
  const ArchInfo* info = FindArch(key.arch);
  const auto max_alibi = m.Number(key("attention.max_alibi_bias"), "a number > 0");

  if ((info != nullptr && info->alibi) || (max_alibi && *max_alibi > 0.0)) {
    SetAlibi(m, key, sizes, max_alibi, cfg);
    return cfg;
  }
  CheckRopeArch(m, key.arch, info, cfg.warnings);
  const RopeDims dims = ReadRopeDims(f, m, key, sizes);
  cfg.head_dim = dims.head_dim;

  LayerRope layer;
  RopeScalingParams& p = layer.scaling;
  p.numerics = RopeNumerics::kHF;
  p.head_dim = dims.head_dim;
  p.partial_rotary_factor = RotaryFraction(dims.rot, dims.head_dim);
  p.theta = dims.theta;
  p.max_position_embeddings = cfg.max_position_embeddings;
  ReadScaling(f, read, m, key, dims.rot, cfg, p);
  // Llama 3: the converter writes no scaling keys, only this F32 tensor of per-pair divisors.
  if (f.FindTensor("rope_freqs.weight") != nullptr) {
    p.freq_factors = PairTensor(f, read, "rope_freqs.weight", dims.rot / 2);
  }
  ReadSections(f, m, key, info, dims.rot, layer);
  ValidateScaling(f, p);
  cfg.pairing = info != nullptr && info->rope == ArchRope::kNorm ? RopePairing::kInterleaved
                                                                 : RopePairing::kHalfSplit;
  if (p.original_max_position_embeddings > 0) {
    cfg.original_max_position_embeddings = p.original_max_position_embeddings;
  }
  if (f.Find(key("attention.kv_lora_rank")) != nullptr && dims.key_length && p.mscale_all_dim &&
      *p.mscale_all_dim != 0.0) {  // DeepSeek MLA: softmax scale (nope + rope)^-0.5 * mscale^2
    const double ms = YarnGetMscale(*p.factor, *p.mscale_all_dim);
    cfg.deepseek_softmax_scale = std::pow(static_cast<double>(*dims.key_length), -0.5) * ms * ms;
  }
  AddLayers(m, key, std::move(layer), cfg);
  return cfg;
}

}  // namespace

ModelConfig GgufModelConfig(const GgufFile& file, std::span<const std::uint8_t> bytes) {
  return FromGguf(file, [&](std::string_view name) { return GgufTensorValues(bytes, file, name); });
}

ModelConfig LoadGgufModelConfig(const std::string& path) {
  const GgufFile file = ReadGguf(path);
  return FromGguf(file, [&](std::string_view name) { return ReadGgufTensor(path, file, name); });
}

ModelConfig ParseGgufModelConfig(std::span<const std::uint8_t> bytes, std::string_view source) {
  return GgufModelConfig(ParseGguf(bytes, source), bytes);
}

}  // namespace posenc
