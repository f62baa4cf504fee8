// Shared internals of the fused (flash) attention: the forward engine
// (src/attention/flash_forward_engine.cc, used by flash_forward.cc and flash_varlen.cc) and
// the backward (src/attention/flash_backward.cc) both use these. Contract in
// include/posenc/flash_attention.h.
//
// Problem: one call validated once (shapes, positions, mask window, the
// scheme resolved to its policy, attention/scheme_policy.h). TileTerms: the
// scheme's position terms of one (query tile, key tile) pair, written once
// for both passes (a per-distance table when the scheme's bias depends on
// r - p only, else the scheme's row function). LoadRows, TransposeTile,
// RotateTile, PositionRange: tile loading shared by both passes. TileOps:
// the tile kernels, Highway (kernels/simd/flash.h) or, for
// Backend::kScalar, plain loops over the same padded buffers. Float32
// arithmetic; positions [0, 2^24). Internal to src/attention.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "attention/call_shape.h"
#include "attention/scheme_policy.h"
#include "kernels/dassert.h"
#include "kernels/scalar/flash.h"
#include "kernels/simd/flash.h"
#include "kernels/thread_scratch.h"
#include "posenc/flash_attention.h"

namespace posenc {

// The resolved form of a PreparedDecode (include/posenc/flash_attention.h).
struct PreparedDecode::State {
  AttentionLayout layout = AttentionLayout::kBSHD;
  AttentionMask mask = AttentionMask::kCausal;
  std::optional<std::int64_t> sliding_window;
  float scale = 1.0f;
  std::shared_ptr<const attention_internal::SchemePolicy> scheme;
  FlashRopeKeys rope_keys = FlashRopeKeys::kRotate;
  FlashPrecision precision = FlashPrecision::kFloat32;
  std::int64_t heads = 0, head_dim = 0, value_dim = 0;
};

}  // namespace posenc

namespace posenc::flash_internal {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Everything a call needs, validated.
struct Problem {
  attention_internal::Dims dims{};
  AttentionDims qd{}, kd{}, vd{}, od{};
  Positions query_positions, key_positions;
  float scale = 1.0f;
  AttentionMask mask = AttentionMask::kCausal;
  std::int64_t window = 0;  // 0: no window
  std::shared_ptr<const attention_internal::SchemePolicy> scheme;
  const RopeParams* rope = nullptr;  // the scheme's rotation (q always, k when rotate_keys)
  bool rotate_keys = false;
  FlashPrecision precision = FlashPrecision::kFloat32;  // of P and dS in the products
  bool Bf16() const { return precision == FlashPrecision::kBFloat16; }
  // The exp of P (kernels/flash_exp.h): the bfloat16 one where P is rounded
  // to bfloat16 before its products.
  kernels::FlashExp Exp() const {
    return Bf16() ? kernels::FlashExp::kBFloat16 : kernels::FlashExp::kFloat32;
  }
  TensorView lse;  // forward: optional float32 [B, H, Sq] output (data null: none)
  // forward: an optional second O output in its own dtype (data null: none)
  TensorView out_copy;
  AttentionDims ocd{};
  // A paged KV cache (FlashAttentionDecodePaged; block_table null: dense).
  // kd and vd then describe the page pool [num_pages, page_size, Hkv, D]:
  // stride_batch between pages, stride_seq between slots; dims.key_len is
  // the longest sequence.
  struct Pages {
    const std::int32_t* block_table = nullptr;  // [batch, max_pages]
    std::int64_t max_pages = 0, page_size = 0;
    const std::int32_t* seq_lens = nullptr;  // [batch]
    bool default_queries = false;            // queries at seq_lens[b] - Sq + i
  } pages;

