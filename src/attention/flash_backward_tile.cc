// The backward's (query tile, key tile) step (FlashAttention-2, Dao 2023,
// Alg. 2, its inner loop): formulas and numerics in flash_backward_tile.h.
#include "attention/flash_backward_tile.h"

#include <algorithm>
#include <cstdint>

#include "kernels/simd/flash.h"

namespace posenc::flash_internal {
namespace {

using attention_internal::SchemeRow;
using Rounding = kernels::simd::FlashRowRounding;

// Bf16Products halves a band's first row into its first query pair.
static_assert(kBandRows % 2 == 0);

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

  // What the steps of one (query tile t, key tile ku) pair share.
  struct Pair {
    Index row0 = 0, nq = 0, nk = 0;  // packed row of the tile's first query; sizes
    const Index *qpos = nullptr, *kpos = nullptr;
    const float *qt = nullptr, *dot = nullptr;  // the tile's packed q and dO rows
    bool all_visible = false, banded = false;
    PositionRange kr;
  };

  void Run(Index t, Index ku, const PositionRange& qr, const PositionRange& kr) {
    const Problem& p = c.p;
    const Index i0 = t * c.bq, ldk = L.ldk;
    Pair pr;
    pr.row0 = hl * L.Sq + i0;
    pr.nq = std::min(c.bq, L.Sq - i0);
    pr.nk = std::min(c.bk, p.dims.key_len - ku * c.bk);
    pr.qpos = &c.qpos[Z(b * L.Sq + i0)];
    pr.kpos = &c.kpos[Z(b * p.dims.key_len + ku * c.bk)];
    pr.qt = u.q + pr.row0 * L.ldd;
    pr.dot = u.dout + pr.row0 * L.ldv;
    pr.all_visible = p.TileVisible(qr.min, qr.max, kr.min, kr.max);
    pr.kr = kr;
    const Index row0 = pr.row0, nq = pr.nq, nk = pr.nk;
    float* s = w.s.data();
    float* dp = w.dp.data();
    const bool values = p.scheme->Has(SchemeTerm::kValue);
    // A causal diagonal tile: each band of rows computes its visible keys only.
    pr.banded = !pr.all_visible && !values &&
                DiagonalBands(p, pr.qpos, nq, qr, pr.kpos, nk, kr, w.band_cols.data(),
                              w.visible_rows.data());
    const Index* bands = pr.banded ? w.band_cols.data() : nullptr;
    if (L.bf16_qk) {
      TileLogitsBf16(u.q_pairs + row0 * L.D / 2, L.D, w.kt_pairs.data(), nq, ldk, bands, s, L.simd);
    } else {
      ops.LogitsBands(pr.qt, L.ldd, w.kt.data(), nq, L.D, ldk, bands, s);
    }
    if (L.bf16_dv) {
      TileLogitsBf16(u.dout_pairs + row0 * L.Dv / 2, L.Dv, w.vt_pairs.data(), nq, ldk, bands, dp,
                     L.simd);
    } else {
      ops.LogitsBands(pr.dot, L.ldv, w.vt.data(), nq, L.Dv, ldk, bands, dp);
    }
    if (w.tile_terms.active()) w.tile_terms.Prepare(h, qr, pr.kpos, nk, kr);
    // Rounded P and dS in place, when nothing reads them unrounded (the
    // scheme's gradients do).
    const bool scheme_reads = c.any_scheme_grad || p.scheme->Has(SchemeTerm::kLogit);
    const bool in_place = L.bf16_products && !L.bf16_pairs && !scheme_reads;
    const auto rounding = in_place ? Rounding::kBFloat16 : Rounding::kNone;
    RowPass(pr, values, rounding);
    float* dq = u.dq + (chunk * L.G * L.Sq + row0) * L.ldd;
    if (L.bf16_pairs) {
      Bf16Products(t, nq, nk, dq, pr.banded);
    } else if (L.bf16_products && !in_place) {  // P and dS as bfloat16 values in float32 copies
      kernels::simd::FlashRoundRowsBf16(s, ldk, nq, ldk, w.p16.data());
      kernels::simd::FlashRoundRowsBf16(dp, ldk, nq, ldk, w.ds16.data());
      Float32Products(w.p16.data(), w.ds16.data(), nq, nk, pr.qt, pr.dot, dq, pr.banded);
    } else {
      Float32Products(s, dp, nq, nk, pr.qt, pr.dot, dq, pr.banded);
    }
    if (scheme_reads) SchemeGrads(row0, nq, nk, pr.qpos, pr.kpos, qr, kr, dq);
  }

