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
//  - kAccurate (default): angle = p * inv_freq formed in float64 (absolute
//    error <= 2^-29 rad for p < 2^24) and passed to std::sin/std::cos on
//    double, which range-reduce exactly (glibc: Payne-Hanek for large
//    arguments), so no separate mod-2*pi step is needed; cos/sin within 1e-6
//    (float32 storage: 2^-24 + 1e-8) of float64 truth for every position in
//    [0, 2^24). The rotation is computed in at least float32 (the scalar
//    reference: float64, also for 16-bit storage) and rounded once to the
//    storage dtype.
//  - kHF: Hugging Face transformers recipe (LlamaRotaryEmbedding +
//    apply_rotary_pos_emb): inv_freq = 1 / float32(float32(theta) **
//    float32(2j / d)) with pow rounded from float64 (torch's float32 pow is
//    within ~1 ulp of that); angle = one float32 multiply float32(p) *
//    inv_freq; cos/sin of that float32 angle rounded to float32, times the
//    attention factor in float32, cast to the activation dtype; the rotation
//    q*cos + rotate_half(q)*sin with every product and the sum rounded to the
//    activation dtype (float32 ops for float32 data). Explicit frequencies are
//    rounded to float32 first. Differs from kAccurate by up to ~4e-3 at
//    p = 131071 (tests/golden/README.md explains why).
// Direction: kInverse rotates by -angle (negated sin), the exact inverse of
// kForward up to rounding; it is the backward pass of kForward.
// Valid positions: [0, 2^24) for RopeCosSin and kForward; kInverse also accepts
// negative positions down to -(2^24 - 1) (rotating by -p for p < 0 is a
// forward rotation by |p|: re-rotating a KV cache by a signed delta).
// Tensors: any dtype (float32, float64, bfloat16, float16), any element
// strides; q/k rank 4 in AttentionLayout kBSHD or kBHSD. Work is split into
// (batch x position tile x head group) tasks run with ctx.ParallelFor.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/context.h"
#include "posenc/positions.h"
#include "posenc/scheme.h"
#include "posenc/tensor.h"

namespace posenc {

enum class RopePairing : std::uint8_t { kHalfSplit, kInterleaved };
enum class RopeNumerics : std::uint8_t { kAccurate, kHF };
enum class RopeDirection : std::uint8_t {
  kForward,  // rotate by +angle
  kInverse,  // rotate by -angle: the backward pass (and undoing a rotation)
};

std::string_view RopePairingName(RopePairing p);  // "half_split", "interleaved"
RopePairing ParseRopePairing(std::string_view text, std::string_view arg = "pairing");
std::string_view RopeNumericsName(RopeNumerics n);  // "accurate", "hf"
RopeNumerics ParseRopeNumerics(std::string_view text, std::string_view arg = "numerics");
std::string_view RopeDirectionName(RopeDirection d);  // "forward", "inverse"
RopeDirection ParseRopeDirection(std::string_view text, std::string_view arg = "direction");

// Frequencies in effect for one call: produced by RopeDefaultFrequencies or
// by a scaling scheme (posenc/rope_scaling.h). inv_freq has rotary_dim/2
// entries (radians per position); under kHF they hold float32 values.
struct RopeFrequencies {
  std::vector<double> inv_freq;   // finite, >= 0
  double attention_factor = 1.0;  // multiplies cos and sin; finite, > 0
};

struct RopeParams {
  std::int64_t head_dim = 0;    // in [2, 65536]
  std::int64_t rotary_dim = 0;  // even, in [2, head_dim]; 0 means head_dim
  double theta = 10000.0;       // finite, > 1 (the base of default frequencies)
  RopePairing pairing = RopePairing::kHalfSplit;
  RopeNumerics numerics = RopeNumerics::kAccurate;
  // Explicit frequencies (e.g. from rope_scaling.h). Empty inv_freq: the
  // default theta^(-2j/rotary_dim) table (attention_factor, 1 by default,
  // still applies).
  RopeFrequencies frequencies;