  bool Visible(std::int64_t p, std::int64_t r) const {
    if (mask == AttentionMask::kCausal) {
      if (r > p) return false;
      return window == 0 || p - r < window;
    }
    return window == 0 || std::llabs(p - r) < window;
  }
  // For nk keys at consecutive positions r0, r0 + 1, ...: the number n of
  // leading keys that query position p sees when exactly those are visible
  // (causal, and a window that does not cut the tile's first key), so that a
  // row kernel masks keys j >= n by its length alone; -1 otherwise (the
  // caller masks key by key with Visible).
  std::int64_t VisiblePrefix(std::int64_t p, std::int64_t r0, std::int64_t nk) const {
    if (mask != AttentionMask::kCausal || (window != 0 && p - r0 >= window)) return -1;
    return std::clamp<std::int64_t>(p - r0 + 1, 0, nk);
  }
  // True when every pair of a query tile with positions [pmin, pmax] and a
  // key tile with positions [rmin, rmax] is visible.
  bool TileVisible(std::int64_t pmin, std::int64_t pmax, std::int64_t rmin,
                   std::int64_t rmax) const {
    if (mask == AttentionMask::kCausal) {
      if (rmax > pmin) return false;
      return window == 0 || pmax - rmin < window;
    }
    return window == 0 || std::max(pmax - rmin, rmax - pmin) < window;
  }
  // True when no pair of a query tile with positions [pmin, pmax] and a key
  // tile with positions [rmin, rmax] is visible.
  bool TileHidden(std::int64_t pmin, std::int64_t pmax, std::int64_t rmin,
                  std::int64_t rmax) const {
    if (mask == AttentionMask::kCausal) {
      if (rmin > pmax) return true;
      return window != 0 && pmin - rmax >= window;
    }
    if (window == 0) return false;
    return pmin - rmax >= window || rmin - pmax >= window;
  }
};

// Throws InvalidArgument naming "precision" when it is kBFloat16 and an
// input (named by its argument) is not bfloat16.
void CheckPrecisionInputs(FlashPrecision precision,
                          std::initializer_list<std::pair<const char*, const TensorView*>> inputs);

// Validates options, q/k/v and the scheme (which the fused kernels must
// support); fills every field of Problem except od.
Problem SetupInputs(const AttentionParams& params, const TensorView& q, const TensorView& k,
                    const TensorView& v, const FlashAttentionOptions& options);

// SetupInputs plus `out` (writable, [B, Sq, H, Dv] in the layout, no
// overlap with q, k, v): the forward's validation.
Problem Setup(const AttentionParams& params, const TensorView& q, const TensorView& k,
              const TensorView& v, const TensorView& out, const FlashAttentionOptions& options);

// Checks a log-sum-exp view: float32 [B, H, Sq] (any strides), named `arg`.
void CheckLse(const TensorView& lse, const attention_internal::Dims& d, std::string_view arg,
              bool writable);

// Setup for a prepared decode (PreparedDecode): q/k/v/out and the call's
// positions validated as Setup does, q's heads and head dim and v's head
// dim checked against the plan; the scheme, scale and mask are the plan's.
Problem SetupPrepared(const PreparedDecode::State& plan, const TensorView& q, const TensorView& k,
                      const TensorView& v, const TensorView& out,
                      const std::optional<Positions>& query_positions,
                      const std::optional<Positions>& key_positions);

// SetupPrepared for a paged cache: q, out, the page pools, the tables and
// the positions validated (every page a sequence uses in range, every
// length in [Sq, max_pages * page_size]).
Problem SetupPaged(const PreparedDecode::State& plan, const TensorView& q,
                   const PagedKVCache& cache, const TensorView& out,
                   const std::optional<Positions>& query_positions,
                   const std::optional<Positions>& key_positions);

// Validates `lse` as the forward's log-sum-exp output (float32 [B, H, Sq],
// writable, no overlap with q, k, v, out) and sets p.lse.
void SetLseOutput(Problem& p, const TensorView& lse, const TensorView& q, const TensorView& k,
                  const TensorView& v, const TensorView& out);

// Validates `out_copy` as a second output of O ([B, Sq, H, Dv] in the
// layout, writable, no overlap with q, k, v, out or p.lse) and sets
// p.out_copy and p.ocd.
void SetOutCopy(Problem& p, AttentionLayout layout, const TensorView& out_copy, const TensorView& q,
                const TensorView& k, const TensorView& v, const TensorView& out);

// The forward over every (batch, head, query tile) task (src/attention/flash_forward.cc).
void RunForward(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                const TensorView& out, const FlashAttentionOptions& options, const Context& ctx);

// Rows [s0, s0 + n) of head h of batch b of a rank-4 view, converted to
// float32 rows of `ld` >= dim floats (columns >= dim untouched).
void LoadRows(const TensorView& view, const AttentionDims& ad, std::int64_t b, std::int64_t h,
              std::int64_t s0, std::int64_t n, float* dst, std::int64_t ld);

// Row s0 of head h of batch b of a rank-4 view as the SIMD kernels read
// rows in place: its storage, address and row stride (elements); nullopt
// unless the view's head dim has unit stride and a float32/16-bit dtype.
struct StoredRows {
  kernels::simd::FlashStorage storage;
  const void* first;
  std::int64_t stride;
};
std::optional<StoredRows> StoredRowsOf(const TensorView& view, const AttentionDims& ad,
                                       std::int64_t b, std::int64_t h, std::int64_t s0);

using kernels::simd::kFlashPad;

inline std::int64_t Pad(std::int64_t n) { return (n + kFlashPad - 1) / kFlashPad * kFlashPad; }

// An index as a container subscript.
inline std::size_t Z(std::int64_t i) { return static_cast<std::size_t>(i); }

// The calling thread's buffers of an engine, kept between calls
// (kernels/thread_scratch.h).
using kernels::ThreadBuffers;

// view[base + x * stride] = values[x] * scale for x < n, rounded once to the
// view's dtype (float32 and bfloat16 directly, others as StoreFromDouble
// does): the output rows of the fused forward (O = acc / l) and backward
// (dQ, dK, dV with scale 1).
inline void StoreRow(const TensorView& view, std::int64_t base, std::int64_t stride,
                     const float* values, std::int64_t n, float scale) {
  if (view.dtype == DType::kFloat32) {
    float* dst = view.As<float>() + base;
    for (std::int64_t x = 0; x < n; ++x) dst[x * stride] = values[x] * scale;
  } else if (view.dtype == DType::kBFloat16) {
    auto* dst = static_cast<BFloat16*>(view.data) + base;
    for (std::int64_t x = 0; x < n; ++x) dst[x * stride] = FloatToBF16(values[x] * scale);
  } else {
    for (std::int64_t x = 0; x < n; ++x) {
      StoreFromDouble(view.data, view.dtype, base + x * stride,
                      static_cast<double>(values[x] * scale));
    }
  }
}

// The bfloat16 bits of x, a float32 that holds a bfloat16 value (q, k, v
// and dO rows of bfloat16 inputs, or rows RoundToBf16 rounded): its low 16
// bits are zero, so the bits are its high half and no rounding is needed.
inline std::uint32_t ExactBf16Bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  POSENC_DASSERT((u & 0xffffu) == 0);
  return u >> 16;
}

