// Backward of the fused (flash) attention (include/posenc/flash_attention.h,
// FlashAttentionBackward).
//
// Formula (logit_ij = scale * q_i . k_j + T_ij, the forward's contract, with
// T_ij the scheme's terms: bias b_h(p, r) + scale * c(q_i, p, r); value
// terms a_ij added to the output):
//   P_ij  = exp(logit_ij - lse_i)                 (recomputed per tile)
//   D_i   = dO_i . O_i                            (= sum_j P_ij dP_ij)
//   dP_ij = dO_i . (v_j + a_ij)
//   dS_ij = P_ij (dP_ij - D_i)                    (d logit_ij)
//   dv_j  += P_ij dO_i;   dk_j += scale dS_ij q_i;
//   dq_i  += scale sum_j dS_ij (k_j + dc/dq)
// The scheme (attention/scheme_policy.h) supplies T_ij (TileTerms, the same
// code as the forward), its value terms' dO_i . a_ij - D_i, and the
// gradients of its parameters from dS and P (BackwardRow; for a bias that
// depends on r - p only, dS is first summed per distance of the tile and
// DistanceGrad runs once per distance). RoPE: q and k are rotated copies,
// so dq and dk are rotated back with R(-p) (ApplyRope kInverse); with
// pre-rotated keys dk stays as is.
// Paper: FlashAttention-2 (Dao 2023, "FlashAttention-2: Faster Attention with
// Better Parallelism and Work Partitioning", Alg. 2), backward by
// recomputation from the row log-sum-exp. Matches the float64 oracle
// AttentionReferenceBackward (src/attention/reference.cc): same shapes,
// overwrite rules and table gradients.
// Work split (race-free, no atomics): pass A, tasks over (batch, kv head,
// key tile), each looping the GQA group's query heads and the visible query
// tiles, produces dk and dv of its key rows; pass B, tasks over (batch,
// head, query tile) looping the visible key tiles, produces dq and the
// scheme's parameter gradients (per-worker float64 sums, reduced at the end). When no
// lse is given, pass 0 recomputes it (a forward without the output).
// Tiles hidden by the causal mask or the window are skipped (tile min/max
// positions, exact for arbitrary positions).
// Memory: per worker O((Bq + Bk) * (D + Dv) + Bq * Bk) floats; per call at
// most B * H * Sq floats (a recomputed lse); never an [Sq, Sk] array.
// Numerics: float32 tiles, dot products and accumulation through the
// forward's tile kernels (q . k^T, dO . v^T, P^T dO, dS^T q, dS k: Highway,
// or plain loops for Backend::kScalar); D_i in float64 from out (so out's
// dtype bounds its precision); a value term's dO . a_ij - D_i is rounded
// once (the scheme combines it in float64); every gradient is rounded once
// to its dtype. Error against the
// float64 reference within 2x a plain float32 backward's error (tested in
// tests/unit/flash_backward_test.cc). Positions [0, 2^24).
// Inputs are validated at the boundary (FlashAttentionBackward); the pass
// functions assume validated shapes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention/flash_internal.h"
#include "attention/scheme_policy.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"

