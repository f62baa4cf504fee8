// posenc/rope.h: rotary position embedding (RoPE), the core without context
// scaling (scaling schemes produce a RopeFrequencies: posenc/rope_scaling.h).
//
// Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position
// Embedding", https://arxiv.org/abs/2104.09864. For rotary_dim d and pair j:
//   inv_freq[j] = theta^(-2j/d),  angle(p, j) = p * inv_freq[j]
//   (x, y) -> (x cos a - y sin a,  y cos a + x sin a)   (times attention_factor)
// so <R_m q, R_n k> depends only on m - n. Dims >= rotary_dim pass unchanged.
//
// Pairings (RopePairing):
//  - kHalfSplit: pairs (j, j + d/2). GPT-NeoX, Llama/HF `rotate_half`,
//    vLLM is_neox_style, FlashAttention interleaved=False.
//  - kInterleaved: pairs (2j, 2j+1). GPT-J rotate_every_two, Meta's original
//    Llama, DeepSeek (rope_interleave), ggml NORMAL, FA interleaved=True.
//    (DeepSeek's HF port de-interleaves its output; that is a permutation of
//    this result, not a different rotation.)
//
// Numerics (RopeNumerics):
//  - kAccurate (default): angle formed in float64 and range-reduced; cos/sin
//    within 1e-6 (float32 storage: 2^-24 + 1e-9) of float64 truth for every
//    position in [0, 2^24); rotation in float32 (float64 for float64 data),
//    rounded once to the storage dtype.
//  - kHF: Hugging Face transformers bit-for-bit recipe: inv_freq = 1 /
//    float32(theta ** (arange(0, d, 2, f32) / d)); angle = one float32
//    multiply float32(p) * inv_freq; cos/sin in float32 times the attention
//    factor (float32), cast to the activation dtype; the rotation
//    q*cos + rotate_half(q)*sin with every product and the sum rounded to the
//    activation dtype. Differs from kAccurate by up to ~4e-3 at p = 131071
//    (tests/golden/README.md explains why).
// Valid positions: [0, 2^24) for apply/tables (negative positions are allowed
// only where documented, e.g. inverse rotation by delta).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/context.h"
#include "posenc/positions.h"
#include "posenc/tensor.h"

namespace posenc {

enum class RopePairing : std::uint8_t { kHalfSplit, kInterleaved };
enum class RopeNumerics : std::uint8_t { kAccurate, kHF };
enum class RopeDirection : std::uint8_t {
  kForward,  // rotate by +angle
  kInverse,  // rotate by -angle: the backward pass (and undoing a rotation)
};

std::string_view RopePairingName(RopePairing p);   // "half_split", "interleaved"
RopePairing ParseRopePairing(std::string_view text, std::string_view arg = "pairing");
std::string_view RopeNumericsName(RopeNumerics n);  // "accurate", "hf"
RopeNumerics ParseRopeNumerics(std::string_view text, std::string_view arg = "numerics");

// Frequencies in effect for one call: produced by RopeDefaultFrequencies or
// by a scaling scheme (posenc/rope_scaling.h). inv_freq has rotary_dim/2
// entries (radians per position); under kHF they hold float32 values.
struct RopeFrequencies {
  std::vector<double> inv_freq;
  double attention_factor = 1.0;  // multiplies cos and sin
};

struct RopeParams {
  std::int64_t head_dim = 0;     // >= 2
  std::int64_t rotary_dim = 0;   // even, in [2, head_dim]; 0 means head_dim
  double theta = 10000.0;        // finite, > 1 (the base of default frequencies)
  RopePairing pairing = RopePairing::kHalfSplit;
  RopeNumerics numerics = RopeNumerics::kAccurate;
  // Explicit frequencies (e.g. from rope_scaling.h). Empty: the default
  // theta^(-2j/rotary_dim) table with attention_factor 1.
  RopeFrequencies frequencies;

  std::int64_t EffectiveRotaryDim() const { return rotary_dim == 0 ? head_dim : rotary_dim; }
};

// Throws InvalidArgument naming the field (head_dim, rotary_dim, theta,
// frequencies.inv_freq size or values, attention_factor).
void ValidateRopeParams(const RopeParams& params);

// Default table: inv_freq[j] = theta^(-2j/rotary_dim), j < rotary_dim/2.
// kAccurate: float64 values; kHF: float32 values as torch computes them.
RopeFrequencies RopeDefaultFrequencies(std::int64_t rotary_dim, double theta,
                                       RopeNumerics numerics);

// The frequencies a call with `params` uses (explicit or default).
RopeFrequencies ResolveRopeFrequencies(const RopeParams& params);

// cos/sin tables in HF's layout: row r is position positions[r] (or
// offset + r), columns [0, rotary_dim) hold cat(freqs, freqs) for kHalfSplit
// and each frequency twice in adjacent columns for kInterleaved; values
// include attention_factor. cos and sin are [count, rotary_dim], any dtype.
void RopeCosSin(const RopeParams& params, const Positions& positions, std::int64_t count,
                const TensorView& cos, const TensorView& sin,
                const Context& ctx = Context{});

// Rotates x (rank 4, `layout`) by the positions of its tokens. `out` null:
// in place; else out has x's shape and dtype and must not overlap x.
void ApplyRope(const RopeParams& params, const TensorView& x, AttentionLayout layout,
               const Positions& positions, RopeDirection direction = RopeDirection::kForward,
               const TensorView* out = nullptr, const Context& ctx = Context{});

// q and k in one pass (same batch, seq and positions; heads may differ).
void ApplyRopeQK(const RopeParams& params, const TensorView& q, const TensorView& k,
                 AttentionLayout layout, const Positions& positions,
                 RopeDirection direction = RopeDirection::kForward,
                 const Context& ctx = Context{});

}  // namespace posenc
