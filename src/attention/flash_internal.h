// Shared internals of the fused (flash) attention: the forward
// (src/attention/flash.cc) and the backward (src/attention/flash_backward.cc)
// both use these. Contract in include/posenc/flash_attention.h.
//
// Problem: one call validated once (shapes, positions, mask window, the
// scheme resolved to float32 tables). LoadRows: rows of one head converted
// to float32. Scratch: the per-worker tile buffers of the forward. TileOps:
// the tile kernels, Highway (kernels/simd/flash.h) or, for
// Backend::kScalar, plain loops over the same padded buffers. Float32
// arithmetic; positions [0, 2^24). Internal to src/attention.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

#include "attention/policies.h"
#include "kernels/simd/flash.h"
#include "posenc/flash_attention.h"

namespace posenc::flash_internal {

using Kind = PositionScheme::Kind;
inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Everything a call needs, validated.
struct Problem {
  attention_internal::Dims dims{};
  AttentionDims qd{}, kd{}, vd{}, od{};
  Positions query_positions, key_positions;
  float scale = 1.0f;
  AttentionMask mask = AttentionMask::kCausal;
  std::int64_t window = 0;  // 0: no window
  Kind kind = Kind::kNone;
  RopeParams rope;
  bool rotate_keys = false;
  std::vector<float> slopes;          // ALiBi, [H]
  const T5BiasTable* t5 = nullptr;    // T5
  std::int64_t shaw_clip = 0;         // Shaw
  std::vector<float> a_key, a_value;  // Shaw, [2k + 1, D], [2k + 1, Dv]
  TensorView lse;  // forward: optional float32 [B, H, Sq] output (data null: none)

  bool Visible(std::int64_t p, std::int64_t r) const {
    if (mask == AttentionMask::kCausal) {
      if (r > p) return false;
      return window == 0 || p - r < window;
    }
    return window == 0 || std::llabs(p - r) < window;
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

// Validates options, the scheme kind, q/k/v and the scheme tables; fills
// every field of Problem except od.
Problem SetupInputs(const AttentionParams& params, const TensorView& q, const TensorView& k,
                    const TensorView& v, const FlashAttentionOptions& options);

// SetupInputs plus `out` (writable, [B, Sq, H, Dv] in the layout, no
// overlap with q, k, v): the forward's validation.
Problem Setup(const AttentionParams& params, const TensorView& q, const TensorView& k,
              const TensorView& v, const TensorView& out, const FlashAttentionOptions& options);

// Checks a log-sum-exp view: float32 [B, H, Sq] (any strides), named `arg`.
void CheckLse(const TensorView& lse, const attention_internal::Dims& d, std::string_view arg,
              bool writable);

// Validates `lse` as the forward's log-sum-exp output (float32 [B, H, Sq],
// writable, no overlap with q, k, v, out) and sets p.lse.
void SetLseOutput(Problem& p, const TensorView& lse, const TensorView& q, const TensorView& k,
                  const TensorView& v, const TensorView& out);

// The forward over every (batch, head, query tile) task (src/attention/flash.cc).
void RunForward(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                const TensorView& out, const FlashAttentionOptions& options, const Context& ctx);

// Rows [s0, s0 + n) of head h of batch b of a rank-4 view, converted to
// float32 rows of `ld` >= dim floats (columns >= dim untouched).
void LoadRows(const TensorView& view, const AttentionDims& ad, std::int64_t b, std::int64_t h,
              std::int64_t s0, std::int64_t n, float* dst, std::int64_t ld);

using kernels::simd::kFlashPad;

inline std::int64_t Pad(std::int64_t n) { return (n + kFlashPad - 1) / kFlashPad * kFlashPad; }

// Per-worker scratch, sized once per call. Padded widths: ldk = Pad(key
// tile) columns for the transposed keys and the logits, ldv = Pad(Dv) for
// values and accumulators; padding stays zero (keys, values) or is set to
// -inf (logits) so that the kernels run whole vectors.
struct Scratch {
  std::vector<float> q, k, kt, v, s, acc, m, l;
  std::vector<std::int64_t> qpos, kpos;
  void Resize(std::int64_t bq, std::int64_t bk, std::int64_t d, std::int64_t dv) {
    q.resize(static_cast<std::size_t>(bq * d));
    k.resize(static_cast<std::size_t>(bk * d));
    kt.assign(static_cast<std::size_t>(Pad(bk) * d), 0.0f);
    v.assign(static_cast<std::size_t>(bk * Pad(dv)), 0.0f);
    s.resize(static_cast<std::size_t>(bq * Pad(bk)));
    acc.resize(static_cast<std::size_t>(bq * Pad(dv)));
    m.resize(static_cast<std::size_t>(bq));
    l.resize(static_cast<std::size_t>(bq));
    qpos.resize(static_cast<std::size_t>(bq));
    kpos.resize(static_cast<std::size_t>(bk));
  }
};

// Rotates a [n, D] float32 tile in place by per-row positions (direction
// kForward, or kInverse for gradients).
void RotateTile(const RopeParams& rope, float* tile, std::int64_t n, std::int64_t dim,
                const std::int64_t* pos, const Context& serial,
                RopeDirection direction = RopeDirection::kForward);

inline float Dot(const float* a, const float* b, std::int64_t n) {
  float s = 0.0f;
  for (std::int64_t x = 0; x < n; ++x) s += a[x] * b[x];
  return s;
}

// The tile kernels: Highway (kernels/simd/flash.h) unless the context asks
// for the scalar backend, in which case these plain loops (same padded
// buffers, same formulas, sequential sums) run.
struct TileOps {
  bool simd = true;

  // S[i, j] = sum_x Q[i, x] * KT[x, j], [nq, D] x [D, ld].
  void Logits(const float* q, const float* kt, std::int64_t nq, std::int64_t dim, std::int64_t ld,
              float* s) const {
    if (simd) return kernels::simd::FlashTileLogits(q, kt, nq, dim, ld, s);
    for (std::int64_t i = 0; i < nq; ++i) {
      float* row = s + i * ld;
      std::fill(row, row + ld, 0.0f);
      const float* qi = q + i * dim;
      for (std::int64_t x = 0; x < dim; ++x) {
        const float a = qi[x];
        const float* kx = kt + x * ld;
        for (std::int64_t j = 0; j < ld; ++j) row[j] += a * kx[j];
      }
    }
  }
  // row[j] = exp(row[j] - max) (-inf -> 0); returns the row sum.
  float ExpRow(float* row, std::int64_t n, float max) const {
    if (simd) return kernels::simd::FlashExpRow(row, n, max);
    float sum = 0.0f;
    for (std::int64_t j = 0; j < n; ++j) {
      row[j] = row[j] == kNegInf ? 0.0f : std::exp(row[j] - max);
      sum += row[j];
    }
    return sum;
  }
  // acc[i, :] += sum_j P[i, j] V[j, :].
  void PV(const float* p, std::int64_t ldp, const float* v, std::int64_t nq, std::int64_t nk,
          std::int64_t ldv, float* acc) const {
    if (simd) return kernels::simd::FlashAccumulatePV(p, ldp, v, nq, nk, ldv, acc);
    for (std::int64_t i = 0; i < nq; ++i)
      for (std::int64_t j = 0; j < nk; ++j) {
        const float pj = p[i * ldp + j];
        if (pj == 0.0f) continue;
        for (std::int64_t x = 0; x < ldv; ++x) acc[i * ldv + x] += pj * v[j * ldv + x];
      }
  }
};

}  // namespace posenc::flash_internal
