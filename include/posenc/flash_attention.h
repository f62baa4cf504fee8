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
// [Sq, Sk] array is ever allocated: extra memory is the float32 K/V tiles
// packed once per call (converted, RoPE-rotated, transposed; at most 16 MiB
// per group of kv heads, or one (batch, kv head)'s K/V if larger; a call of
// many small (batch, kv head) units packs each unit's tiles, <= 256 KiB, in
// its worker's buffer instead) plus O(query_tile * (key_tile + D + Dv))
// floats per worker. These buffers
// belong to the calling thread and keep their capacity from call to call
// (a training loop's calls would otherwise pay a first touch of every page
// per call under allocators that return freed pages, e.g. jemalloc): a
// thread that has called the forward holds up to ~16 MiB, the backward up
// to ~64 MiB, until it exits.
//
// Contract: the same formula, shapes, layouts, positions, masks, GQA/MQA and
// validation as AttentionReference (posenc/attention.h): read that header for
//   logits(i, j) = scale * (q_i . k_j + content term) + bias term.
// Supported schemes: the registry's fused ones (SchemeInfo::Fused(); listed
// by SchemeNames(/*fused_only=*/true) and `posenc schemes`); a reference-only
// scheme is rejected with InvalidArgument naming the fused ones.
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
// FlashAttentionOptions::precision = kBFloat16 (bfloat16 inputs only)
// rounds P and dS to bfloat16 where they enter the matrix products instead
// (FlashPrecision below). A query that sees no key gets zeros (never NaN).
// The kernels run with float32 subnormals flushed to zero (x86-64: MXCSR
// FTZ/DAZ on the worker thread during each task, restored after): every
// flushed term is below 2^-126, far under the rounding of the sums it enters,
// and Intel CPUs would otherwise take a microcode assist per subnormal
// product (P of a far key under ALiBi is ~1e-38).
// Positions [0, 2^24).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
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

// The precision of the probabilities P and of dS where they enter the
// matrix products (P . V in the forward and decode; P^T dO, dS K and dS^T Q
// in the backward). Not the kernel choice: every precision runs the fused
// kernels.
enum class FlashPrecision : std::uint8_t {
  // float32 P and dS (the default): error within 2x a plain float32
  // attention's against float64.
  kFloat32,
  // FlashAttention-2's and torch's bfloat16 path: P is rounded to bfloat16
  // (nearest even) before P . V, dS before dQ = dS K and dK = dS^T Q, and
  // the other operand of each product (V, dO, K, Q; RoPE-rotated q and k
  // too, as a bfloat16 model stores them) is a bfloat16 value, with float32
  // accumulation. Softmax statistics (max, sum, lse), dP = dO V^T and the
  // gradients of position tables stay float32; P itself comes from a
  // shorter exp (relative error <= 3e-6 before its 2^-9 rounding,
  // src/kernels/flash_exp.h), the same in the forward, the backward and
  // decode. Needs bfloat16 q, k, v (and dout in the backward). Error: the
  // bfloat16 rounding of P and dS
  // (relative 2^-9 per entry), measured against torch's own bfloat16 eager
  // attention in python/tests/test_attention_precision.py. Runs VDPBF16PS
  // where the CPU has AVX512_BF16 at full rate (AMD Zen 4/5), float32 FMAs
  // over the same rounded operands elsewhere (Intel Sapphire Rapids and
  // later run VDPBF16PS at half the FMA rate) and float32 loops on
  // Backend::kScalar (same values up to the float32 order of the sums).
  kBFloat16,
};
std::string_view FlashPrecisionName(FlashPrecision precision);  // "float32", "bfloat16"
FlashPrecision ParseFlashPrecision(std::string_view text, std::string_view arg = "precision");

struct FlashAttentionOptions {
  std::int64_t query_tile = 64;                      // rows of q per task, in [1, 4096]
  std::int64_t key_tile = 64;                        // rows of k/v per inner step, in [1, 4096]
  FlashRopeKeys rope_keys = FlashRopeKeys::kRotate;  // read only for kRope
  FlashPrecision precision = FlashPrecision::kFloat32;
};

// Throws InvalidArgument naming the field for a tile size outside [1, 4096]
// or a precision that is not a FlashPrecision value.
void ValidateFlashAttentionOptions(const FlashAttentionOptions& options);