// x[i] = bfloat16(x[i]) (nearest even), i < n, in place: the rotated q and
// k of FlashPrecision::kBFloat16, as a bfloat16 model stores them.
inline void RoundToBf16(float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = BF16ToFloat(FloatToBF16(x[i]));
}

// Query rows per band of a causal diagonal tile (DiagonalBands).
inline constexpr std::int64_t kBandRows = kFlashPad;

// The engines' one task per unit mode (RunUnitTasks): f(unit, worker) for
// every unit in [0, n) exactly once, on ctx's workers. Worker w owns the
// w-th of num_threads contiguous blocks of units and runs it in order, so
// each thread streams through one contiguous stretch of [B, S, H, D] rows
// (the hardware prefetchers follow it) and the threads stay apart (heads
// of one token share cache lines); a worker whose block is done takes units
// from the back of the others' blocks, so a thread that is late (a busy
// host) holds up the call by one unit, not a block. Contiguous blocks made
// the training step's forward and backward calls 1-2 % faster than runs of
// up to 4 heads handed out in turn (docs/PERFORMANCE.md, "The training
// shape, tenth pass"). An exception from f ends the call as ParallelFor's
// tasks do.
void ForEachUnitInBlocks(std::int64_t n, const Context& ctx,
                         const std::function<void(std::int64_t, int)>& f);