  std::int64_t EffectiveRotaryDim() const { return rotary_dim == 0 ? head_dim : rotary_dim; }
};

// Throws InvalidArgument naming the field (head_dim, rotary_dim, theta,
// frequencies.inv_freq size or values, frequencies.attention_factor). theta
// is checked even when explicit frequencies are given.
void ValidateRopeParams(const RopeParams& params);

// Default table: inv_freq[j] = theta^(-2j/rotary_dim), j < rotary_dim/2.
// kAccurate: float64 values; kHF: float32 values as torch computes them.
// Throws InvalidArgument for rotary_dim not even in [2, 65536] or theta not
// finite > 1.
RopeFrequencies RopeDefaultFrequencies(std::int64_t rotary_dim, double theta,
                                       RopeNumerics numerics);

// The frequencies a call with `params` uses (explicit or default).
RopeFrequencies ResolveRopeFrequencies(const RopeParams& params);

// cos/sin tables in HF's layout: row r is position positions[r] (or
// offset + r), columns [0, rotary_dim) hold cat(freqs, freqs) for kHalfSplit
// and each frequency twice in adjacent columns for kInterleaved; values
// include attention_factor. cos and sin are [count, rotary_dim], any dtype,
// disjoint. positions.ids (when given) has count entries; count >= 1.
void RopeCosSin(const RopeParams& params, const Positions& positions, std::int64_t count,
                const TensorView& cos, const TensorView& sin, const Context& ctx = Context{});

// Rotates x (rank 4, `layout`) by the positions of its tokens. `out` null:
// in place; else out has x's shape and dtype and must not overlap x (passing
// exactly x's view as out is the in-place case). Dims [rotary_dim, head_dim)
// are copied unchanged. Positions are per token: shared ids (count == seq),
// per-row ids (count == batch*seq) or an offset (token s at offset + s).
void ApplyRope(const RopeParams& params, const TensorView& x, AttentionLayout layout,
               const Positions& positions, RopeDirection direction = RopeDirection::kForward,
               const TensorView* out = nullptr, const Context& ctx = Context{});

// q and k in one pass, in place (same batch, seq, head_dim and positions;
// heads may differ, dtypes may differ; q and k must not overlap). cos/sin are
// computed once per token for both.
void ApplyRopeQK(const RopeParams& params, const TensorView& q, const TensorView& k,
                 AttentionLayout layout, const Positions& positions,
                 RopeDirection direction = RopeDirection::kForward, const Context& ctx = Context{});

// Out-of-place form: q_out/k_out have q's/k's shape and dtype; each output
// must not overlap either input nor the other output (passing q's own view
// as q_out, or k's as k_out, works in place). Null pointers mean in place.
void ApplyRopeQK(const RopeParams& params, const TensorView& q, const TensorView& k,
                 AttentionLayout layout, const Positions& positions, RopeDirection direction,
                 const TensorView* q_out, const TensorView* k_out, const Context& ctx = Context{});

// Packed variable-length batch (FlashAttention varlen / vLLM flattened
// tokens): x is [total_tokens, heads, head_dim] (any dtype, any strides)
// holding num_seqs sequences back to back; sequence s owns tokens
// [cu_seqlens[s], cu_seqlens[s+1]) and token t of it sits at position
// seq_offsets[s] + (t - cu_seqlens[s]) (seq_offsets null: every offset 0).
// cu_seqlens has num_seqs + 1 entries: 0, non-decreasing (empty sequences
// allowed), last == total_tokens. Positions must stay in [0, 2^24) forward,
// [-(2^24 - 1), 2^24) inverse. `out` as in ApplyRope. Same numerics as
// calling ApplyRope on each sequence with Positions::Offset (bit-identical
// on Backend::kScalar; the SIMD kernel may round a cos/sin differently at a
// sequence boundary, within its float32 error bound).
void ApplyRopeVarlen(const RopeParams& params, const TensorView& x, const std::int64_t* cu_seqlens,
                     std::int64_t num_seqs, const std::int64_t* seq_offsets,
                     RopeDirection direction = RopeDirection::kForward,
                     const TensorView* out = nullptr, const Context& ctx = Context{});

// Precomputed cos/sin cache as the angle source (vLLM's cos_sin_cache):
// cache is [max_positions, rotary_dim], any dtype and strides; row p holds
// cos(p * inv_freq[j]) in columns [0, rotary_dim/2) and sin(p * inv_freq[j])
// in columns [rotary_dim/2, rotary_dim) (j-th frequency at column j of each
// half, whatever the pairing; values used as stored, so any attention
// factor is part of the cache). Rotates x like ApplyRope; params supplies
// head_dim, rotary_dim, pairing and numerics (kAccurate: float64 rotation in
// the scalar kernel, float32 in the SIMD one; kHF: cache values rounded to
// float32, then HF's per-op rounding); theta and frequencies are validated
// but unused. Positions in [0, max_positions) in both directions (kInverse
// negates sin).
void ApplyRopeWithCache(const RopeParams& params, const TensorView& x, AttentionLayout layout,
                        const Positions& positions, const TensorView& cos_sin_cache,
                        RopeDirection direction = RopeDirection::kForward,
                        const TensorView* out = nullptr, const Context& ctx = Context{});

// Fills such a cache ([max_positions, rotary_dim], any dtype, writable) for
// positions 0 .. max_positions-1 with params' frequencies, attention factor
// and numerics (RopeCosSin's values, cos half | sin half).
void RopeCosSinCache(const RopeParams& params, const TensorView& cos_sin_cache,
                     const Context& ctx = Context{});

// The attention scheme "rope": copies of q and k are rotated by their
// positions (ApplyRope) before the dot products; v is not rotated.
// params.head_dim must equal D. The frequencies (params.frequencies, e.g. a
// context-extension schedule) are copied into the scheme.
PositionScheme RopeScheme(const RopeParams& params);

}  // namespace posenc