// Fused attention: writes out ([B, Sq, H, Dv] in params.layout, any float
// dtype; must not overlap q, k, v). Throws InvalidArgument for every input
// AttentionReference rejects, and for an unsupported scheme kind.
void FlashAttention(const AttentionParams& params, const TensorView& q, const TensorView& k,
                    const TensorView& v, const TensorView& out,
                    const FlashAttentionOptions& options = FlashAttentionOptions{},
                    const Context& ctx = Context{});

// Packed variable-length batches (flash-attn's flash_attn_varlen_func
// convention): the sequences of a batch are concatenated along the token
// axis. q [total_q, H, D], k [total_k, Hkv, D], v [total_k, Hkv, Dv], out
// [total_q, H, Dv] (rank 3, any strides and float dtypes; params.layout is
// not read). cu_seqlens_q / cu_seqlens_k: batch + 1 offsets (batch >= 1),
// nondecreasing, first 0, last total_q / total_k; sequence b owns query rows
// [cu_seqlens_q[b], cu_seqlens_q[b + 1]) and key rows [cu_seqlens_k[b],
// cu_seqlens_k[b + 1]). Every sequence is attended independently with the
// same params: mask, window, scheme (RoPE/ALiBi/T5/Shaw as in
// FlashAttention), GQA; positions restart at 0 in every sequence: key j of
// sequence b sits at j and query i at Sk_b - Sq_b + i (bottom-right
// alignment, flash-attn's causal convention when Sk_b > Sq_b), so Sq_b <=
// Sk_b is required. A sequence with Sq_b = 0 is allowed (nothing is written
// for it; its keys are ignored); Sk_b = 0 needs Sq_b = 0. Throws
// InvalidArgument naming the argument for a malformed cu_seqlens (size,
// first, last, decreasing, different batch in the two lists, Sq_b > Sk_b),
// for params.query_positions / key_positions (must be unset), total_k >
// 2^24, and for everything FlashAttention rejects. Same numerics and memory
// bound as FlashAttention.
void FlashAttentionVarlen(const AttentionParams& params, const TensorView& q, const TensorView& k,
                          const TensorView& v, const TensorView& out,
                          std::span<const std::int64_t> cu_seqlens_q,
                          std::span<const std::int64_t> cu_seqlens_k,
                          const FlashAttentionOptions& options = FlashAttentionOptions{},
                          const Context& ctx = Context{});

// The forward that also writes the row log-sum-exp the backward needs:
// lse [B, H, Sq] float32 (any strides, writable, no overlap with q, k, v,
// out), lse(b, h, i) = log sum_j exp(logits(i, j)) over the keys visible
// from query i (natural log, logits scaled and biased as above, float32);
// -inf for a query that sees no key. out is as in FlashAttention.
void FlashAttentionWithLse(const AttentionParams& params, const TensorView& q, const TensorView& k,
                           const TensorView& v, const TensorView& out, const TensorView& lse,
                           const FlashAttentionOptions& options = FlashAttentionOptions{},
                           const Context& ctx = Context{});

// FlashAttentionWithLse that also writes O into out_copy, in out_copy's
// dtype, from the same float32 values as out and in the same pass (same
// shape rules as out, any strides and float dtype, writable, no overlap
// with q, k, v, out or lse; null data: no copy). For a training step with
// 16-bit activations: out float32 keeps the backward's D_i = dO_i . O_i
// exact, out_copy in the activations' dtype is what the caller returns,
// rounded exactly as a conversion of out would round it, without a second
// pass over O.
void FlashAttentionWithLse(const AttentionParams& params, const TensorView& q, const TensorView& k,
                           const TensorView& v, const TensorView& out, const TensorView& lse,
                           const TensorView& out_copy,
                           const FlashAttentionOptions& options = FlashAttentionOptions{},
                           const Context& ctx = Context{});