// Min, max and whether positions are consecutive (pos[j] = pos[0] + j).
struct PositionRange {
  std::int64_t min = std::numeric_limits<std::int64_t>::max();
  std::int64_t max = -1;
  bool consecutive = true;
};
PositionRange RangeOf(const std::int64_t* pos, std::int64_t n);
// RangeOf of the n positions first, first + 1, ... without a pass over them.
inline PositionRange ConsecutiveRange(std::int64_t first, std::int64_t n) {
  return n > 0 ? PositionRange{first, first + n - 1, true} : PositionRange{};
}

// A causal tile on the diagonal cut into bands of kBandRows query rows
// (queries at qpos[0, nq) with range `queries`, keys at kpos[0, nk) with
// range `keys`, both RangeOf): band b needs only keys [0, cols[b]), cols[b] =
// Pad(the longest visible prefix among its rows) <= Pad(nk); every later
// logit, probability and product of the band is masked out and skipped.
// Returns false (cols then unspecified) unless every row sees a prefix of
// the keys (p.VisiblePrefix: causal, keys at consecutive positions, no
// window cutting a row's first key). prefixes (when not null, nq entries)
// receives each row's visible prefix. Consecutive queries take a closed
// form (the prefixes grow by one per row up to nk; the window check of the
// last row covers all), the same values as the row-by-row loop.
bool DiagonalBands(const Problem& p, const std::int64_t* qpos, std::int64_t nq,
                   const PositionRange& queries, const std::int64_t* kpos, std::int64_t nk,
                   const PositionRange& keys, std::int64_t* cols, std::int64_t* prefixes = nullptr);

// out [nq, ldk] = a . bt from bfloat16 pairs (a: [nq, dim / 2] rows of
// pairs; bt: [dim / 2, ldk, 2], K^T or V^T): the whole tile
// (FlashTileLogitsBf16), or, with band_cols (DiagonalBands), only the
// columns [0, band_cols[b]) of each band b (FlashMatMulBf16).
void TileLogitsBf16(const std::uint32_t* a, std::int64_t dim, const std::uint16_t* bt,
                    std::int64_t nq, std::int64_t ldk, const std::int64_t* band_cols, float* out,
                    bool simd);

// [n, dim] float32 rows (stride ld) of bfloat16 values as bit pairs
// (row stride dim / 2): exact, the values are bfloat16 already.
void PackPairs(const float* rows, std::int64_t n, std::int64_t dim, std::int64_t ld,
               std::uint32_t* pairs);

// Rows [n, dim] (stride ld) of bfloat16 values as the pairs of their
// transpose, [dim / 2, ldk, 2]: pair (y, j) = (rows[j][2y], rows[j][2y + 1]),
// zero for n <= j < ldk (the B operand of the bfloat16 logits, K^T or V^T).
void PackTransposedPairs(const float* rows, std::int64_t n, std::int64_t dim, std::int64_t ld,
                         std::uint16_t* out, std::int64_t ldk);

