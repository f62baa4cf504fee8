// posenc/flash_attention.h: fused (flash) attention with the positional
// encoding evaluated inside the kernel.
//
// Algorithm: FlashAttention-2 (Dao 2023, "FlashAttention-2: Faster Attention
// with Better Parallelism and Work Partitioning", Alg. 1) on the CPU. Queries
// are cut into tiles of query_tile rows and keys into tiles of key_tile rows;
// for each query tile the key tiles are visited in order with an online
// softmax: running row max m, running sum l and an unnormalised output
// accumulator O, rescaled by exp(m_old - m_new) whenever the max grows
// (Milakov & Gimelshein 2018). O / l is stored at the end. The logits and
// probabilities of one tile live in a [query_tile, key_tile] scratch; no
// [Sq, Sk] array is ever allocated: extra memory per worker is
// O(query_tile * (key_tile + D + Dv) + key_tile * (D + Dv)) floats.
//
// Contract: the same formula, shapes, layouts, positions, masks, GQA/MQA and
// validation as AttentionReference (posenc/attention.h): read that header for
//   logits(i, j) = scale * (q_i . k_j + content term) + bias term.
// Supported schemes: kNone, kAbsolute, kRope, kAlibi, kT5, kShaw (the
// Transformer-XL and DeBERTa schemes are rejected with InvalidArgument).
// Position terms are computed per tile from the positions (i, j):
//   ALiBi: -slope[h] * |p - r| (slopes only); T5: table[bucket(r - p), h]
//   through T5Bucketer; Shaw: q_i . a^K[idx] and a^V[idx] with idx =
//   clip(r - p, -k, k) + k; RoPE: the q tile and k tile are rotated in a
//   float32 scratch by their positions (posenc::ApplyRope), unless
//   rope_keys == kPreRotated, in which case k is taken as already rotated by
//   the caller (a RoPE KV cache) and only q is rotated.
// Key tiles that are fully masked for a whole query tile (causal: every key
// position above every query position; sliding window: every key outside
// the window of every query) are skipped without being read. This uses the
// min/max positions of each tile, so it is exact for arbitrary positions.
// Work is split into ctx.ParallelFor tasks over batch x head x query tile.
//
// Numerics: inputs of any float dtype (float32, bfloat16, float16, float64)
// are converted to float32 tiles; dot products, softmax and accumulation are
// float32 (exp in float32). Output is rounded once to out's dtype. Error
// against the float64 reference: within 2x the error of a plain float32
// attention (the FlashAttention test rule), relative ~1e-6 for O(1) inputs.
// A query that sees no key gets zeros (never NaN). Positions [0, 2^24).
#pragma once

#include <cstdint>
#include <string_view>

#include "posenc/attention.h"
#include "posenc/context.h"
#include "posenc/tensor.h"

namespace posenc {

// Whether the keys passed to a RoPE flash attention still need rotating.
enum class FlashRopeKeys : std::uint8_t {
  kRotate,      // rotate k tiles on the fly by key_positions (like q)
  kPreRotated,  // k was rotated by key_positions by the caller (KV cache)
};
std::string_view FlashRopeKeysName(FlashRopeKeys keys);  // "rotate", "pre_rotated"
FlashRopeKeys ParseFlashRopeKeys(std::string_view text, std::string_view arg = "rope_keys");

struct FlashAttentionOptions {
  std::int64_t query_tile = 64;  // rows of q per task, in [1, 4096]
  std::int64_t key_tile = 64;    // rows of k/v per inner step, in [1, 4096]
  FlashRopeKeys rope_keys = FlashRopeKeys::kRotate;  // read only for kRope
};

// Throws InvalidArgument naming the field for a tile size outside [1, 4096].
void ValidateFlashAttentionOptions(const FlashAttentionOptions& options);

// Fused attention: writes out ([B, Sq, H, Dv] in params.layout, any float
// dtype; must not overlap q, k, v). Throws InvalidArgument for every input
// AttentionReference rejects, and for an unsupported scheme kind.
void FlashAttention(const AttentionParams& params, const TensorView& q, const TensorView& k,
                    const TensorView& v, const TensorView& out,
                    const FlashAttentionOptions& options = FlashAttentionOptions{},
                    const Context& ctx = Context{});

// KV-cache re-rotation: keys in a RoPE cache, rotated at positions p, are
// moved in place to positions p + delta (e.g. after evicting the first
// tokens of a streaming cache, delta < 0), using R(p + delta) = R(delta) R(p):
// every token is rotated by the same angle delta * inv_freq
// (posenc::ApplyRope forward with delta >= 0, inverse with |delta| for
// delta < 0). k is rank 4 in `layout`, any float dtype, modified in place;
// dims >= rotary_dim are unchanged. Error: one extra rotation's rounding
// (float32: a few ulp of |k|; 16-bit dtypes: one rounding of the storage
// type) against rotating the unrotated keys at p + delta from scratch.
// Throws InvalidArgument for |delta| > kMaxPosition ("delta"), invalid RoPE
// params, a head_dim other than params.head_dim, or an attention_factor != 1
// ("params.frequencies.attention_factor": the factor would be applied twice).
void ShiftRopeKeys(const RopeParams& params, const TensorView& k, AttentionLayout layout,
                   std::int64_t delta, const Context& ctx = Context{});

}  // namespace posenc
