// posenc/rope_scaling.h: RoPE context-extension schemes. Each one turns a
// model's rope parameters into the RopeFrequencies (inv_freq + attention
// factor) that posenc/rope.h consumes, plus a per-pair description.
//
// Names and semantics are those of Hugging Face transformers
// (src/transformers/modeling_rope_utils.py at commit c49429ed, see
// tests/golden/README.md). d = rotary dim = int(head_dim * partial_rotary_factor),
// j = pair index in [0, d/2), b = theta, p_j = b^(2j/d):
//  - default:  inv_j = 1/p_j.
//  - linear (position interpolation, Chen et al. 2023): inv_j = (1/p_j)/factor.
//  - dynamic (NTK, /u/emozilla): L = max(seq_len, max_position_embeddings),
//      b' = b * ((factor*L/max_pos) - (factor-1))^(d/(d-2)); recomputed as the
//      sequence grows, back to the default table at or below max_pos.
//  - ntk (static NTK-aware, /u/bloc97; vLLM dynamic-alpha, XT rescale):
//      b' = b * factor^(d/(d-2)).
//  - yarn (Peng et al. 2023, arXiv 2309.00071): ramp between extrapolated
//      1/p_j and interpolated 1/(factor*p_j) over the correction range
//      [low, high] of pair indices (floor/ceil unless truncate=false);
//      attention factor explicit, else mscale ratio, else 0.1 ln(factor)+1.
//      DeepSeek's separate softmax correction get_mscale(factor,
//      mscale_all_dim)^2 is reported in RopeScaling::deepseek_softmax_factor.
//  - llama3 (Meta Llama 3.1): wavelength 2pi/inv; > orig/low_freq_factor:
//      divided by factor; < orig/high_freq_factor: kept; else the smooth blend.
//  - longrope (Ding et al. 2024, Phi-3): inv_j = 1/(ext_j * p_j), ext =
//      short_factor or long_factor chosen by a LongRopeSwitch policy;
//      attention factor sqrt(1 + ln(factor)/ln(original_max)).
//  - proportional (Gemma 4): n = int(prf*head_dim//2) pairs with
//      1/b^(2k/head_dim) (full head_dim in the exponent), the remaining
//      head_dim/2 - n pairs frequency 0; all divided by factor.
//
// Numerics (RopeNumerics from rope.h):
//  - kHF: every step in the dtype HF uses: float32 tensor ops on top of the
//    float32 pow (base rounded to float32), Python float64 for scalars (yarn
//    correction range, llama3 wavelength bounds, attention factors, the dynamic
//    base at init); the dynamic base in forward (seq_len > max_pos) is a
//    float32 tensor as in HF's dynamic_rope_update. inv_freq within 1e-6
//    relative of HF (the float32 pow is not correctly rounded in torch).
//  - kAccurate: the same formulas entirely in float64.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/rope.h"

namespace posenc {

enum class RopeScalingType : std::uint8_t {
  kDefault,
  kLinear,
  kDynamic,
  kNtk,
  kYarn,
  kLlama3,
  kLongRope,
  kProportional
};
// "default", "linear", "dynamic", "ntk", "yarn", "llama3", "longrope", "proportional".
std::string_view RopeScalingTypeName(RopeScalingType type);
// Throws InvalidArgument naming `arg` and listing the known names.
RopeScalingType ParseRopeScalingType(std::string_view text, std::string_view arg = "rope_type");
// "default, linear, dynamic, ntk, yarn, llama3, longrope, proportional".
std::string_view KnownRopeScalingTypes();

// Which LongRoPE factor list a call uses, and what it does to a KV cache:
//  - kSeqLen (HF): long_factor iff seq_len = max(position)+1 > original_max.
//    The rotation of every position changes when a sequence crosses
//    original_max, so keys cached under the short factors are stale: the cache
//    must be re-filled (HF Phi-3 discards it and re-prefills, PR #33129).
//  - kContext (llama.cpp): long_factor iff the configured context length
//    (context_length; 0 means max_position_embeddings) > original_max. Fixed
//    for a run, so the cache stays valid, but short prompts in a long context
//    use the long factors (ggml-org/llama.cpp#8995).
//  - kAlwaysLong (vLLM with max_model_len > original_max): long_factor always;
//    the cache stays valid, short prompts are never served with short factors.
enum class LongRopeSwitch : std::uint8_t { kSeqLen, kContext, kAlwaysLong };
std::string_view LongRopeSwitchName(LongRopeSwitch s);  // "seq_len", "context", "always_long"
LongRopeSwitch ParseLongRopeSwitch(std::string_view text, std::string_view arg = "longrope_switch");

// YaRN correction range: floor/ceil before the ramp (HF truncate=true) or not.
enum class YarnTruncate : std::uint8_t { kTruncate, kExact };

// What a scheme did to one frequency pair.
enum class RopePairRegion : std::uint8_t {
  kKept,          // same frequency as the default table
  kInterpolated,  // divided by the full factor (or the pair's own longrope factor)
  kBlended,       // in between (yarn ramp, llama3 smooth band, NTK base change)
  kUnrotated,     // frequency 0 (proportional's non-rotary pairs)
};
std::string_view RopePairRegionName(
    RopePairRegion r);  // "kept", "interpolated", "blended", "unrotated"

// The rope parameters of one attention layer type, as HF standardises them.
// Fields a type does not use are ignored.
struct RopeScalingParams {
  RopeScalingType type = RopeScalingType::kDefault;
  std::int64_t head_dim = 0;           // >= 2
  double partial_rotary_factor = 1.0;  // in (0, 1]; rotary dim = int(head_dim * prf), even
  double theta = 10000.0;              // finite, > 1
  RopeNumerics numerics = RopeNumerics::kAccurate;