// Stores n float32 rows (stride ld) times scale (row_scale[i] for row i
// when not null) into rows [s0, s0 + n) of head h of batch b of a rank-4
// view (StoreRow).
void StoreRows(const TensorView& view, const AttentionDims& ad, std::int64_t b, std::int64_t h,
               std::int64_t s0, std::int64_t n, const float* src, std::int64_t ld,
               float scale = 1.0f, const float* row_scale = nullptr);

// StoreRows of gradient rows scale * acc, first rotated back by the inverse
// rotation at positions pos[0, n) when rope is not null (tmp: n * head_dim
// floats of scratch): dQ and dK of the backward.
void StoreGradRows(const TensorView& view, const AttentionDims& ad, std::int64_t b, std::int64_t h,
                   std::int64_t s0, std::int64_t n, const float* acc, std::int64_t ld, float scale,
                   const RopeParams* rope, const std::int64_t* pos, float* tmp,
                   const Context& serial);

// dst [dim, ldk] = transpose of rows [n, dim] (row stride `ld_rows`);
// columns [n, ldk) are zeroed so that no stale key reaches a logit. simd:
// kernels::simd::FlashTransposeTile, else the plain loop (Backend::kScalar).
void TransposeTile(const float* rows, std::int64_t n, std::int64_t dim, std::int64_t ld_rows,
                   float* dst, std::int64_t ldk, bool simd);

// Rotates a [n, D] float32 tile in place by per-row positions (direction
// kForward, or kInverse for gradients). Consecutive positions go through
// ApplyRope's offset path (angle addition between directly computed rows)
// instead of one direct float64 SinCos per row and frequency.
void RotateTile(const RopeParams& rope, float* tile, std::int64_t n, std::int64_t dim,
                const std::int64_t* pos, const Context& serial,
                RopeDirection direction = RopeDirection::kForward);

// The scheme's logit terms of one (query tile, key tile) pair of head h
// (see attention/scheme_policy.h). Per worker; Prepare once per tile pair,
// then Row per query row. When the scheme's bias depends only on r - p for
// the tile's query positions and the tile's distance range fits, the terms
// come from a per-distance table (one scheme evaluation per distance
// instead of per pair); otherwise from the scheme's row function.
class TileTerms {
 public:
  // cap: the largest distance range tabulated (the buffer holds ldk more
  // entries: a row window may read up to ldk entries past its last key).
  void Reset(const attention_internal::SchemePolicy& scheme, std::int64_t cap, std::int64_t ldk);
  bool active() const { return active_; }
  void Prepare(std::int64_t h, const PositionRange& queries, const std::int64_t* kpos,
               std::int64_t nk, const PositionRange& keys);
  // Terms of query row `qp` (q row `qi`, rotated) for the tile's nk keys:
  // a pointer to nk floats followed by readable padding up to ldk — a
  // window of the distance table, or `scratch` ([ldk]) filled here.
  const float* Row(std::int64_t qp, const float* qi, float scale, float* scratch) const;
  // True when the distance table is in use for the prepared tile.
  bool tabulated() const { return table_ready_; }
  // True when Row returns windows of the distance table (no scratch): the
  // pointers of every row of the tile stay valid together.
  bool WindowsOnly() const { return table_ready_ && keys_consecutive_; }
  // Row(qp, ...) when WindowsOnly(), inline: the window of query position qp.
  const float* Window(std::int64_t qp) const {
    POSENC_DASSERT(WindowsOnly());
    return table_.data() + (kpos_[0] - qp - lo_);
  }
  std::int64_t table_lo() const { return lo_; }   // first tabulated distance r - p
  std::int64_t table_size() const { return n_; }  // number of tabulated distances
  std::int64_t capacity() const { return cap_; }

 private:
  const attention_internal::SchemePolicy* scheme_ = nullptr;
  bool active_ = false;
  std::int64_t cap_ = 0, ldk_ = 0;
  std::vector<float> table_;
  bool table_ready_ = false;
  std::int64_t h_ = 0, lo_ = 0, n_ = 0, nk_ = 0;
  const std::int64_t* kpos_ = nullptr;
  bool keys_consecutive_ = false;
};