namespace posenc {
namespace {

using attention_internal::CheckAttentionTensor;
using attention_internal::SchemeGradSums;
using attention_internal::SchemeRow;
using flash_internal::CheckLse;
using flash_internal::kNegInf;
using flash_internal::LoadRows;
using flash_internal::Pad;
using flash_internal::PositionRange;
using flash_internal::Problem;
using flash_internal::RotateTile;
using flash_internal::TileOps;
using flash_internal::TileTerms;
using Index = std::int64_t;

std::size_t Z(Index i) { return static_cast<std::size_t>(i); }

// One validated backward call.
struct BackwardCall {
  Problem p;
  AttentionDims od{}, dod{}, dqd{}, dkd{}, dvd{};
  TensorView lse;  // float32 [B, H, Sq]: given, or the recomputed buffer
  std::vector<TensorView> scheme_grads;  // per trainable tensor (null data: not requested)
  bool any_scheme_grad = false;
  Index bq = 1, bk = 1, q_tiles = 1, k_tiles = 1;
  std::vector<PositionRange> q_ranges, k_ranges;  // per (batch, tile)
};

// Per-worker buffers. Widths: ldq = Pad(Bq), ldk = Pad(Bk), ldd = Pad(D),
// ldv = Pad(Dv); padding columns stay zero (kt, vt, qpad, kpad, dOpad).
struct Scratch {
  std::vector<float> q, qpad, dout, dout_pad, k, kt, kpad, vt, s, ds, pt, dst;
  std::vector<float> dk, dv, dq, lse, m, l, row, terms;
  std::vector<double> delta;  // D_i = dO_i . O_i
  std::vector<double> by_distance;  // dS summed per distance of a tile
  std::vector<Index> qpos, kpos;
  TileTerms tile_terms;
  SchemeGradSums sums;
  Context serial{1};
};

void Resize(Scratch& w, const BackwardCall& c, Index D, Index Dv, Backend backend) {
  const Index bq = c.bq, bk = c.bk, ldq = Pad(bq), ldk = Pad(bk), ldd = Pad(D), ldv = Pad(Dv);
  w.q.assign(Z(bq * D), 0.0f);
  w.qpad.assign(Z(bq * ldd), 0.0f);
  w.dout.assign(Z(bq * Dv), 0.0f);
  w.dout_pad.assign(Z(bq * ldv), 0.0f);
  w.k.assign(Z(std::max(bk, bq) * std::max(D, Dv)), 0.0f);
  w.kt.assign(Z(D * ldk), 0.0f);
  w.kpad.assign(Z(bk * ldd), 0.0f);
  w.vt.assign(Z(Dv * ldk), 0.0f);
  w.s.assign(Z(bq * ldk), 0.0f);
  w.ds.assign(Z(bq * ldk), 0.0f);
  w.pt.assign(Z(bk * ldq), 0.0f);
  w.dst.assign(Z(bk * ldq), 0.0f);
  w.dk.assign(Z(bk * ldd), 0.0f);
  w.dv.assign(Z(bk * ldv), 0.0f);
  w.dq.assign(Z(bq * ldd), 0.0f);
  w.row.assign(Z(std::max(Dv, D)), 0.0f);
  w.terms.assign(Z(ldk), 0.0f);
  for (auto* v : {&w.lse, &w.m, &w.l}) v->assign(Z(bq), 0.0f);
  w.delta.assign(Z(bq), 0.0);
  w.by_distance.assign(Z(4 * (bq + bk)), 0.0);
  w.qpos.assign(Z(bq), 0);
  w.kpos.assign(Z(bk), 0);
  w.serial = Context(1, backend);
  w.tile_terms.Reset(*c.p.scheme, 4 * (bq + bk), ldk);
  w.sums = c.p.scheme->NewGradSums();
}

// Stores n float32 rows (stride ld) into rows [s0, s0 + n) of head h of batch b.
void StoreRows(const TensorView& view, const AttentionDims& ad, Index b, Index h, Index s0, Index n,
               const float* src, Index ld) {
  for (Index s = 0; s < n; ++s) {
    const Index base = b * ad.stride_batch + h * ad.stride_head + (s0 + s) * ad.stride_seq;
    const float* row = src + s * ld;
    if (view.dtype == DType::kFloat32) {
      float* dst = view.As<float>() + base;
      for (Index x = 0; x < ad.head_dim; ++x) dst[x * ad.stride_dim] = row[x];
    } else {
      for (Index x = 0; x < ad.head_dim; ++x) {
        StoreFromDouble(view.data, view.dtype, base + x * ad.stride_dim,
                        static_cast<double>(row[x]));
      }
    }
  }
}

float LseAt(const TensorView& lse, Index b, Index h, Index i) {
  return lse.As<const float>()[b * lse.strides[0] + h * lse.strides[1] + i * lse.strides[2]];
}

// Query tile [i0, i0 + nq) of head h: q (rotated for RoPE) as [nq, D] and
// padded [nq, ldd], positions; with `grads`, also dO ([nq, Dv] and padded),
// lse and D_i = dO_i . O_i.
void LoadQueryTile(const BackwardCall& c, const TensorView& q, const TensorView& out,
                   const TensorView& dout, Index b, Index h, Index i0, Index nq, bool grads,
                   Scratch& w) {
  const Problem& p = c.p;
  const Index D = p.dims.head_dim, Dv = p.dims.value_dim, ldd = Pad(D), ldv = Pad(Dv);
  LoadRows(q, p.qd, b, h, i0, nq, w.q.data(), D);
  for (Index i = 0; i < nq; ++i) w.qpos[Z(i)] = p.query_positions.At(b, i0 + i, p.dims.query_len);
  if (p.rope != nullptr) RotateTile(*p.rope, w.q.data(), nq, D, w.qpos.data(), w.serial);
  if (!grads) return;
  for (Index i = 0; i < nq; ++i) std::copy_n(&w.q[Z(i * D)], D, &w.qpad[Z(i * ldd)]);
  LoadRows(dout, c.dod, b, h, i0, nq, w.dout.data(), Dv);
  for (Index i = 0; i < nq; ++i) {
    std::copy_n(&w.dout[Z(i * Dv)], Dv, &w.dout_pad[Z(i * ldv)]);
    LoadRows(out, c.od, b, h, i0 + i, 1, w.row.data(), Dv);
    double dot = 0.0;
    for (Index x = 0; x < Dv; ++x) dot += static_cast<double>(w.dout[Z(i * Dv + x)]) * w.row[Z(x)];
    w.delta[Z(i)] = dot;
    w.lse[Z(i)] = LseAt(c.lse, b, h, i0 + i);
  }
}

// Key tile [j0, j0 + nk) of kv head hk: k (rotated unless pre-rotated) as
// kt [D, ldk] and kpad [nk, ldd]; with `values`, v as vt [Dv, ldk].
void LoadKeyTile(const BackwardCall& c, const TensorView& k, const TensorView& v, Index b,
                 Index hk, Index j0, Index nk, bool values, Scratch& w) {
  const Problem& p = c.p;
  const Index D = p.dims.head_dim, Dv = p.dims.value_dim, ldk = Pad(c.bk), ldd = Pad(D);
  for (Index j = 0; j < nk; ++j) w.kpos[Z(j)] = p.key_positions.At(b, j0 + j, p.dims.key_len);
  LoadRows(k, p.kd, b, hk, j0, nk, w.k.data(), D);
  if (p.rotate_keys) RotateTile(*p.rope, w.k.data(), nk, D, w.kpos.data(), w.serial);
  flash_internal::TransposeTile(w.k.data(), nk, D, D, w.kt.data(), ldk);
  for (Index j = 0; j < nk; ++j) std::copy_n(&w.k[Z(j * D)], D, &w.kpad[Z(j * ldd)]);
  if (!values) return;
  LoadRows(v, p.vd, b, hk, j0, nk, w.k.data(), Dv);
  flash_internal::TransposeTile(w.k.data(), nk, Dv, Dv, w.vt.data(), ldk);
}

// A query row of the loaded tiles, for the scheme's row functions.
SchemeRow<float> RowOf(const Scratch& w, Index h, Index i, Index D, Index nk) {
  SchemeRow<float> r;
  r.head = h;
  r.qpos = w.qpos[Z(i)];
  r.q = w.q.data() + i * D;
  r.kpos = w.kpos.data();
  r.nk = nk;
  return r;
}

// The logits of the loaded tiles into w.s ([nq, ldk]): scale * q . k plus
// the scheme's terms (TileTerms, the forward's code), the mask (-inf),
// -inf padding columns.
void TileLogits(const BackwardCall& c, const TileOps& ops, Index h, Index nq, Index nk,
                const PositionRange& queries, const PositionRange& keys, bool all_visible,
                Scratch& w) {
  const Problem& p = c.p;
  const Index D = p.dims.head_dim, ldk = Pad(c.bk);
  float* s = w.s.data();
  ops.Logits(w.q.data(), w.kt.data(), nq, D, ldk, s);
  const bool terms = w.tile_terms.active();
  if (terms) w.tile_terms.Prepare(h, queries, w.kpos.data(), nk, keys);
  for (Index i = 0; i < nq; ++i) {
    float* row = s + i * ldk;
    const Index qp = w.qpos[Z(i)];
    if (terms) {
      const float* t = w.tile_terms.Row(qp, w.q.data() + i * D, p.scale, w.terms.data());
      for (Index j = 0; j < nk; ++j) row[j] = row[j] * p.scale + t[j];
    } else {
      for (Index j = 0; j < nk; ++j) row[j] *= p.scale;
    }
    if (!all_visible) {
      for (Index j = 0; j < nk; ++j) {
        if (!p.Visible(qp, w.kpos[Z(j)])) row[j] = kNegInf;
      }
    }
    std::fill(row + nk, row + ldk, kNegInf);
  }
}

// From the logits in w.s: P in w.s and dS = P (dP - D) in w.ds, [nq, ldk]
// (zero where masked and in the padding).
void ProbsAndDs(const BackwardCall& c, const TileOps& ops, Index h, Index nq, Index nk,
                Scratch& w) {
  const Problem& p = c.p;
  const Index D = p.dims.head_dim, Dv = p.dims.value_dim, ldk = Pad(c.bk);
  for (Index i = 0; i < nq; ++i) {
    float* row = w.s.data() + i * ldk;
    const float lse = w.lse[Z(i)];
    if (lse == kNegInf) {
      std::fill(row, row + ldk, 0.0f);
    } else {
      ops.ExpRow(row, ldk, lse);
    }
  }
  ops.Logits(w.dout.data(), w.vt.data(), nq, Dv, ldk, w.ds.data());
  const bool values = p.scheme->Has(SchemeTerm::kValue);
  for (Index i = 0; i < nq; ++i) {
    const float* prow = w.s.data() + i * ldk;
    float* drow = w.ds.data() + i * ldk;
    if (!values) {
      const auto delta = static_cast<float>(w.delta[Z(i)]);
      for (Index j = 0; j < ldk; ++j) drow[j] = prow[j] * (drow[j] - delta);
      continue;
    }
    // dP_ij = dO_i . v_j + (dO_i . a_ij - D_i), the scheme's part rounded once.
    p.scheme->ValueGradRow(RowOf(w, h, i, D, nk), w.dout.data() + i * Dv, w.delta[Z(i)], drow);
    for (Index j = 0; j < nk; ++j) drow[j] *= prow[j];
    std::fill(drow + nk, drow + ldk, 0.0f);
  }
}

// The scheme's parameter gradients and content dq terms of the tile's rows
// (dq unscaled, like dS k). A bias that depends on r - p only gets dS summed
// per distance of the tile first.
void SchemeTileGrads(const BackwardCall& c, Index h, Index nq, Index nk,
                     const PositionRange& queries, Scratch& w) {
  const Problem& p = c.p;
  const auto& scheme = *p.scheme;
  const Index D = p.dims.head_dim, Dv = p.dims.value_dim, ldk = Pad(c.bk), ldd = Pad(D);
  if (w.tile_terms.tabulated() && !scheme.Has(SchemeTerm::kLogit) &&
      !scheme.Has(SchemeTerm::kValue)) {
    const Index lo = w.tile_terms.table_lo(), n = w.tile_terms.table_size();
    for (Index i = 0; i < nq; ++i)
      for (Index j = 0; j < nk; ++j) {
        const float g = w.ds[Z(i * ldk + j)];
        if (g != 0.0f) w.by_distance[Z(w.kpos[Z(j)] - w.qpos[Z(i)] - lo)] += g;
      }
    scheme.DistanceGrad(h, queries.min, lo, n, w.by_distance.data(), w.sums);
    std::fill(w.by_distance.begin(), w.by_distance.begin() + n, 0.0);
    return;
  }
  for (Index i = 0; i < nq; ++i) {
    scheme.BackwardRow(RowOf(w, h, i, D, nk), w.s.data() + i * ldk, w.ds.data() + i * ldk,
                       w.dout.data() + i * Dv, p.scale, w.dq.data() + i * ldd, nullptr, w.sums);
  }
}

// Pass 0: lse of query tile [i0, i0 + nq) of head h (online max and sum
// over the visible key tiles, as in the forward), into c.lse.
void LseTile(const BackwardCall& c, const TileOps& ops, const TensorView& q, const TensorView& k,
             Index b, Index h, Index t, Scratch& w) {
  const Problem& p = c.p;
  const auto& d = p.dims;
  const Index i0 = t * c.bq, nq = std::min(c.bq, d.query_len - i0), ldk = Pad(c.bk);
  LoadQueryTile(c, q, q, q, b, h, i0, nq, /*grads=*/false, w);
  std::fill(w.m.begin(), w.m.end(), kNegInf);
  std::fill(w.l.begin(), w.l.end(), 0.0f);
  const PositionRange& qr = c.q_ranges[Z(b * c.q_tiles + t)];
  for (Index u = 0; u < c.k_tiles; ++u) {
    const PositionRange& kr = c.k_ranges[Z(b * c.k_tiles + u)];
    const Index j0 = u * c.bk, nk = std::min(c.bk, d.key_len - j0);
    if (p.TileHidden(qr.min, qr.max, kr.min, kr.max)) continue;
    LoadKeyTile(c, k, k, b, h / d.Group(), j0, nk, /*values=*/false, w);
    TileLogits(c, ops, h, nq, nk, qr, kr, p.TileVisible(qr.min, qr.max, kr.min, kr.max), w);
    for (Index i = 0; i < nq; ++i) {
      float* row = w.s.data() + i * ldk;
      const float row_max = *std::max_element(row, row + nk);
      if (row_max == kNegInf) continue;
      float& m = w.m[Z(i)];
      const float m_new = std::max(m, row_max);
      w.l[Z(i)] = w.l[Z(i)] * std::exp(m - m_new) + ops.ExpRow(row, ldk, m_new);
      m = m_new;
    }
  }
  float* lse = c.lse.As<float>();
  for (Index i = 0; i < nq; ++i) {
    const float l = w.l[Z(i)];
    lse[b * c.lse.strides[0] + h * c.lse.strides[1] + (i0 + i) * c.lse.strides[2]] =
        l > 0.0f ? w.m[Z(i)] + std::log(l) : kNegInf;
  }
}

// Pass A: dk and dv of key tile u of kv head hk (all query heads of its
// group, all visible query tiles).
void KeyTileGrads(const BackwardCall& c, const TileOps& ops, const TensorView& q,
                  const TensorView& k, const TensorView& v, const TensorView& out,
                  const TensorView& dout, const AttentionGrads& g, Index b, Index hk, Index u,
                  Scratch& w) {
  const Problem& p = c.p;
  const auto& d = p.dims;
  const Index D = d.head_dim, Dv = d.value_dim, ldk = Pad(c.bk), ldq = Pad(c.bq);
  const Index ldd = Pad(D), ldv = Pad(Dv);
  const Index j0 = u * c.bk, nk = std::min(c.bk, d.key_len - j0);
  const PositionRange& kr = c.k_ranges[Z(b * c.k_tiles + u)];
  LoadKeyTile(c, k, v, b, hk, j0, nk, /*values=*/true, w);
  std::fill(w.dk.begin(), w.dk.end(), 0.0f);
  std::fill(w.dv.begin(), w.dv.end(), 0.0f);
  for (Index h = hk * d.Group(); h < (hk + 1) * d.Group(); ++h) {
    for (Index t = 0; t < c.q_tiles; ++t) {
      const PositionRange& qr = c.q_ranges[Z(b * c.q_tiles + t)];
      const Index i0 = t * c.bq, nq = std::min(c.bq, d.query_len - i0);
      if (p.TileHidden(qr.min, qr.max, kr.min, kr.max)) continue;
      LoadQueryTile(c, q, out, dout, b, h, i0, nq, /*grads=*/true, w);
      TileLogits(c, ops, h, nq, nk, qr, kr, p.TileVisible(qr.min, qr.max, kr.min, kr.max), w);
      ProbsAndDs(c, ops, h, nq, nk, w);
      for (Index i = 0; i < nq; ++i)
        for (Index j = 0; j < nk; ++j) {
          w.pt[Z(j * ldq + i)] = w.s[Z(i * ldk + j)];
          w.dst[Z(j * ldq + i)] = w.ds[Z(i * ldk + j)];
        }
      ops.PV(w.pt.data(), ldq, w.dout_pad.data(), nk, nq, ldv, w.dv.data());  // dv += P^T dO
      ops.PV(w.dst.data(), ldq, w.qpad.data(), nk, nq, ldd, w.dk.data());     // dk += dS^T q
    }
  }
  // dk = scale * acc, rotated back to the unrotated keys' frame.
  for (Index j = 0; j < nk; ++j)
    for (Index x = 0; x < D; ++x) w.k[Z(j * D + x)] = p.scale * w.dk[Z(j * ldd + x)];
  if (p.rotate_keys) {
    RotateTile(*p.rope, w.k.data(), nk, D, w.kpos.data(), w.serial, RopeDirection::kInverse);
  }
  StoreRows(g.dk, c.dkd, b, hk, j0, nk, w.k.data(), D);
  StoreRows(g.dv, c.dvd, b, hk, j0, nk, w.dv.data(), ldv);
}

// Pass B: dq of query tile t of head h, plus the scheme's parameter
// gradients of its pairs.
void QueryTileGrads(const BackwardCall& c, const TileOps& ops, const TensorView& q,
                    const TensorView& k, const TensorView& v, const TensorView& out,
                    const TensorView& dout, const AttentionGrads& g, Index b, Index h, Index t,
                    Scratch& w) {
  const Problem& p = c.p;
  const auto& d = p.dims;
  const Index D = d.head_dim, ldk = Pad(c.bk), ldd = Pad(D);
  const Index i0 = t * c.bq, nq = std::min(c.bq, d.query_len - i0);
  const PositionRange& qr = c.q_ranges[Z(b * c.q_tiles + t)];
  const bool scheme_terms = c.any_scheme_grad || p.scheme->Has(SchemeTerm::kLogit);
  LoadQueryTile(c, q, out, dout, b, h, i0, nq, /*grads=*/true, w);
  std::fill(w.dq.begin(), w.dq.end(), 0.0f);
  for (Index u = 0; u < c.k_tiles; ++u) {
    const PositionRange& kr = c.k_ranges[Z(b * c.k_tiles + u)];
    const Index j0 = u * c.bk, nk = std::min(c.bk, d.key_len - j0);
    if (p.TileHidden(qr.min, qr.max, kr.min, kr.max)) continue;
    LoadKeyTile(c, k, v, b, h / d.Group(), j0, nk, /*values=*/true, w);
    TileLogits(c, ops, h, nq, nk, qr, kr, p.TileVisible(qr.min, qr.max, kr.min, kr.max), w);
    ProbsAndDs(c, ops, h, nq, nk, w);
    ops.PV(w.ds.data(), ldk, w.kpad.data(), nq, nk, ldd, w.dq.data());  // dq += dS k
    if (scheme_terms) SchemeTileGrads(c, h, nq, nk, qr, w);
  }
  for (Index i = 0; i < nq; ++i)
    for (Index x = 0; x < D; ++x) w.k[Z(i * D + x)] = p.scale * w.dq[Z(i * ldd + x)];
  if (p.rope != nullptr) {
    RotateTile(*p.rope, w.k.data(), nq, D, w.qpos.data(), w.serial, RopeDirection::kInverse);
  }
  StoreRows(g.dq, c.dqd, b, h, i0, nq, w.k.data(), D);
}

// Min and max positions of every (batch, tile).
std::vector<PositionRange> TileRanges(const Positions& pos, Index batch, Index len, Index tile) {
  const Index tiles = (len + tile - 1) / tile;
  std::vector<PositionRange> ranges;
  std::vector<Index> ids(Z(tile));
  for (Index b = 0; b < batch; ++b)
    for (Index t = 0; t < tiles; ++t) {
      const Index n = std::min(tile, len - t * tile);
      for (Index s = 0; s < n; ++s) ids[Z(s)] = pos.At(b, t * tile + s, len);
      ranges.push_back(flash_internal::RangeOf(ids.data(), n));
    }
  return ranges;
}

BackwardCall Validate(const AttentionParams& params, const TensorView& q, const TensorView& k,
                      const TensorView& v, const TensorView& out, const TensorView& dout,
                      const TensorView& lse, const AttentionGrads& g,
                      const FlashAttentionOptions& options) {
  BackwardCall c;
  c.p = flash_internal::SetupInputs(params, q, k, v, options);
  const auto& d = c.p.dims;
  const AttentionLayout L = params.layout;
  c.od = CheckAttentionTensor(out, L, "out", d.batch, d.query_len, d.heads, d.value_dim, false);
  c.dod = CheckAttentionTensor(dout, L, "dout", d.batch, d.query_len, d.heads, d.value_dim, false);
  c.dqd = CheckAttentionTensor(g.dq, L, "grads.dq", d.batch, d.query_len, d.heads, d.head_dim, true);
  c.dkd = CheckAttentionTensor(g.dk, L, "grads.dk", d.batch, d.key_len, d.kv_heads, d.head_dim, true);
  c.dvd = CheckAttentionTensor(g.dv, L, "grads.dv", d.batch, d.key_len, d.kv_heads, d.value_dim, true);
  std::vector<std::pair<TensorView, std::string>> inputs = {
      {q, "q"}, {k, "k"}, {v, "v"}, {out, "out"}, {dout, "dout"}};
  if (lse.data != nullptr) {
    CheckLse(lse, d, "lse", /*writable=*/false);
    for (Index b = 0; b < d.batch; ++b)
      for (Index h = 0; h < d.heads; ++h)
        for (Index i = 0; i < d.query_len; ++i) {
          const float x = LseAt(lse, b, h, i);
          Require(std::isfinite(x) || x == kNegInf,
                  "lse[" + std::to_string(b) + ", " + std::to_string(h) + ", " + std::to_string(i) +
                      "]",
                  x, "a finite log-sum-exp, or -inf for a query that sees no key");
        }
    inputs.emplace_back(lse, "lse");
  }
  std::vector<std::pair<TensorView, std::string>> outputs = {
      {g.dq, "grads.dq"}, {g.dk, "grads.dk"}, {g.dv, "grads.dv"}};
  // The scheme's tensors are inputs; their requested gradients are outputs.
  const SchemeArgs args = params.scheme.kind == PositionScheme::Kind::kRegistered
                              ? params.scheme.args
                              : attention_internal::TypedSchemeArgs(params.scheme);
  for (const auto& [name, value] : args.entries()) {
    if (value.type == SchemeArgType::kTensor && value.tensor.data != nullptr) {
      inputs.emplace_back(value.tensor, "scheme." + name);
    }
  }
  std::vector<std::string> labels;
  c.scheme_grads = attention_internal::CheckSchemeGrads(*c.p.scheme, g, &labels);
  for (std::size_t i = 0; i < c.scheme_grads.size(); ++i) {
    if (c.scheme_grads[i].data == nullptr) continue;
    outputs.emplace_back(c.scheme_grads[i], labels[i]);
    c.any_scheme_grad = true;
  }
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    for (const auto& [view, name] : inputs) {
      RequireNoOverlap(outputs[o].first, outputs[o].second, view, name, /*inplace_allowed=*/false);
    }
    for (std::size_t o2 = 0; o2 < o; ++o2) {
      RequireNoOverlap(outputs[o].first, outputs[o].second, outputs[o2].first, outputs[o2].second,
                       /*inplace_allowed=*/false);
    }
  }
  c.bq = std::min(options.query_tile, d.query_len);
  c.bk = std::min(options.key_tile, d.key_len);
  c.q_tiles = (d.query_len + c.bq - 1) / c.bq;
  c.k_tiles = (d.key_len + c.bk - 1) / c.bk;
  c.q_ranges = TileRanges(c.p.query_positions, d.batch, d.query_len, c.bq);
  c.k_ranges = TileRanges(c.p.key_positions, d.batch, d.key_len, c.bk);
  c.lse = lse;
  return c;
}

}  // namespace