  std::optional<double> factor;              // required for linear/dynamic/ntk/llama3; yarn and
                                             // longrope derive max_pos/original when absent;
                                             // proportional defaults to 1. Must be >= 1
                                             // (proportional: > 0).
  std::int64_t max_position_embeddings = 0;  // dynamic; yarn/longrope factor derivation
  std::int64_t original_max_position_embeddings = 0;  // yarn, llama3, longrope; 0: max_pos
  std::optional<double> attention_factor;             // yarn, longrope: explicit (> 0)

  // yarn. beta_fast/beta_slow: absent or 0 means 32 / 1 (HF's `or`).
  std::optional<double> beta_fast, beta_slow;
  std::optional<double> mscale, mscale_all_dim;
  YarnTruncate truncate = YarnTruncate::kTruncate;

  // llama3: both > 0, high_freq_factor > low_freq_factor.
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;

  // longrope: d/2 positive factors each.
  std::vector<double> short_factor, long_factor;
  LongRopeSwitch longrope_switch = LongRopeSwitch::kSeqLen;
  // Per-pair divisors applied after the scheme (ggml's rope freq_factors: a
  // Llama 3 GGUF file's `rope_freqs` tensor): inv_j /= freq_factors[j] (kHF:
  // a float32 division). Empty: none; else rotary_dim/2 finite values > 0.
  std::vector<double> freq_factors;
  std::int64_t context_length = 0;  // kContext: the configured context (0: max_pos)

  // int(head_dim * partial_rotary_factor) as Python computes it (proportional:
  // head_dim, since it returns a full-width table).
  std::int64_t RotaryDim() const;
};

// Throws InvalidArgument naming the field, its value and what is allowed.
void ValidateRopeScalingParams(const RopeScalingParams& params);

struct RopePairInfo {
  std::int64_t index = 0;
  double inv_freq = 0;          // radians per position
  double default_inv_freq = 0;  // the unscaled table (same theta, dims, numerics)
  double wavelength = 0;        // 2 pi / inv_freq in tokens (+inf for frequency 0)
  double ratio_to_default = 1;  // inv_freq / default_inv_freq (1/factor: fully interpolated)
  RopePairRegion region = RopePairRegion::kKept;
};

enum class LongRopeFactors : std::uint8_t { kNotLongRope, kShort, kLong };
std::string_view LongRopeFactorsName(LongRopeFactors f);  // "none", "short_factor", "long_factor"

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kDefault;
  std::int64_t head_dim = 0;
  std::int64_t rotary_dim = 0;  // 2 * frequencies.inv_freq.size()
  RopeFrequencies frequencies;  // feed RopeParams::frequencies
  double factor = 1.0;          // the factor in effect (derived when absent)
  double effective_theta = 0;   // dynamic/ntk: the rescaled base; else theta
  // yarn: the correction range of pair indices after truncation and clamping.
  double yarn_low = 0, yarn_high = 0;
  // yarn with a non-zero mscale_all_dim: get_mscale(factor, mscale_all_dim)^2,
  // the extra multiplier DeepSeek-V2/V3 apply to the softmax scale (on top of
  // the cos/sin attention factor). 1.0 otherwise.
  double deepseek_softmax_factor = 1.0;
  LongRopeFactors longrope_factors = LongRopeFactors::kNotLongRope;
  std::vector<RopePairInfo> pairs;
};

// The frequencies a call sees. seq_len = max(position_ids)+1 of the call
// (0: at initialisation); used by dynamic (HF dynamic_rope_update on a fresh
// module) and by longrope under LongRopeSwitch::kSeqLen.
RopeScaling ComputeRopeScaling(const RopeScalingParams& params, std::int64_t seq_len = 0);

// get_mscale(s, m) = 1 if s <= 1 else 0.1*m*ln(s) + 1 (YaRN, DeepSeek).
double YarnGetMscale(double scale, double mscale = 1.0);

}  // namespace posenc