// The tile kernels: Highway (kernels/simd/flash.h) unless the context asks
// for the scalar backend, in which case the plain loops of
// kernels/scalar/flash.h (same padded buffers, same formulas, sequential
// sums) run.
struct TileOps {
  bool simd = true;

  // S[i, j] = sum_x Q[i, x] * KT[x, j], [nq, D] (row stride ldq) x [D, ld].
  void Logits(const float* q, std::int64_t ldq, const float* kt, std::int64_t nq, std::int64_t dim,
              std::int64_t ld, float* s) const {
    if (simd) return kernels::simd::FlashTileLogits(q, ldq, kt, nq, dim, ld, s);
    kernels::scalar::FlashTileLogits(q, ldq, kt, nq, dim, ld, s);
  }
  // Logits with band_cols (DiagonalBands): only columns [0, band_cols[b])
  // of each band b of kBandRows rows (SIMD; the scalar loops do the whole
  // tile). band_cols null: Logits.
  void LogitsBands(const float* q, std::int64_t ldq, const float* kt, std::int64_t nq,
                   std::int64_t dim, std::int64_t ld, const std::int64_t* band_cols,
                   float* s) const;
  // row[j] = exp(row[j] - max) (-inf -> 0) with the exp `exp` names
  // (kernels/flash_exp.h: Problem::Exp()); returns the row sum.
  float ExpRow(float* row, std::int64_t n, float max, kernels::FlashExp exp) const {
    return simd ? kernels::simd::FlashExpRow(row, n, max, exp)
                : kernels::scalar::FlashExpRow(row, n, max, exp);
  }
  // acc[i, :] += sum_j P[i, j] V[j, :].
  void PV(const float* p, std::int64_t ldp, const float* v, std::int64_t nq, std::int64_t nk,
          std::int64_t ldv, float* acc) const {
    if (simd) return kernels::simd::FlashAccumulatePV(p, ldp, v, nq, nk, ldv, acc);
    kernels::scalar::FlashAccumulatePV(p, ldp, v, nq, nk, ldv, acc);
  }
  // acc[j, :] += sum_i P[i, j] V[i, :] (P read in place, [nq, ldp]).
  void PTV(const float* p, std::int64_t ldp, const float* v, std::int64_t nq, std::int64_t nk,
           std::int64_t ldv, float* acc) const {
    if (simd) return kernels::simd::FlashAccumulatePTV(p, ldp, v, nq, nk, ldv, acc);
    kernels::scalar::FlashAccumulatePTV(p, ldp, v, nq, nk, ldv, acc);
  }
  // The backward row pass (kernels/simd/flash.h FlashBackwardRow): P into
  // s (by the exp `exp` names), dS = P (dp - delta) into dp, both rounded
  // as `rounding` says.
  void BackwardRow(float* s, float* dp, std::int64_t nk, std::int64_t ld, float scale,
                   const float* bias, float lse, float delta,
                   kernels::simd::FlashRowRounding rounding, kernels::FlashExp exp) const {
    if (simd) {
      return kernels::simd::FlashBackwardRow(s, dp, nk, ld, scale, bias, lse, delta, rounding, exp);
    }
    // The scalar backend's bfloat16 products take P and dS as pairs
    // (FlashMatMulBf16), which round them themselves.
    POSENC_DASSERT(rounding == kernels::simd::FlashRowRounding::kNone);
    kernels::scalar::FlashBackwardRow(s, dp, nk, ld, scale, bias, lse, delta, exp);
  }
  void AddRow(float* dst, const float* src, std::int64_t n) const {
    if (simd) return kernels::simd::FlashAddRow(dst, src, n);
    kernels::scalar::FlashAddRow(dst, src, n);
  }
};

}  // namespace posenc::flash_internal
