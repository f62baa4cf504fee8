// posenc/model_config.h: the rope-relevant part of a Hugging Face
// config.json, standardised as HF's RotaryEmbeddingConfigMixin does
// (convert_rope_params_to_dict + standardize_rope_params + validate_rope at
// transformers commit c49429ed), validated strictly.
//
// Read keys (the text model in `text_config` when present, else the top level):
//  - rope dict: `rope_parameters` (new) or `rope_scaling` (legacy), type from
//    `rope_type` or `type` (default "default"; Qwen2-VL's "mrope" is
//    "default" with an mrope_section); the nested per-layer-type form
//    ({"full_attention": {...}, "sliding_attention": {...}}); Gemma 3's
//    top-level `rope_local_base_freq` becomes sliding_attention's theta.
//  - theta: dict `rope_theta` > top-level `rope_theta` > `rotary_emb_base`
//    (GPT-NeoX) > 10000.
//  - head dim: `qk_rope_head_dim` (DeepSeek MLA) > `head_dim` >
//    hidden_size / num_attention_heads. Rotary fraction: dict or top-level
//    `partial_rotary_factor` > `rotary_pct` (GPT-NeoX) > `rotary_dim`
//    (GPT-J, absolute) > 1.
//  - `max_position_embeddings`; `original_max_position_embeddings` at the top
//    level (Phi-3, takes priority) or in the dict, else max_position_embeddings.
//  - `mrope_section` (in the dict or top level), `mrope_interleaved`.
//  - DeepSeek: `rope_interleave` (default true: interleaved pairing),
//    `qk_nope_head_dim` for the softmax scale.
// ALiBi models (no RoPE): `model_type` "bloom" (heads: `n_head` or
// `num_attention_heads`), "mpt" with `attn_config.alibi` true (`n_heads`,
// `attn_config.alibi_bias_max`, default 8) and Falcon-style `alibi: true`
// (`num_attention_heads` or `n_head`) fill ModelConfig::alibi (slopes of the
// kReference convention) and leave `layers` empty.
// LoadModelConfig also reads llama.cpp GGUF files (recognised by their magic
// bytes; posenc/gguf.h): the same ModelConfig, with format "gguf".
// Limits: text that is not JSON is an IoError; JSON nested deeper than 64
// levels, or holding a number beyond the double range (1e400), is a
// ConfigError (checked while parsing, before anything is built).
// Errors (ConfigError) name the file, the JSON path and what is expected:
//   "llama.json: rope_scaling.factor: got \"8\" (string), expected a number >= 1"
// An unknown rope type lists the known ones. Where HF only warns (unknown
// keys, beta_fast < beta_slow, an explicit yarn factor that disagrees with
// max/original, llama3 original >= max) the loader records a warning.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/rope.h"
#include "posenc/rope_multimodal.h"
#include "posenc/rope_scaling.h"

namespace posenc {

// The rope of one attention layer type ("" when the model has one for all).
struct LayerRope {
  std::string layer_type;
  RopeScalingParams scaling;  // numerics kHF (what the model computes)
  // Multimodal (Qwen2-VL / Qwen3-VL): pairs per t/h/w stream; empty if none.
  std::vector<std::int64_t> mrope_section;
  MRopeLayout mrope_layout = MRopeLayout::kSectioned;
};

// The ALiBi of a model: head count, max bias and the slopes in effect.
struct ModelAlibi {
  std::int64_t num_heads = 0;
  double max_bias = 8.0;
  std::vector<double> slopes;  // AlibiSlopes, kReference convention (= ggml's)
};

struct ModelConfig {
  std::string source;                  // file name (for messages)
  std::string format = "config.json";  // or "gguf"
  std::string model_type;              // "" if absent (GGUF: general.architecture)
  std::int64_t head_dim = 0;
  // Attention heads: query heads, key/value heads (GQA; = num_heads when the
  // file gives no separate count); 0 when the file does not say.
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t max_position_embeddings = 0;           // 0 if absent
  std::int64_t original_max_position_embeddings = 0;  // resolved (0 if unknown)
  RopePairing pairing = RopePairing::kHalfSplit;      // kInterleaved: DeepSeek rope_interleave
  std::vector<LayerRope> layers;                      // at least one, unless alibi
  std::optional<ModelAlibi> alibi;                    // ALiBi models (then no layers)
  // DeepSeek-V2/V3 (qk_rope_head_dim present, yarn with mscale_all_dim):
  // softmax scale = (qk_nope_head_dim + qk_rope_head_dim)^-0.5 * mscale^2,
  // mscale = yarn_get_mscale(factor, mscale_all_dim) (HF DeepseekV3Attention).
  std::optional<double> deepseek_softmax_scale;
  std::vector<std::string> warnings;  // HF-style warnings, one line each
};

// Parses config JSON text; `source` names it in messages. Throws ConfigError.
ModelConfig ParseModelConfig(std::string_view json_text, std::string_view source);
// Reads and parses a file: a config.json, or a GGUF file (by its magic
// bytes). Throws IoError (unreadable, a directory, an empty file, a .gguf
// name without the GGUF magic, malformed GGUF) or ConfigError.
ModelConfig LoadModelConfig(const std::string& path);

// The layer type `layer_type` ("" picks full_attention when nested, or the
// only entry). Throws InvalidArgument listing the available layer types, or
// ConfigError for an ALiBi model (it has no rope).
const LayerRope& SelectLayerRope(const ModelConfig& config, std::string_view layer_type);

// Scaling of a layer type for a call with seq_len (0: at init), numerics kHF
// unless overridden.
RopeScaling ModelRopeScaling(const ModelConfig& config, std::string_view layer_type,
                             std::int64_t seq_len, RopeNumerics numerics = RopeNumerics::kHF);

// RopeParams for posenc/rope.h with the scaled frequencies folded in
// (half-split cos/sin layout, as HF's rotary forward returns them).
RopeParams ModelRopeParams(const ModelConfig& config, std::string_view layer_type,
                           std::int64_t seq_len, RopeNumerics numerics = RopeNumerics::kHF);

}  // namespace posenc