  // The row pass of a whole tile in one SIMD call (FlashBackwardTile):
  // every row sees all keys or a prefix of them, and its terms are windows
  // of the distance table (or none), so every row's pointer stays valid.
  // False (nothing done) otherwise.
  bool TilePass(const Pair& pr, bool values, Rounding rounding) {
    const Problem& p = c.p;
    const bool windows = !w.tile_terms.active() || w.tile_terms.WindowsOnly();
    if (!L.simd || values || !windows || !(pr.all_visible || pr.kr.consecutive)) return false;
    const Index nq = pr.nq, nk = pr.nk, row0 = pr.row0;
    kernels::simd::FlashBackwardRows rows;  // null visible, cols, bias: nk, ldk, none
    if (!pr.all_visible) {  // a banded tile's prefixes came with its bands (DiagonalBands)
      if (!pr.banded) {
        for (Index i = 0; i < nq; ++i) {
          const Index prefix = p.VisiblePrefix(pr.qpos[i], pr.kpos[0], nk);
          if (prefix < 0) return false;
          w.visible_rows[Z(i)] = prefix;
        }
      }
      rows.visible = w.visible_rows.data();
    }
    if (pr.banded) {
      for (Index i = 0; i < nq; ++i) w.cols_rows[Z(i)] = w.band_cols[Z(i / kBandRows)];
      rows.cols = w.cols_rows.data();
    }
    for (Index i = 0; i < nq; ++i) w.delta_rows[Z(i)] = static_cast<float>(u.delta[row0 + i]);
    if (w.tile_terms.active()) {
      for (Index i = 0; i < nq; ++i) w.bias_rows[Z(i)] = w.tile_terms.Window(pr.qpos[i]);
      rows.bias = w.bias_rows.data();
    }
    rows.rounding = rounding;
    rows.exp = p.Exp();
    kernels::simd::FlashBackwardTile(w.s.data(), w.dp.data(), L.ldk, nq, nk, p.scale, u.lse + row0,
                                     w.delta_rows.data(), rows);
    return true;
  }

  // The row pass (P and dS into w.s and w.dp): the whole tile at once
  // (TilePass) where it can, else row by row.
  void RowPass(const Pair& pr, bool values, Rounding rounding) {
    if (TilePass(pr, values, rounding)) return;
    const Problem& p = c.p;
    const Index ldk = L.ldk, nk = pr.nk, row0 = pr.row0;
    const Index *qpos = pr.qpos, *kpos = pr.kpos;
    for (Index i = 0; i < pr.nq; ++i) {
      float* srow = w.s.data() + i * ldk;
      float* dprow = w.dp.data() + i * ldk;
      const float lse = u.lse[row0 + i];
      if (lse == kNegInf) {  // the query sees no key: P = dS = 0
        std::fill(srow, srow + ldk, 0.0f);
        std::fill(dprow, dprow + ldk, 0.0f);
        continue;
      }
      const float* bias = nullptr;
      if (w.tile_terms.active()) {
        bias = w.tile_terms.Row(qpos[i], pr.qt + i * L.ldd, p.scale, w.bias.data());
      }
      // A causal diagonal tile: row i sees a prefix of the keys, masked by length.
      const Index prefix =
          pr.all_visible || !pr.kr.consecutive ? -1 : p.VisiblePrefix(qpos[i], kpos[0], nk);
      if (!pr.all_visible && prefix < 0) {
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
        p.scheme->ValueGradRow(RowOf(row0, i, qpos, kpos, nk), pr.dot + i * L.ldv, delta, dprow);
        delta = 0.0;
      }
      // A band's keys past its columns: P = dS = 0, as the row pass would write.
      const Index cols = pr.banded ? w.band_cols[Z(i / kBandRows)] : ldk;
      ops.BackwardRow(srow, dprow, prefix >= 0 ? prefix : nk, cols, p.scale, bias, lse,
                      static_cast<float>(delta), rounding, p.Exp());
      std::fill(srow + cols, srow + ldk, 0.0f);
      std::fill(dprow + cols, dprow + ldk, 0.0f);
    }
  }

  // The blocks of the transposed products (dV += P^T dO, dK += dS^T Q):
  // f(j0, n, i0) for keys [j0, j0 + n) and their first query row i0. A
  // banded tile gives blocks of kBandRows keys, each starting at the first
  // band that sees them (the rows above see none); otherwise one block.
  template <class F>
  void KeyBlocks(Index nq, Index nk, bool banded, F&& f) const {
    const Index step = banded ? kBandRows : nk;
    for (Index j0 = 0, b0 = 0; j0 < nk; j0 += step) {
      while (banded && b0 * kBandRows < nq && w.band_cols[Z(b0)] <= j0) ++b0;
      if (b0 * kBandRows >= nq) break;
      f(j0, std::min(step, nk - j0), b0 * kBandRows);
    }
  }

