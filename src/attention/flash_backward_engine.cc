// The FlashAttention-2 backward on the CPU (Dao 2023, "FlashAttention-2: Faster Attention with
// Better Parallelism and Work Partitioning", Alg. 2): one pass over the visible (query tile, key
// tile) pairs that recomputes P once per pair and produces all three gradients from it.
// Formula: src/attention/flash_backward.cc; contract and memory: include/posenc/flash_attention.h.
// Work split: a call runs in groups of units (batch b, kv head hk) whose packed buffers stay under
// kPackBudgetBytes (a larger unit runs alone), each group in three ParallelFor phases:
//  1. Pack, over (unit, query head of its GQA group, query tile): PackQueryTile;
//  2. Key tiles, over (unit, chunk of consecutive key tiles): KeyChunk and PairWork;
//  3. Reduce, over (unit, query head, query tile): ReduceQueryTile.
// Race-free without atomics: a key tile's dK and dV are finished inside one task and each chunk
// owns a float32 partial of dQ, summed in chunk order; the chunks depend on the shape only, never
// on the threads, so gradients are bit-identical for any thread count. Numerics: see PairWork.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attention/flash_backward_engine.h"
#include "kernels/simd/flash.h"

namespace posenc::flash_internal {
namespace {

using attention_internal::SchemeGradSums;
using attention_internal::SchemeRow;
using Index = std::int64_t;

// Packed bytes of one group of units: q, dO, lse, D and the dQ partials of
// the units in flight, O(B H Sq (D + Dv) (1 + chunks)) floats in all for a
// call, are bounded by it (a unit larger than that runs alone).
constexpr std::int64_t kPackBudgetBytes = std::int64_t{64} << 20;
constexpr std::int64_t kMinTasks = 4;  // key-tile tasks per call, at least (when key tiles allow)

std::size_t Z(Index i) { return static_cast<std::size_t>(i); }

// Geometry shared by every phase.
struct Layout {
  Index D = 0, Dv = 0, ldd = 0, ldv = 0, ldk = 0, G = 1, Sq = 0, chunks = 1;
  Index q_tiles = 0, half_bq = 0;  // query tiles per head, (bq + 1) / 2
  bool bf16_qk = false;            // S = Q K^T with bfloat16 dot products (q, k bfloat16 values)
  bool bf16_dv = false;            // dP = dO V^T with bfloat16 dot products (dout, v bfloat16)
  // FlashPrecision::kBFloat16: P^T dO, dS^T Q, dS K with P and dS rounded
  // to bfloat16 (FlashMatMulBf16); simd: its VDPBF16PS path allowed.
  bool bf16_products = false, simd = true;
  // Floats of one unit: q rows, dO rows, lse, chunk partials of dQ.
  Index RowsFloats() const { return G * Sq * (ldd + ldv + 1); }
  Index UnitFloats() const { return RowsFloats() + chunks * G * Sq * ldd; }
  // Pairs of one query tile as B operands (bf16_products): Q then dO.
  Index TileBPairs() const { return bf16_products ? half_bq * (ldd + ldv) : 0; }
  Index UnitPairs() const {
    return (bf16_qk ? G * Sq * D / 2 : 0) + (bf16_dv ? G * Sq * Dv / 2 : 0) +
           G * q_tiles * TileBPairs();
  }
};

// The packed query side of one unit, inside the group's buffers.
struct UnitView {
  float* q = nullptr;                   // [G, Sq, ldd] rotated q rows (zero padding)
  float* dout = nullptr;                // [G, Sq, ldv]
  float* lse = nullptr;                 // [G, Sq]
  float* dq = nullptr;                  // [chunks, G, Sq, ldd] partial sums of dS K
  double* delta = nullptr;              // [G, Sq] D_i = dO_i . O_i
  std::uint32_t* q_pairs = nullptr;     // [G, Sq, D / 2] (bf16_qk)
  std::uint32_t* dout_pairs = nullptr;  // [G, Sq, Dv / 2] (bf16_dv)
  // [G, q_tiles] query tiles as FlashMatMulBf16 B operands (bf16_products):
  // Q [half_bq, ldd, 2] then dO [half_bq, ldv, 2] bfloat16 pairs along the rows.
  std::uint32_t* tile_b = nullptr;
  const std::uint16_t* QB(const Layout& L, Index hl, Index t) const {
    return reinterpret_cast<const std::uint16_t*>(tile_b + (hl * L.q_tiles + t) * L.TileBPairs());
  }
  const std::uint16_t* DoutB(const Layout& L, Index hl, Index t) const {
    return QB(L, hl, t) + 2 * L.half_bq * L.ldd;
  }
};

UnitView ViewOf(const Layout& L, float* floats, double* deltas, std::uint32_t* pairs) {
  UnitView u;
  const Index rows = L.G * L.Sq;
  u.q = floats;
  u.dout = u.q + rows * L.ldd;
  u.lse = u.dout + rows * L.ldv;
  u.dq = u.lse + rows;
  u.delta = deltas;
  u.q_pairs = pairs;
  u.dout_pairs = pairs + (L.bf16_qk ? rows * L.D / 2 : 0);
  u.tile_b = u.dout_pairs + (L.bf16_dv ? rows * L.Dv / 2 : 0);
  return u;
}

// Per-worker buffers: O((Bq + Bk) (D + Dv) + Bq Bk) floats, never an
// [Sq, Sk] array.
struct Scratch {
  std::vector<float> rows, kt, krows, vt, s, dp, bias, dk, dv, dist;
  std::vector<std::uint16_t> kt_pairs, vt_pairs;
  // bf16_products: K rows as B [(bk + 1) / 2, ldd, 2]; P^T and dS^T as
  // pairs-major A [half_bq, ldk, 2]; dS as rows-major A [bq, ldk / 2]; ones
  // (beta of the accumulating products).
  std::vector<std::uint16_t> k_b, pt_a, dst_a;
  std::vector<std::uint32_t> ds_a;
  std::vector<float> ones;
  std::vector<double> dist64;
  TileTerms tile_terms;
  SchemeGradSums sums;
  Context serial{1};
};

// What RunBackward keeps between calls on the calling thread.
struct BackwardBuffers {
  std::vector<float> floats;  // the packed units of one group
  std::vector<double> deltas;
  std::vector<std::uint32_t> pairs;
  std::vector<Scratch> scratch;  // per worker
};

void Resize(Scratch& w, const BackwardCall& c, const Layout& L, Backend backend) {
  const Index bq = c.bq, bk = c.bk, cap = 4 * (bq + bk);
  w.rows.assign(Z(std::max(bq, bk) * std::max(L.D, L.Dv)), 0.0f);
  w.kt.assign(Z(L.D * L.ldk), 0.0f);
  w.krows.assign(Z(bk * L.ldd), 0.0f);
  w.vt.assign(Z(L.Dv * L.ldk), 0.0f);
  w.s.assign(Z(bq * L.ldk), 0.0f);
  w.dp.assign(Z(bq * L.ldk), 0.0f);
  w.bias.assign(Z(L.ldk), 0.0f);
  w.dk.assign(Z(bk * L.ldd), 0.0f);
  w.dv.assign(Z(bk * L.ldv), 0.0f);
  w.dist.assign(Z(cap + L.ldk), 0.0f);
  w.dist64.assign(Z(cap), 0.0);
  w.kt_pairs.assign(L.bf16_qk ? Z(L.D * L.ldk) : 0, 0);
  w.vt_pairs.assign(L.bf16_dv ? Z(L.Dv * L.ldk) : 0, 0);
  const bool bp = L.bf16_products;
  w.k_b.assign(bp ? Z((bk + 1) / 2 * L.ldd * 2) : 0, 0);
  w.pt_a.assign(bp ? Z(L.half_bq * L.ldk * 2) : 0, 0);
  w.dst_a.assign(bp ? Z(L.half_bq * L.ldk * 2) : 0, 0);
  w.ds_a.assign(bp ? Z(bq * L.ldk / 2) : 0, 0);
  w.ones.assign(bp ? Z(std::max(bq, bk)) : 0, 1.0f);
  w.serial = Context(1, backend);
  w.tile_terms.Reset(*c.p.scheme, cap, L.ldk);
  w.sums = c.p.scheme->NewGradSums();
}

// Stores n float32 rows (stride ld) into rows [s0, s0 + n) of head h of batch b.
void StoreRows(const TensorView& view, const AttentionDims& ad, Index b, Index h, Index s0, Index n,
               const float* src, Index ld) {
  for (Index s = 0; s < n; ++s) {
    const Index base = b * ad.stride_batch + h * ad.stride_head + (s0 + s) * ad.stride_seq;
    StoreRow(view, base, ad.stride_dim, src + s * ld, ad.head_dim, 1.0f);
  }
}

// [n, dim] float32 rows (stride ld) of bfloat16 values as bit pairs
// (row stride dim / 2): exact, the values are bfloat16 already.
void PackPairs(const float* rows, Index n, Index dim, Index ld, std::uint32_t* pairs) {
  for (Index i = 0; i < n; ++i)
    for (Index x = 0; x < dim / 2; ++x) {
      pairs[i * (dim / 2) + x] =
          ExactBf16Bits(rows[i * ld + 2 * x]) | ExactBf16Bits(rows[i * ld + 2 * x + 1]) << 16;
    }
}

// K^T [dim, ldk] of bfloat16 values as pairs [dim / 2, ldk, 2].
void PackTransposedPairs(const float* kt, Index dim, Index ldk, std::uint16_t* out) {
  for (Index y = 0; y < dim / 2; ++y) {
    const float* even = kt + 2 * y * ldk;
    const float* odd = even + ldk;
    std::uint16_t* dst = out + y * 2 * ldk;
    for (Index j = 0; j < ldk; ++j) {
      dst[2 * j] = static_cast<std::uint16_t>(ExactBf16Bits(even[j]));
      dst[2 * j + 1] = static_cast<std::uint16_t>(ExactBf16Bits(odd[j]));
    }
  }
}

// Phase 1: query tile t of head h (local head hl of unit (b, hk)). The q
// rows rotated by the scheme's rotation, the dO rows, lse and
// D_i = dO_i . O_i (float64, from out: out's dtype bounds its precision) are
// converted once per call into float32 rows padded to a multiple of
// kFlashPad (and into bfloat16 pairs for the AVX512_BF16 dot products), so
// the key tiles' inner loop reads them in place instead of converting them
// once per key tile.
void PackQueryTile(const BackwardCall& c, const Layout& L, const UnitView& u, const TensorView& q,
                   const TensorView& out, const TensorView& dout, Index b, Index h, Index hl,
                   Index t, Scratch& w) {
  const Problem& p = c.p;
  const Index i0 = t * c.bq, nq = std::min(c.bq, L.Sq - i0), row0 = hl * L.Sq + i0;
  const Index* qpos = &c.qpos[Z(b * L.Sq + i0)];
  float* tmp = w.rows.data();
  LoadRows(q, p.qd, b, h, i0, nq, tmp, L.D);
  if (p.rope != nullptr) {
    RotateTile(*p.rope, tmp, nq, L.D, qpos, w.serial);
    if (p.Bf16()) RoundToBf16(tmp, nq * L.D);  // as the forward rounds them
  }
  for (Index i = 0; i < nq; ++i) {
    float* dst = u.q + (row0 + i) * L.ldd;
    std::copy_n(tmp + i * L.D, L.D, dst);
    std::fill(dst + L.D, dst + L.ldd, 0.0f);
  }
  float* dst = u.dout + row0 * L.ldv;
  LoadRows(dout, c.dod, b, h, i0, nq, dst, L.ldv);
  LoadRows(out, c.od, b, h, i0, nq, tmp, L.Dv);
  for (Index i = 0; i < nq; ++i) {
    float* row = dst + i * L.ldv;
    std::fill(row + L.Dv, row + L.ldv, 0.0f);
    double dot = 0.0;
    for (Index x = 0; x < L.Dv; ++x) dot += static_cast<double>(row[x]) * tmp[i * L.Dv + x];
    u.delta[row0 + i] = dot;
    u.lse[row0 + i] = c.lse.As<const float>()[b * c.lse.strides[0] + h * c.lse.strides[1] +
                                              (i0 + i) * c.lse.strides[2]];
  }
  if (L.bf16_qk) PackPairs(u.q + row0 * L.ldd, nq, L.D, L.ldd, u.q_pairs + row0 * L.D / 2);
  if (L.bf16_dv) PackPairs(dst, nq, L.Dv, L.ldv, u.dout_pairs + row0 * L.Dv / 2);
  if (L.bf16_products) {
    auto* qb = const_cast<std::uint16_t*>(u.QB(L, hl, t));
    kernels::simd::FlashPackPairsB(u.q + row0 * L.ldd, L.ldd, nq, L.D, qb, L.ldd, L.simd);
    kernels::simd::FlashPackPairsB(dst, L.ldv, nq, L.Dv, qb + 2 * L.half_bq * L.ldd, L.ldv, L.simd);
  }
  for (Index ch = 0; ch < L.chunks; ++ch) {
    float* part = u.dq + (ch * L.G * L.Sq + row0) * L.ldd;
    std::fill(part, part + nq * L.ldd, 0.0f);
  }
}

// Key tile u of batch b, kv head hk: K^T, K rows, V^T (and bf16 pairs).
void LoadKeyTile(const BackwardCall& c, const Layout& L, const TensorView& k, const TensorView& v,
                 Index b, Index hk, Index u, Scratch& w) {
  const Problem& p = c.p;
  const Index j0 = u * c.bk, nk = std::min(c.bk, p.dims.key_len - j0);
  float* tmp = w.rows.data();
  LoadRows(k, p.kd, b, hk, j0, nk, tmp, L.D);
  if (p.rotate_keys) {
    RotateTile(*p.rope, tmp, nk, L.D, &c.kpos[Z(b * p.dims.key_len + j0)], w.serial);
    if (p.Bf16()) RoundToBf16(tmp, nk * L.D);  // as the forward rounds them
  }
  TransposeTile(tmp, nk, L.D, L.D, w.kt.data(), L.ldk);
  for (Index j = 0; j < nk; ++j) {
    float* dst = w.krows.data() + j * L.ldd;
    std::copy_n(tmp + j * L.D, L.D, dst);
    std::fill(dst + L.D, dst + L.ldd, 0.0f);
  }
  if (L.bf16_products) {
    kernels::simd::FlashPackPairsB(w.krows.data(), L.ldd, nk, L.D, w.k_b.data(), L.ldd, L.simd);
  }
  LoadRows(v, p.vd, b, hk, j0, nk, tmp, L.Dv);
  TransposeTile(tmp, nk, L.Dv, L.Dv, w.vt.data(), L.ldk);
  if (L.bf16_qk) PackTransposedPairs(w.kt.data(), L.D, L.ldk, w.kt_pairs.data());
  if (L.bf16_dv) PackTransposedPairs(w.vt.data(), L.Dv, L.ldk, w.vt_pairs.data());
}

// One (query tile, key tile) pair of the key-tile task:
//   S = Q K^T, dP = dO V^T               (register-blocked SIMD tiles)
//   P = exp(S scale + T - lse), dS = P (dP - D)   (one SIMD row pass)
//   dV += P^T dO, dK += dS^T Q           (transposed SIMD accumulation)
//   dQ_part += dS K                      (SIMD accumulation)
// Position terms T come from the scheme through TileTerms (the forward's
// code), value terms through ValueGradRow, parameter gradients through
// SchemeGrads.
// Numerics: float32 tiles, dot products and accumulation through the SIMD
// tile kernels of kernels/simd/flash.h (Highway, or plain loops for
// Backend::kScalar), with AVX512_BF16 dot products for S and dP when both
// operands are bfloat16 inputs (exact products, float32 sums); a value
// term's dO . a_ij - D_i is rounded once (the scheme combines it in
// float64); every gradient is rounded once to its dtype. Error against the
// float64 reference: within 2x a plain float32 backward's error
// (tests/unit/flash_backward_test.cc).
struct PairWork {
  const BackwardCall& c;
  const Layout& L;
  const TileOps& ops;
  const UnitView& u;
  Scratch& w;
  Index b, h, hl, chunk;