// Backward of the fused attention (FlashAttention-2, Dao 2023, Alg. 2) by
// recomputation: P is rebuilt tile by tile from lse (no stored
// probabilities), once per visible (query tile, key tile) pair; tasks over
// (batch, kv head, chunk of key tiles) finish dK and dV of their keys (the
// GQA group summed inside the task) and add dS K into per-chunk float32
// partials of dQ summed in a fixed order (no atomics; gradients do not
// depend on the thread count). Extra memory: the query side packed once
// (q, dO as float32 rows, lse, D) and the dQ partials, O(B H Sq (D + Dv))
// floats for the units in flight (<= 64 MiB per group of units), never
// [Sq, Sk].
//   D_i = dO_i . O_i;  P_ij = exp(logit_ij - lse_i);  dV_j += P_ij dO_i;
//   dP_ij = dO_i . (v_j + a^V_ij);  dS_ij = P_ij (dP_ij - D_i);
//   dQ_i += scale dS_ij (k_j + a^K_ij);  dK_j += scale dS_ij q_i.
// Inputs: q, k, v as given to the forward (same params and options.rope_keys),
// out its output ([B, Sq, H, Dv], any float dtype: D_i is computed from it,
// so a 16-bit out limits D's precision to that dtype), dout like out, lse
// the forward's FlashAttentionWithLse output, or a view with null data to
// recompute it here (one extra forward-like pass, O(B * H * Sq) floats).
// Gradients: the same semantics, shapes and rules as
// AttentionReferenceBackward (posenc/attention.h): grads.dq, dk, dv have the
// shapes of q, k, v (any float dtype, layout params.layout) and are
// overwritten; the gradient of a trainable scheme argument (grads.scheme:
// "table" of t5, "a_key" / "a_value" of shaw, FIRE's tensors) is
// overwritten when its view's data is non-null, as in the reference.
// ALiBi slopes are fixed (no gradient). RoPE: dq and dk are gradients with
// respect to the unrotated q and k (rotated back by the inverse rotation);
// with rope_keys == kPreRotated dk is with respect to the given (rotated)
// keys. Keys no query sees and queries that see no key get zero gradients.
// Numerics: float32 tiles and accumulation (table gradients: float64
// per-worker sums), rounded once to each output dtype; error against the
// float64 reference within 2x a plain float32 backward's error.
// Throws InvalidArgument naming the argument for every input FlashAttention
// rejects and for: out, dout, lse or a gradient of the wrong shape/dtype, a
// gradient that is not writable, and any gradient overlapping an input or
// another gradient.
void FlashAttentionBackward(const AttentionParams& params, const TensorView& q, const TensorView& k,
                            const TensorView& v, const TensorView& out, const TensorView& dout,
                            const TensorView& lse, const AttentionGrads& grads,
                            const FlashAttentionOptions& options = FlashAttentionOptions{},
                            const Context& ctx = Context{});

// Decode: Sq in [1, 16] query tokens per batch row against a KV cache of
// Sk keys (any length up to the position limit; 2^20 keys and more are the
// intended use), split-K across threads (flash-decoding, Dao et al. 2023):
// the cache is cut into chunks whose size depends on Sk only (>= 256 keys,
// <= 64 chunks), each (batch, chunk) task reads its keys and values once
// for every kv head (GQA: all G query heads of a kv head share the read)
// and leaves a partial softmax state (max, sum, output), and the partials
// are merged with the log-sum-exp rule. Same formula, params (masks,
// windows, positions: queries bottom-right aligned by default, i.e. at
// Sk - Sq + i), schemes (ALiBi, T5, RoPE with keys rotated in the kernel or
// pre-rotated in the cache, Shaw, none), layouts, dtypes, validation and
// numerics as FlashAttention; lse (optional, null data: none) as in
// FlashAttentionWithLse. Results do not depend on the thread count. A
// bfloat16 cache (keys not rotated by the kernel) gets bfloat16 dot
// products for q . k where the CPU has AVX512_BF16, with q split into three
// bfloat16 parts unless it is bfloat16 and unrotated, so the logits stay
// float32-accurate. Extra memory: B * chunks * H * Sq * (Dv + 2) floats,
// the query rows (B * H * Sq * D floats and, for a bfloat16 cache, up to
// three bfloat16 parts of each), and per-worker block scratch. Throws
// InvalidArgument ("q.shape[seq]") for Sq outside [1, 16] and for
// everything FlashAttention rejects.
void FlashAttentionDecode(const AttentionParams& params, const TensorView& q, const TensorView& k,
                          const TensorView& v, const TensorView& out,
                          const TensorView& lse = TensorView{},
                          const FlashAttentionOptions& options = FlashAttentionOptions{},
                          const Context& ctx = Context{});