void FlashAttentionBackward(const AttentionParams& params, const TensorView& q, const TensorView& k,
                            const TensorView& v, const TensorView& out, const TensorView& dout,
                            const TensorView& lse, const AttentionGrads& grads,
                            const FlashAttentionOptions& options, const Context& ctx) {
  BackwardCall c = Validate(params, q, k, v, out, dout, lse, grads, options);
  const auto& d = c.p.dims;
  const TileOps ops{ctx.backend() != Backend::kScalar};
  std::vector<Scratch> scratch(static_cast<std::size_t>(ctx.num_threads()));
  for (Scratch& w : scratch) Resize(w, c, d.head_dim, d.value_dim, ctx.backend());
  std::vector<float> lse_buffer;
  if (c.lse.data == nullptr) {  // pass 0: recompute the log-sum-exp
    lse_buffer.assign(Z(d.batch * d.heads * d.query_len), kNegInf);
    c.lse =
        TensorView::Contiguous(lse_buffer.data(), DType::kFloat32, {d.batch, d.heads, d.query_len});
    ctx.ParallelFor(d.batch * d.heads * c.q_tiles, [&](Index task, int worker) {
      const Index t = task % c.q_tiles, bh = task / c.q_tiles;
      LseTile(c, ops, q, k, bh / d.heads, bh % d.heads, t, scratch[Z(worker)]);
    });
  }
  ctx.ParallelFor(d.batch * d.kv_heads * c.k_tiles, [&](Index task, int worker) {
    const Index u = task % c.k_tiles, bh = task / c.k_tiles;
    KeyTileGrads(c, ops, q, k, v, out, dout, grads, bh / d.kv_heads, bh % d.kv_heads, u,
                 scratch[Z(worker)]);
  });
  ctx.ParallelFor(d.batch * d.heads * c.q_tiles, [&](Index task, int worker) {
    const Index t = task % c.q_tiles, bh = task / c.q_tiles;
    QueryTileGrads(c, ops, q, k, v, out, dout, grads, bh / d.heads, bh % d.heads, t,
                   scratch[Z(worker)]);
  });
  if (c.any_scheme_grad) {
    std::vector<const SchemeGradSums*> parts;
    for (const Scratch& w : scratch) parts.push_back(&w.sums);
    attention_internal::StoreSchemeGrads(*c.p.scheme, parts, c.scheme_grads);
  }
}

}  // namespace posenc