  SchemeRow<float> RowOf(Index row, Index i, const Index* qpos, const Index* kpos, Index nk) const {
    SchemeRow<float> r;
    r.head = h;
    r.qpos = qpos[i];
    r.q = u.q + (row + i) * L.ldd;
    r.kpos = kpos;
    r.nk = nk;
    return r;
  }

  void Run(Index t, Index ku, const PositionRange& qr, const PositionRange& kr) {
    const Problem& p = c.p;
    const Index i0 = t * c.bq, nq = std::min(c.bq, L.Sq - i0), row0 = hl * L.Sq + i0;
    const Index nk = std::min(c.bk, p.dims.key_len - ku * c.bk), ldk = L.ldk;
    const Index* qpos = &c.qpos[Z(b * L.Sq + i0)];
    const Index* kpos = &c.kpos[Z(b * p.dims.key_len + ku * c.bk)];
    const float* qt = u.q + row0 * L.ldd;
    const float* dot = u.dout + row0 * L.ldv;
    float* s = w.s.data();
    float* dp = w.dp.data();
    if (L.bf16_qk) {
      kernels::simd::FlashTileLogitsBf16(u.q_pairs + row0 * L.D / 2, L.D / 2, w.kt_pairs.data(), nq,
                                         L.D, ldk, s);
    } else {
      ops.Logits(qt, L.ldd, w.kt.data(), nq, L.D, ldk, s);
    }
    if (L.bf16_dv) {
      kernels::simd::FlashTileLogitsBf16(u.dout_pairs + row0 * L.Dv / 2, L.Dv / 2,
                                         w.vt_pairs.data(), nq, L.Dv, ldk, dp);
    } else {
      ops.Logits(dot, L.ldv, w.vt.data(), nq, L.Dv, ldk, dp);
    }
    const bool all_visible = p.TileVisible(qr.min, qr.max, kr.min, kr.max);
    const bool terms = w.tile_terms.active(), values = p.scheme->Has(SchemeTerm::kValue);
    if (terms) w.tile_terms.Prepare(h, qr, kpos, nk, kr);
    for (Index i = 0; i < nq; ++i) {
      float* srow = s + i * ldk;
      float* dprow = dp + i * ldk;
      const float lse = u.lse[row0 + i];
      if (lse == kNegInf) {  // the query sees no key: P = dS = 0
        std::fill(srow, srow + ldk, 0.0f);
        std::fill(dprow, dprow + ldk, 0.0f);
        continue;
      }
      const float* bias = nullptr;
      if (terms) bias = w.tile_terms.Row(qpos[i], qt + i * L.ldd, p.scale, w.bias.data());
      // A causal diagonal tile: row i sees a prefix of the keys, masked by length.
      const Index prefix =
          all_visible || !kr.consecutive ? -1 : p.VisiblePrefix(qpos[i], kpos[0], nk);
      if (!all_visible && prefix < 0) {
        float* m = w.bias.data();
        if (bias == nullptr) {
          std::fill(m, m + ldk, 0.0f);
        } else if (bias != m) {
          std::copy(bias, bias + ldk, m);
        }
        for (Index j = 0; j < nk; ++j) {
          if (!p.Visible(qpos[i], kpos[j])) m[j] = kNegInf;
        }
        bias = m;
      }
      double delta = u.delta[row0 + i];
      if (values) {  // dP_ij += dO_i . a_ij - D_i (the scheme rounds the difference once)
        p.scheme->ValueGradRow(RowOf(row0, i, qpos, kpos, nk), dot + i * L.ldv, delta, dprow);
        delta = 0.0;
      }
      ops.BackwardRow(srow, dprow, prefix >= 0 ? prefix : nk, ldk, p.scale, bias, lse,
                      static_cast<float>(delta));
    }
    float* dq = u.dq + (chunk * L.G * L.Sq + row0) * L.ldd;
    if (L.bf16_products) {
      Bf16Products(t, nq, nk, dq);
    } else {
      ops.PTV(s, ldk, dot, nq, nk, L.ldv, w.dv.data());    // dV += P^T dO
      ops.PTV(dp, ldk, qt, nq, nk, L.ldd, w.dk.data());    // dK += dS^T Q
      ops.PV(dp, ldk, w.krows.data(), nq, nk, L.ldd, dq);  // dQ += dS K
    }
    if (c.any_scheme_grad || p.scheme->Has(SchemeTerm::kLogit)) {
      SchemeGrads(row0, nq, nk, qpos, kpos, qr, kr, dq);
    }
  }