// Decode prepared once, run every token (FlashInfer's plan / run split):
// the positional scheme of `params` resolved for q heads H, head dim D and
// value dim Dv (what it copies from the scheme's tensors and params is
// taken now; the plan keeps no pointer into them), with the mask, window,
// layout, attention scale and kernel options. A run validates the call's
// tensors and positions as FlashAttentionDecode does but resolves nothing:
// with the shapes of the previous call on the calling thread (and on the
// context's workers) it allocates no memory. The plan is immutable and may
// be shared by threads. params.query_positions / key_positions are ignored
// here: each run takes its own. Throws InvalidArgument for everything
// FlashAttentionDecode rejects about the params and scheme, and for heads,
// head_dim or value_dim outside [1, 65536].
class PreparedDecode {
 public:
  PreparedDecode(const AttentionParams& params, std::int64_t heads, std::int64_t head_dim,
                 std::int64_t value_dim,
                 const FlashAttentionOptions& options = FlashAttentionOptions{});
  ~PreparedDecode();
  PreparedDecode(const PreparedDecode&);
  PreparedDecode& operator=(const PreparedDecode&);

  std::int64_t heads() const;
  std::int64_t head_dim() const;
  std::int64_t value_dim() const;

  struct State;  // defined in src/attention (the resolved policy)
  const State& state() const { return *state_; }

 private:
  std::shared_ptr<const State> state_;
};

// One decode step with a prepared plan: as FlashAttentionDecode with the
// plan's params, and query / key positions for this call (std::nullopt:
// the defaults, queries at Sk - Sq + i, keys at j). Throws InvalidArgument
// naming the tensor when q's heads or head dim, or v's head dim, differ
// from the plan's, and for everything FlashAttentionDecode rejects.
void FlashAttentionDecode(const PreparedDecode& plan, const TensorView& q, const TensorView& k,
                          const TensorView& v, const TensorView& out, const TensorView& lse,
                          const std::optional<Positions>& query_positions,
                          const std::optional<Positions>& key_positions,
                          const Context& ctx = Context{});

// A paged KV cache (vLLM's PagedAttention block table; FlashInfer's "NHD"
// pages): the keys of sequence b are its first seq_lens[b] tokens, token j
// at slot j % page_size of page block_table[b * max_pages + j / page_size].
// k_pages [num_pages, page_size, Hkv, D] and v_pages [num_pages, page_size,
// Hkv, Dv] are rank-4 views with any strides (an "HND" pool, [num_pages,
// Hkv, page_size, D] in memory, is the same view with permuted strides),
// any float dtype; the tables are the caller's and are only read.
struct PagedKVCache {
  TensorView k_pages, v_pages;
  const std::int32_t* block_table = nullptr;  // [batch, max_pages] page ids
  std::int64_t max_pages = 0;                 // entries per block_table row (its row stride)
  const std::int32_t* seq_lens = nullptr;     // [batch] keys per sequence, each >= Sq
};

// One decode step against a paged cache with a prepared plan: as the dense
// FlashAttentionDecode(plan, ...) above, each sequence with its own length
// (continuous batching). q [B, Sq, H, D] and out [B, Sq, H, Dv] in the
// plan's layout; queries by default at seq_lens[b] - Sq + i, keys at j;
// explicit positions as for the dense call with Sk = max_b seq_lens[b]
// (key ids per row: [B, Sk], row b's first seq_lens[b] used). Blocks of
// keys never cross a page, so pages of 64 tokens or a multiple run at the
// dense cache's speed; smaller pages run in blocks of one page. Results
// match the dense call on the same keys to float32 rounding (the split
// into blocks differs); bit-identical to it for B = 1 and pages of a
// multiple of 64 tokens. Same numerics, lse and memory (zero allocation in
// the steady state) as the dense call. Throws InvalidArgument naming
// "cache.block_table[b][i]" for a page id outside [0, num_pages) among the
// pages a sequence uses, "cache.seq_lens[b]" for a length outside
// [Sq, max_pages * page_size], "cache.k_pages" / "cache.v_pages" for a
// shape that does not fit q, the plan or each other, null tables, and for
// everything the dense call rejects.
void FlashAttentionDecodePaged(const PreparedDecode& plan, const TensorView& q,
                               const PagedKVCache& cache, const TensorView& out,
                               const TensorView& lse,
                               const std::optional<Positions>& query_positions,
                               const std::optional<Positions>& key_positions,
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