  // The row blocks of dQ += dS K: f(i0, n, cols) for query rows [i0, i0 +
  // n) over keys [0, cols): each band to its columns, otherwise one block.
  template <class F>
  void RowBlocks(Index nq, Index nk, bool banded, F&& f) const {
    for (Index i0 = 0; i0 < nq; i0 += banded ? kBandRows : nq) {
      f(i0, banded ? std::min(kBandRows, nq - i0) : nq,
        banded ? std::min(nk, w.band_cols[Z(i0 / kBandRows)]) : nk);
    }
  }

  // dV += P^T dO, dK += dS^T Q, dQ += dS K (float32 kernels; P, dS [nq,
  // ldk]), skipping a banded tile's masked products (KeyBlocks, RowBlocks).
  void Float32Products(const float* p, const float* ds, Index nq, Index nk, const float* qt,
                       const float* dot, float* dq, bool banded) {
    const Index ldk = L.ldk;
    KeyBlocks(nq, nk, banded, [&](Index j0, Index n, Index i0) {
      ops.PTV(p + i0 * ldk + j0, ldk, dot + i0 * L.ldv, nq - i0, n, L.ldv,
              w.dv.data() + j0 * L.ldv);
      ops.PTV(ds + i0 * ldk + j0, ldk, qt + i0 * L.ldd, nq - i0, n, L.ldd,
              w.dk.data() + j0 * L.ldd);
    });
    RowBlocks(nq, nk, banded, [&](Index i0, Index n, Index cols) {
      ops.PV(ds + i0 * ldk, ldk, w.krows.data(), n, cols, L.ldd, dq + i0 * L.ldd);
    });
  }

  // The same products with P and dS rounded to bfloat16 against the
  // bfloat16 pairs of dO, Q and K (float32 sums), over the same blocks (a
  // band starts at an even row: i0 / 2 is its first query pair).
  void Bf16Products(Index t, Index nq, Index nk, float* dq, bool banded) {
    const Index ldk = L.ldk, pairs_q = (nq + 1) / 2;
    using kernels::simd::FlashMatMulBf16;
    using kernels::simd::FlashPackPairsB;
    FlashPackPairsB(w.s.data(), ldk, nq, nk, w.pt_a.data(), ldk, L.simd);
    FlashPackPairsB(w.dp.data(), ldk, nq, nk, w.dst_a.data(), ldk, L.simd);
    kernels::simd::FlashPackPairsRows(w.dp.data(), ldk, nq, nk, w.ds_a.data(), ldk / 2, L.simd);
    const auto* pt = reinterpret_cast<const std::uint32_t*>(w.pt_a.data());
    const auto* dst = reinterpret_cast<const std::uint32_t*>(w.dst_a.data());
    const float* ones = w.ones.data();
    KeyBlocks(nq, nk, banded, [&](Index j0, Index n, Index i0) {
      const Index t0 = i0 / 2;
      FlashMatMulBf16(pt + j0 + t0 * ldk, 1, ldk, n, u.DoutB(L, hl, t) + t0 * 2 * L.ldv,
                      pairs_q - t0, L.ldv, L.ldv, ones, w.dv.data() + j0 * L.ldv, L.ldv, L.simd);
      FlashMatMulBf16(dst + j0 + t0 * ldk, 1, ldk, n, u.QB(L, hl, t) + t0 * 2 * L.ldd, pairs_q - t0,
                      L.ldd, L.ldd, ones, w.dk.data() + j0 * L.ldd, L.ldd, L.simd);
    });
    RowBlocks(nq, nk, banded, [&](Index i0, Index n, Index cols) {
      FlashMatMulBf16(w.ds_a.data() + i0 * (ldk / 2), ldk / 2, 1, n, w.k_b.data(), (cols + 1) / 2,
                      L.ldd, L.ldd, ones, dq + i0 * L.ldd, L.ldd, L.simd);
    });
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

}  // namespace

void RunTilePair(const BackwardCall& c, const Layout& L, const TileOps& ops, const UnitView& u,
                 Scratch& w, const TileTask& task, Index t, Index ku, const PositionRange& qr,
                 const PositionRange& kr) {
  PairWork pair{c, L, ops, u, w, task.b, task.h, task.hl, task.chunk};
  pair.Run(t, ku, qr, kr);
}

}  // namespace posenc::flash_internal