  // dV += P^T dO, dK += dS^T Q, dQ += dS K with P and dS rounded to
  // bfloat16 against the bfloat16 pairs of dO, Q and K (float32 sums).
  void Bf16Products(Index t, Index nq, Index nk, float* dq) {
    const Index ldk = L.ldk, pairs_q = (nq + 1) / 2;
    using kernels::simd::FlashMatMulBf16;
    using kernels::simd::FlashPackPairsB;
    FlashPackPairsB(w.s.data(), ldk, nq, nk, w.pt_a.data(), ldk, L.simd);
    FlashPackPairsB(w.dp.data(), ldk, nq, nk, w.dst_a.data(), ldk, L.simd);
    kernels::simd::FlashPackPairsRows(w.dp.data(), ldk, nq, nk, w.ds_a.data(), ldk / 2, L.simd);
    const auto* pt = reinterpret_cast<const std::uint32_t*>(w.pt_a.data());
    const auto* dst = reinterpret_cast<const std::uint32_t*>(w.dst_a.data());
    const float* ones = w.ones.data();
    FlashMatMulBf16(pt, 1, ldk, nk, u.DoutB(L, hl, t), pairs_q, L.ldv, L.ldv, ones, w.dv.data(),
                    L.ldv, L.simd);
    FlashMatMulBf16(dst, 1, ldk, nk, u.QB(L, hl, t), pairs_q, L.ldd, L.ldd, ones, w.dk.data(),
                    L.ldd, L.simd);
    FlashMatMulBf16(w.ds_a.data(), ldk / 2, 1, nq, w.k_b.data(), (nk + 1) / 2, L.ldd, L.ldd, ones,
                    dq, L.ldd, L.simd);
  }

  // The scheme's parameter gradients and content dq terms of the tile (dq
  // unscaled, like dS K). A bias of r - p only gets dS summed per distance
  // first: with consecutive positions row i is a window of the distance
  // row (a SIMD add); otherwise one add per pair; then DistanceGrad runs
  // once per distance. Otherwise BackwardRow runs per query row.
  void SchemeGrads(Index row0, Index nq, Index nk, const Index* qpos, const Index* kpos,
                   const PositionRange& qr, const PositionRange& kr, float* dq) {
    const auto& scheme = *c.p.scheme;
    const Index ldk = L.ldk;
    if (w.tile_terms.tabulated() && !scheme.Has(SchemeTerm::kLogit) &&
        !scheme.Has(SchemeTerm::kValue)) {
      const Index lo = w.tile_terms.table_lo(), n = w.tile_terms.table_size();
      float* dist = w.dist.data();
      std::fill(dist, dist + n, 0.0f);
      for (Index i = 0; i < nq; ++i) {
        const float* ds = w.dp.data() + i * ldk;
        if (kr.consecutive) {
          ops.AddRow(dist + (kpos[0] - qpos[i] - lo), ds, nk);
        } else {
          for (Index j = 0; j < nk; ++j) dist[kpos[j] - qpos[i] - lo] += ds[j];
        }
      }
      for (Index x = 0; x < n; ++x) w.dist64[Z(x)] = dist[x];
      scheme.DistanceGrad(h, qr.min, lo, n, w.dist64.data(), w.sums);
      return;
    }
    for (Index i = 0; i < nq; ++i) {
      scheme.BackwardRow(RowOf(row0, i, qpos, kpos, nk), w.s.data() + i * ldk,
                         w.dp.data() + i * ldk, u.dout + (row0 + i) * L.ldv, c.p.scale,
                         dq + i * L.ldd, nullptr, w.sums);
    }
  }
};

// Phase 2: key tiles [u0, u1) of unit (b, hk), chunk `chunk`. Each key tile
// is loaded once (K^T, K rows, V^T), then the GQA group's query heads and
// the query tiles not hidden by the causal mask or the window (tile min/max
// positions, exact for arbitrary positions) run against it; its dK and dV
// are complete when that loop ends (the group's heads summed inside the
// task: no atomics). dQ rows get contributions from every chunk, each into
// the chunk's own partial, so tasks never share memory.
void KeyChunk(const BackwardCall& c, const Layout& L, const TileOps& ops, const UnitView& u,
              const TensorView& k, const TensorView& v, const AttentionGrads& g, Index b, Index hk,
              Index chunk, Index u0, Index u1, Scratch& w) {
  const Problem& p = c.p;
  for (Index ku = u0; ku < u1; ++ku) {
    const Index j0 = ku * c.bk, nk = std::min(c.bk, p.dims.key_len - j0);
    const PositionRange& kr = c.k_ranges[Z(b * c.k_tiles + ku)];
    LoadKeyTile(c, L, k, v, b, hk, ku, w);
    std::fill(w.dk.begin(), w.dk.end(), 0.0f);
    std::fill(w.dv.begin(), w.dv.end(), 0.0f);
    for (Index hl = 0; hl < L.G; ++hl) {
      PairWork pair{c, L, ops, u, w, b, hk * L.G + hl, hl, chunk};
      for (Index t = 0; t < c.q_tiles; ++t) {
        const PositionRange& qr = c.q_ranges[Z(b * c.q_tiles + t)];
        if (p.TileHidden(qr.min, qr.max, kr.min, kr.max)) continue;
        pair.Run(t, ku, qr, kr);
      }
    }
    // dk = scale * acc, rotated back to the unrotated keys' frame.
    float* tmp = w.rows.data();
    for (Index j = 0; j < nk; ++j)
      for (Index x = 0; x < L.D; ++x) tmp[j * L.D + x] = p.scale * w.dk[Z(j * L.ldd + x)];
    if (p.rotate_keys) {
      RotateTile(*p.rope, tmp, nk, L.D, &c.kpos[Z(b * p.dims.key_len + j0)], w.serial,
                 RopeDirection::kInverse);
    }
    StoreRows(g.dk, c.dkd, b, hk, j0, nk, tmp, L.D);
    StoreRows(g.dv, c.dvd, b, hk, j0, nk, w.dv.data(), L.ldv);
  }
}

// Phase 3: dq of query tile t of head h = scale * sum of the chunk partials
// in chunk order (deterministic; with chunks = 1, enough units for the
// threads, the partial is the final sum), rotated back by the inverse rotation for RoPE, stored in
// dq's dtype.
void ReduceQueryTile(const BackwardCall& c, const Layout& L, const TileOps& ops, const UnitView& u,
                     const AttentionGrads& g, Index b, Index h, Index hl, Index t, Scratch& w) {
  const Problem& p = c.p;
  const Index i0 = t * c.bq, nq = std::min(c.bq, L.Sq - i0), row0 = hl * L.Sq + i0;
  float* sum = u.dq + row0 * L.ldd;  // chunk 0's partial accumulates the others
  for (Index ch = 1; ch < L.chunks; ++ch) {
    ops.AddRow(sum, u.dq + (ch * L.G * L.Sq + row0) * L.ldd, nq * L.ldd);
  }
  float* tmp = w.rows.data();
  for (Index i = 0; i < nq; ++i)
    for (Index x = 0; x < L.D; ++x) tmp[i * L.D + x] = p.scale * sum[i * L.ldd + x];
  if (p.rope != nullptr) {
    RotateTile(*p.rope, tmp, nq, L.D, &c.qpos[Z(b * L.Sq + i0)], w.serial, RopeDirection::kInverse);
  }
  StoreRows(g.dq, c.dqd, b, h, i0, nq, tmp, L.D);
}

// Chunk boundaries of the key tiles of batch b: `chunks` runs of about
// equal visible work (query tiles not hidden from the key tile; causal:
// later key tiles see fewer query tiles), so the chunks of one unit take
// about the same time.
std::vector<Index> ChunkBounds(const BackwardCall& c, Index b, Index chunks) {
  std::vector<Index> work(Z(c.k_tiles + 1), 0);
  for (Index ku = 0; ku < c.k_tiles; ++ku) {
    const PositionRange& kr = c.k_ranges[Z(b * c.k_tiles + ku)];
    Index n = 1;  // loading and storing the tile
    for (Index t = 0; t < c.q_tiles; ++t) {
      const PositionRange& qr = c.q_ranges[Z(b * c.q_tiles + t)];
      if (!c.p.TileHidden(qr.min, qr.max, kr.min, kr.max)) n += 4;
    }
    work[Z(ku + 1)] = work[Z(ku)] + n;
  }
  std::vector<Index> bounds{0};
  for (Index ch = 1; ch < chunks; ++ch) {
    const Index target = work.back() * ch / chunks;
    Index ku = bounds.back();
    while (ku < c.k_tiles && work[Z(ku)] < target) ++ku;
    bounds.push_back(ku);
  }
  bounds.push_back(c.k_tiles);
  return bounds;
}

// The tile geometry of a call, its bfloat16 choices and the chunks each
// unit's key tiles are cut into (from the shape only, not the threads).
Layout MakeLayout(const BackwardCall& c, const TensorView& q, const TensorView& k,
                  const TensorView& v, const TensorView& dout, const Context& ctx) {
  const Problem& p = c.p;
  const auto& d = p.dims;
  const bool simd = ctx.backend() != Backend::kScalar;
  const bool bf16_cpu = simd && kernels::simd::FlashBf16DotAvailable();
  Layout L;
  L.D = d.head_dim;
  L.Dv = d.value_dim;
  L.ldd = Pad(L.D);
  L.ldv = Pad(L.Dv);
  L.ldk = Pad(c.bk);
  L.G = d.Group();
  L.Sq = d.query_len;
  L.bf16_qk = bf16_cpu && q.dtype == DType::kBFloat16 && k.dtype == DType::kBFloat16 &&
              (p.rope == nullptr || p.Bf16()) && L.D % 2 == 0;
  L.bf16_products = p.Bf16();
  L.simd = simd;
  L.q_tiles = c.q_tiles;
  L.half_bq = (c.bq + 1) / 2;
  L.bf16_dv =
      bf16_cpu && dout.dtype == DType::kBFloat16 && v.dtype == DType::kBFloat16 && L.Dv % 2 == 0;
  const Index units = d.batch * d.kv_heads;
  // Enough tasks for the threads: when units are few, each unit's key tiles
  // are split into chunks, each with its own dQ partial. The count depends
  // on the shape only (not on the threads), so gradients are bit-identical
  // for any thread count.
  L.chunks = std::clamp<Index>((kMinTasks + units - 1) / units, 1, c.k_tiles);
  return L;
}

}  // namespace

void RunBackward(const BackwardCall& c, const TensorView& q, const TensorView& k,
                 const TensorView& v, const TensorView& out, const TensorView& dout,
                 const AttentionGrads& g, const Context& ctx) {
  const Problem& p = c.p;
  const auto& d = p.dims;
  if (c.q_tiles == 0 || c.k_tiles == 0) return;
  const Layout L = MakeLayout(c, q, k, v, dout, ctx);
  const Index units = d.batch * d.kv_heads, threads = ctx.num_threads();
  // Groups of consecutive units under the pack budget.
  const Index unit_bytes = 4 * L.UnitFloats() + 8 * L.G * L.Sq + 4 * L.UnitPairs();
  const Index per_group = std::max<Index>(1, kPackBudgetBytes / std::max<Index>(unit_bytes, 1));
  const Index group_units = std::min(units, per_group);
  // The calling thread's buffers, kept between calls (ThreadBuffers). The
  // packed units need no zeroing: PackQueryTile writes every float, delta
  // and pair of its rows (padding and dQ partials included) before any
  // other phase reads them.
  ThreadBuffers<BackwardBuffers> lease;
  BackwardBuffers& buffers = lease.get();
  std::vector<float>& floats = buffers.floats;
  std::vector<double>& deltas = buffers.deltas;
  std::vector<std::uint32_t>& pairs = buffers.pairs;
  floats.resize(Z(group_units * L.UnitFloats()));
  deltas.resize(Z(group_units * L.G * L.Sq));
  pairs.resize(Z(group_units * L.UnitPairs()));
  std::vector<Scratch>& scratch = buffers.scratch;
  scratch.resize(Z(threads));
  for (Scratch& w : scratch) Resize(w, c, L, ctx.backend());
  const TileOps ops{L.simd};
  std::vector<std::vector<Index>> bounds;  // per batch
  for (Index b = 0; b < d.batch; ++b) bounds.push_back(ChunkBounds(c, b, L.chunks));
  for (Index first = 0; first < units; first += group_units) {
    const Index n_units = std::min(group_units, units - first);
    auto unit_view = [&](Index local) {
      return ViewOf(L, floats.data() + local * L.UnitFloats(), deltas.data() + local * L.G * L.Sq,
                    pairs.data() + local * L.UnitPairs());
    };
    const Index row_tasks = L.G * c.q_tiles;
    ctx.ParallelFor(n_units * row_tasks, [&](Index task, int worker) {
      const Index local = task / row_tasks, unit = first + local, r = task % row_tasks;
      const Index b = unit / d.kv_heads, hk = unit % d.kv_heads, hl = r / c.q_tiles;
      PackQueryTile(c, L, unit_view(local), q, out, dout, b, hk * L.G + hl, hl, r % c.q_tiles,
                    scratch[Z(worker)]);
    });
    ctx.ParallelFor(n_units * L.chunks, [&](Index task, int worker) {
      const Index local = task / L.chunks, unit = first + local, ch = task % L.chunks;
      const Index b = unit / d.kv_heads, hk = unit % d.kv_heads;
      const std::vector<Index>& bd = bounds[Z(b)];
      KeyChunk(c, L, ops, unit_view(local), k, v, g, b, hk, ch, bd[Z(ch)], bd[Z(ch + 1)],
               scratch[Z(worker)]);
    });
    ctx.ParallelFor(n_units * row_tasks, [&](Index task, int worker) {
      const Index local = task / row_tasks, unit = first + local, r = task % row_tasks;
      const Index b = unit / d.kv_heads, hk = unit % d.kv_heads, hl = r / c.q_tiles;
      ReduceQueryTile(c, L, ops, unit_view(local), g, b, hk * L.G + hl, hl, r % c.q_tiles,
                      scratch[Z(worker)]);
    });
  }
  // The scheme's parameter gradients: per-worker float64 sums, reduced at
  // the end.
  if (c.any_scheme_grad) {
    std::vector<const SchemeGradSums*> parts;
    for (const Scratch& w : scratch) parts.push_back(&w.sums);
    attention_internal::StoreSchemeGrads(*p.scheme, parts, c.scheme_grads);
  }
}

}  // namespace posenc::flash_internal
