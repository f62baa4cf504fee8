// The forward engine of the fused attention (FlashAttention-2, Dao 2023, Alg. 1, on the CPU),
// shared by the dense and the packed varlen entry points. Contract, formulas, memory and error
// bound: include/posenc/flash_attention.h.
// A call is a list of segments (a dense batch row, or one packed sequence) run in groups of
// (segment, kv head) units, each group in two ParallelFor phases (RunGroup): 1. pack every key
// tile once (PackKeyTile); 2. the online softmax of every query tile over the packed key tiles
// (QueryTask); many small units run both as one task per unit, each worker a contiguous block
// of units (RunUnitTasks, ForEachUnitInBlocks).
// Backend::kScalar runs plain loops with the same buffers and formulas.
// Float32 throughout; positions [0, 2^24).
#include "attention/flash_forward_engine.h"
#include "attention/flash_forward_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/float_mode.h"
#include "kernels/scalar/flash.h"
#include "kernels/simd/flash.h"

namespace posenc::flash_internal {
namespace {

using attention_internal::SchemeRow;
using Rounding = kernels::simd::FlashRowRounding;

// Groups of units are cut so that the packed tiles of one group stay under
// this budget (a single unit larger than that is packed alone), so extra
// memory is O(min(total K/V, 16 MiB) + workers x tile scratch), never
// O(Sq x Sk).
constexpr std::int64_t kPackBudgetBytes = std::int64_t{16} << 20;

// At least kUnitsPerThread units per thread, each unit's packed key tiles
// under kUnitTilesBytes: one task per unit (RunUnitTasks) packs them into
// its worker's buffer and runs the unit's query tiles while they are in
// L1/L2: no barrier between the phases, no call-wide buffer to zero. Fewer
// or larger units run RunGroup's finer tasks, which keep the threads busy
// (docs/PERFORMANCE.md, "Design figures").
constexpr std::int64_t kUnitsPerThread = 8;
constexpr std::int64_t kUnitTilesBytes = std::int64_t{256} << 10;

// Per-worker buffers.
struct Work {
  std::vector<float> q, k, s, acc, m, l, alpha, terms;
  std::vector<std::uint32_t> q_pairs;       // bf16 logits: q as bfloat16 pairs
  std::vector<float> v;                     // bf16_pv: the V rows before packing
  std::vector<float> tiles;                 // RunUnitTasks: the packed key tiles of one unit
  std::vector<std::int64_t> band_cols;      // DiagonalBands of the current tile
  std::vector<std::int64_t> visible, cols;  // per row of a banded tile: prefix, band columns
  std::vector<std::uint32_t> p_pairs;       // bf16_pv: P as bfloat16 pairs [bq, ldk / 2]
  std::vector<std::int64_t> qpos;
  std::vector<const float*> bias_rows;  // per query row: its terms (FlashSoftmaxTile)
  TileTerms tile_terms;
};

// What RunSegments keeps between calls on the calling thread.
struct ForwardBuffers {
  std::vector<float> packed;  // the key tiles of one group of units
  std::vector<Work> work;     // per worker
};

// The row kernels, Highway or (Backend::kScalar) kernels/scalar/flash.h.
struct RowOps {
  bool simd = true;

  // row[j] = row[j] * scale + bias[j] (j < nk; bias may be null), -inf in
  // the padding; returns the row max.
  float ScaleRow(float* row, std::int64_t nk, std::int64_t ld, float scale,
                 const float* bias) const {
    return simd ? kernels::simd::FlashScaleRow(row, nk, ld, scale, bias)
                : kernels::scalar::FlashScaleRow(row, nk, ld, scale, bias);
  }
  void PVScaled(const float* p, std::int64_t ldp, const float* v, std::int64_t nq, std::int64_t nk,
                std::int64_t ldv, const float* alpha, float* acc) const {
    if (simd) return kernels::simd::FlashAccumulatePVScaled(p, ldp, v, nq, nk, ldv, alpha, acc);
    kernels::scalar::FlashAccumulatePVScaled(p, ldp, v, nq, nk, ldv, alpha, acc);
  }
};

// Packs key tile t of unit (segment s, kv head hk) at dst (phase 1): loaded
// once, converted to float32 (any input dtype), rotated by the scheme's
// rotation when the kernel rotates keys, transposed to [D, ldk] and stored
// next to its float32 [bk, ldv] value rows (bfloat16 variants:
// ForwardPlan). Each K/V row is thus converted, rotated and transposed once
// per call instead of once per (query tile, key tile) pair.
void PackKeyTile(const Problem& p, const ForwardPlan& plan, const Segment& s, std::int64_t tile,
                 std::int64_t t, std::int64_t hk, const TensorView& k, const TensorView& v, Work& w,
                 const Context& serial, float* dst) {
  const std::int64_t D = plan.D, ldk = plan.ldk, ldv = plan.ldv, j0 = t * plan.bk;
  const std::int64_t nk = std::min(plan.bk, s.nk - j0);
  LoadRows(k, p.kd, s.batch, hk, s.k0 + j0, nk, w.k.data(), D);
  if (p.rotate_keys) {
    RotateTile(*p.rope, w.k.data(), nk, D, &plan.kpos[static_cast<std::size_t>(tile * plan.bk)],
               serial);
    if (p.Bf16()) RoundToBf16(w.k.data(), nk * D);  // as a bfloat16 model stores rotated keys
  }
  if (!plan.bf16) TransposeTile(w.k.data(), nk, D, D, dst, ldk, plan.simd);  // K^T [D, ldk]
  float* vt = dst + plan.KtFloats();
  if (plan.pv_pairs) {  // V as bfloat16 pairs along the keys (exact: v holds bfloat16 values)
    LoadRows(v, p.vd, s.batch, hk, s.k0 + j0, nk, w.v.data(), plan.Dv);
    kernels::simd::FlashPackPairsB(w.v.data(), plan.Dv, nk, plan.Dv,
                                   reinterpret_cast<std::uint16_t*>(vt), ldv, plan.simd);
  } else {
    LoadRows(v, p.vd, s.batch, hk, s.k0 + j0, nk, vt, ldv);
    for (std::int64_t j = 0; j < nk; ++j)
      std::fill(vt + j * ldv + plan.Dv, vt + (j + 1) * ldv, 0.0f);
  }
  if (plan.bf16) {  // K^T as bfloat16 pairs [D / 2, ldk, 2] (exact: k holds bfloat16 values)
    PackTransposedPairs(w.k.data(), nk, D, D, reinterpret_cast<std::uint16_t*>(vt + plan.VFloats()),
                        ldk);
  }
}

// One query-tile task: query tile [i0, i0 + nq) of segment s, query head h,
// over the packed key tiles of its unit.
struct QueryTask {
  const Problem& p;
  const ForwardPlan& plan;
  const Segment& s;
  std::int64_t segment, h, i0, nq;
  const float* packed;
  const TileOps& ops;
  const RowOps& rows;
  Work& w;
  PositionRange queries;

  // q rows (rotated by the scheme's rotation), positions, softmax state.
  void LoadQueries(const TensorView& q, const Context& serial) {
    LoadRows(q, p.qd, s.batch, h, s.q0 + i0, nq, w.q.data(), plan.D);
    if (s.relative) {  // positions q_pos0 + i0 + i
      for (std::int64_t i = 0; i < nq; ++i) w.qpos[Z(i)] = s.q_pos0 + i0 + i;
      queries = ConsecutiveRange(s.q_pos0 + i0, nq);
    } else {
      for (std::int64_t i = 0; i < nq; ++i) {
        w.qpos[Z(i)] = p.query_positions.At(s.batch, s.q0 + i0 + i, p.dims.query_len);
      }
      queries = RangeOf(w.qpos.data(), nq);
    }
    if (p.rope != nullptr) {
      RotateTile(*p.rope, w.q.data(), nq, plan.D, w.qpos.data(), serial);
      if (p.Bf16()) RoundToBf16(w.q.data(), nq * plan.D);
    }
    if (plan.bf16) PackPairs(w.q.data(), nq, plan.D, plan.D, w.q_pairs.data());  // exact
    std::fill(w.m.begin(), w.m.begin() + nq, kNegInf);
    std::fill(w.l.begin(), w.l.begin() + nq, 0.0f);
    std::fill(w.acc.begin(), w.acc.begin() + nq * plan.ldv, 0.0f);
  }

  // Scaled logits plus position terms and mask of row i into `row`; returns its max.
  // The terms come from TileTerms (attention/flash_internal.h: the scheme's code, a
  // per-distance table when its bias depends on r - p only); scale, terms and the row max are
  // one SIMD pass (FlashScaleRow) reading the terms in place on fully visible tiles, with the
  // mask merged in (-inf) on partially visible ones.
  float ScaledRow(std::int64_t i, float* row, const std::int64_t* kpos, std::int64_t nk,
                  const PositionRange& keys, bool all_visible) {
    const std::int64_t ldk = plan.ldk, qp = w.qpos[static_cast<std::size_t>(i)];
    const float* terms = nullptr;
    if (w.tile_terms.active()) {
      terms = w.tile_terms.Row(qp, w.q.data() + i * plan.D, p.scale, w.terms.data());
    }
    if (all_visible) return rows.ScaleRow(row, nk, ldk, p.scale, terms);
    // A causal diagonal tile: row i sees a prefix of the keys, masked by length.
    const std::int64_t prefix = keys.consecutive ? p.VisiblePrefix(qp, kpos[0], nk) : -1;
    if (prefix >= 0) return rows.ScaleRow(row, prefix, ldk, p.scale, terms);
    float* bias = w.terms.data();
    if (terms == nullptr) {
      std::fill(bias, bias + ldk, 0.0f);
    } else if (terms != bias) {
      std::copy(terms, terms + ldk, bias);
    }
    for (std::int64_t j = 0; j < nk; ++j) {
      if (!p.Visible(qp, kpos[j])) bias[j] = kNegInf;
    }
    return rows.ScaleRow(row, nk, ldk, p.scale, bias);
  }

  // One key tile: logits, online softmax update, P.V (+ value terms). A tile
  // hidden by the causal mask / window is skipped from the per-tile min/max
  // positions. Value terms (Shaw) are added by the scheme after the
  // online-softmax rescale; the rescale of the accumulator is otherwise
  // fused into the P.V kernel (FlashAccumulatePVScaled).
  void VisitKeyTile(std::int64_t t) {
    const std::int64_t tile = plan.tile_base[static_cast<std::size_t>(segment)] + t;
    const PositionRange& keys = plan.ranges[static_cast<std::size_t>(tile)];
    if (p.TileHidden(queries.min, queries.max, keys.min, keys.max)) return;
    const bool all_visible = p.TileVisible(queries.min, queries.max, keys.min, keys.max);
    const std::int64_t D = plan.D, ldk = plan.ldk, ldv = plan.ldv;
    const std::int64_t nk = std::min(plan.bk, s.nk - t * plan.bk);
    const float* kt = packed + t * plan.tile_floats;
    const float* vt = kt + plan.KtFloats();
    const std::int64_t* kpos = &plan.kpos[static_cast<std::size_t>(tile * plan.bk)];
    if (w.tile_terms.active()) w.tile_terms.Prepare(h, queries, kpos, nk, keys);
    float* sc = w.s.data();
    const bool values = p.scheme->Has(SchemeTerm::kValue);
    // A causal diagonal tile: each band of rows computes its visible keys only.
    const bool banded = !all_visible && !values &&
                        DiagonalBands(p, w.qpos.data(), nq, queries, kpos, nk, keys,
                                      w.band_cols.data(), w.visible.data());
    if (plan.bf16) {
      TileLogitsBf16(w.q_pairs.data(), D,
                     reinterpret_cast<const std::uint16_t*>(vt + plan.VFloats()), nq, ldk,
                     banded ? w.band_cols.data() : nullptr, sc, plan.simd);
    } else {
      ops.LogitsBands(w.q.data(), D, kt, nq, D, ldk, banded ? w.band_cols.data() : nullptr, sc);
    }
    if (rows.simd && (all_visible || banded) && !values &&
        (!w.tile_terms.active() || w.tile_terms.WindowsOnly())) {
      return SoftmaxTile(sc, vt, nk, banded);
    }
    for (std::int64_t i = 0; i < nq; ++i) {
      float* row = sc + i * ldk;
      const float row_max = ScaledRow(i, row, kpos, nk, keys, all_visible);
      float& alpha = w.alpha[static_cast<std::size_t>(i)];
      if (row_max == kNegInf) {  // nothing visible in this tile for row i
        std::fill(row, row + ldk, 0.0f);
        alpha = 1.0f;
        continue;
      }
      float& m = w.m[static_cast<std::size_t>(i)];
      const float m_new = std::max(m, row_max);
      alpha = std::exp(m - m_new);  // 0 when m was -inf
      m = m_new;
      const float sum =
          ops.ExpRow(row, banded ? w.band_cols[Z(i / kBandRows)] : ldk, m_new, p.Exp());
      float& l = w.l[static_cast<std::size_t>(i)];
      l = l * alpha + sum;
      if (values) {  // rescale now, then the value terms; PV adds plain P.V
        float* acc = w.acc.data() + i * ldv;
        for (std::int64_t x = 0; x < ldv; ++x) acc[x] *= alpha;
        alpha = 1.0f;
        SchemeRow<float> r;
        r.head = h;
        r.qpos = w.qpos[static_cast<std::size_t>(i)];
        r.q = w.q.data() + i * D;
        r.kpos = kpos;
        r.nk = nk;
        p.scheme->AddValues(r, row, acc);
      }
    }
    BandsPV(sc, vt, nk, banded, Rounding::kNone);
  }

  // The common cases in one SIMD call (FlashSoftmaxTile): a fully visible
  // tile, or a causal diagonal one (each row to its visible prefix, each
  // band of rows to its columns), whose terms are windows of the tile's
  // distance table (or none), so every row's pointer stays valid; P rounded
  // to bfloat16 in the same pass when the P . V kernel takes float32 rows.
  void SoftmaxTile(float* sc, const float* vt, std::int64_t nk, bool banded) {
    const float** bias = nullptr;
    if (w.tile_terms.active()) {  // windows of the distance table (the caller checked)
      for (std::int64_t i = 0; i < nq; ++i) w.bias_rows[Z(i)] = w.tile_terms.Window(w.qpos[Z(i)]);
      bias = w.bias_rows.data();
    }
    kernels::simd::FlashSoftmaxRows shape;
    if (banded) {
      for (std::int64_t i = 0; i < nq; ++i) w.cols[Z(i)] = w.band_cols[Z(i / kBandRows)];
      shape.visible = w.visible.data();  // the prefixes DiagonalBands found
      shape.cols = w.cols.data();
    }
    if (plan.bf16_pv && !plan.pv_pairs) shape.rounding = Rounding::kBFloat16;
    shape.exp = p.Exp();
    kernels::simd::FlashSoftmaxTile(sc, plan.ldk, nq, nk, p.scale, bias, w.m.data(), w.l.data(),
                                    w.alpha.data(), shape);
    BandsPV(sc, vt, nk, banded, shape.rounding);
  }

  // AccumulatePV over the whole tile, or band by band over each band's columns.
  void BandsPV(float* sc, const float* vt, std::int64_t nk, bool banded, Rounding done) {
    if (!banded) return AccumulatePV(sc, vt, 0, nq, nk, done);
    for (std::int64_t r0 = 0; r0 < nq; r0 += kBandRows) {
      AccumulatePV(sc, vt, r0, std::min(kBandRows, nq - r0),
                   std::min(nk, w.band_cols[Z(r0 / kBandRows)]), done);
    }
  }

  // acc = alpha * acc + P . V for query rows [r0, r0 + n) over the first nk
  // keys: float32, or P rounded to bfloat16 (FlashPrecision; `done`: already
  // rounded): against V's bfloat16 pairs, or in place against V's float32
  // rows (ForwardPlan).
  void AccumulatePV(float* sc, const float* vt, std::int64_t r0, std::int64_t n, std::int64_t nk,
                    Rounding done) {
    const std::int64_t ldk = plan.ldk, ldv = plan.ldv;
    const float* alpha = w.alpha.data() + r0;
    float* acc = w.acc.data() + r0 * ldv;
    if (!plan.pv_pairs) {
      if (plan.bf16_pv && done == Rounding::kNone)
        kernels::simd::FlashRoundRowsBf16(sc + r0 * ldk, ldk, n, Pad(nk), sc + r0 * ldk);
      return rows.PVScaled(sc + r0 * ldk, ldk, vt, n, nk, ldv, alpha, acc);
    }
    std::uint32_t* pairs = w.p_pairs.data() + r0 * (ldk / 2);
    kernels::simd::FlashPackPairsRows(sc + r0 * ldk, ldk, n, nk, pairs, ldk / 2, plan.simd);
    kernels::simd::FlashMatMulBf16(pairs, ldk / 2, 1, n, reinterpret_cast<const std::uint16_t*>(vt),
                                   (nk + 1) / 2, ldv, ldv, alpha, acc, ldv, plan.simd);
  }

  // out = acc / l (and lse) for every row of the tile: the tile's rows in
  // one store, each times its 1 / l (kept in alpha, free by now).
  void Store(const TensorView& out) const {
    float* inv = w.alpha.data();
    float* l = w.l.data();
    for (std::int64_t i = 0; i < nq; ++i) inv[i] = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    if (p.lse.data != nullptr) {  // log-sum-exp for the backward; -inf: no visible key
      if (rows.simd) {
        kernels::simd::FlashLogSumExp(w.m.data(), l, nq, l);  // l is not needed past here
      } else {
        kernels::scalar::FlashLogSumExp(w.m.data(), l, nq, l);
      }
      float* lse = p.lse.As<float>() + s.batch * p.lse.strides[0] + h * p.lse.strides[1];
      for (std::int64_t i = 0; i < nq; ++i) lse[(s.q0 + i0 + i) * p.lse.strides[2]] = l[i];
    }
    StoreRows(out, p.od, s.batch, h, s.q0 + i0, nq, w.acc.data(), plan.ldv, 1.0f, inv);
    if (p.out_copy.data != nullptr) {
      StoreRows(p.out_copy, p.ocd, s.batch, h, s.q0 + i0, nq, w.acc.data(), plan.ldv, 1.0f, inv);
    }
  }
};

void RunQueryTile(QueryTask& task, const TensorView& q, const TensorView& out,
                  const Context& serial) {
  task.LoadQueries(q, serial);
  for (std::int64_t t = 0; t < task.plan.KeyTiles(task.s); ++t) task.VisitKeyTile(t);
  task.Store(out);
}

// Index of the entry of `prefix` (nondecreasing, prefix[0] = 0) whose range
// [prefix[u], prefix[u + 1]) holds task.
std::size_t Locate(const std::vector<std::int64_t>& prefix, std::int64_t task) {
  return static_cast<std::size_t>(std::upper_bound(prefix.begin(), prefix.end(), task) -
                                  prefix.begin() - 1);
}

// A (segment, kv head) pair: what one group packs and runs the queries of.
struct Unit {
  std::size_t segment;
  std::int64_t hk;
};

// The units of a call cut into groups, and the packed floats of the largest.
struct UnitGroups {
  std::vector<std::vector<Unit>> groups;
  std::int64_t max_floats = 0;
  std::int64_t units = 0, max_unit_floats = 0;  // all groups: units, packed floats of the largest
};

// Units (segment, kv head) with queries, in order, cut into groups whose
// packed key tiles stay under kPackBudgetBytes (a larger unit alone).
UnitGroups GroupUnits(const Problem& p, const std::vector<Segment>& segs, const ForwardPlan& plan) {
  UnitGroups out;
  std::vector<std::vector<Unit>>& groups = out.groups;
  std::int64_t group_floats = 0;
  for (std::size_t si = 0; si < segs.size(); ++si) {
    if (segs[si].nq == 0) continue;
    const std::int64_t floats = plan.KeyTiles(segs[si]) * plan.tile_floats;
    for (std::int64_t hk = 0; hk < p.dims.kv_heads; ++hk) {
      if (groups.empty() || (group_floats + floats) * 4 > kPackBudgetBytes) {
        groups.emplace_back();
        group_floats = 0;
      }
      groups.back().push_back({si, hk});
      group_floats += floats;
      out.max_floats = std::max(out.max_floats, group_floats);
      ++out.units;
      out.max_unit_floats = std::max(out.max_unit_floats, floats);
    }
  }
  return out;
}

// Sizes every worker's buffers for the plan, zeroed, and appends one serial
// Context per worker to `serial`.
void PrepareWorkers(const Problem& p, const ForwardPlan& plan, const Context& ctx,
                    std::int64_t unit_floats, std::vector<Work>& work,
                    std::vector<Context>& serial) {
  work.resize(static_cast<std::size_t>(ctx.num_threads()));
  serial.reserve(work.size());
  const auto zeros = [](auto& buffer, std::int64_t n) {
    buffer.assign(static_cast<std::size_t>(n), {});
  };
  for (Work& w : work) {
    zeros(w.q, plan.bq * plan.D);
    zeros(w.k, plan.bk * plan.D);
    zeros(w.s, plan.bq * plan.ldk);
    zeros(w.acc, plan.bq * plan.ldv);
    zeros(w.m, plan.bq);
    zeros(w.l, plan.bq);
    zeros(w.alpha, plan.bq);
    zeros(w.terms, plan.ldk);
    zeros(w.qpos, plan.bq);
    zeros(w.bias_rows, plan.bq);
    zeros(w.q_pairs, plan.bf16 ? plan.bq * plan.D / 2 : 0);
    zeros(w.v, plan.pv_pairs ? plan.bk * plan.Dv : 0);
    zeros(w.p_pairs, plan.pv_pairs ? plan.bq * plan.ldk / 2 : 0);
    zeros(w.tiles, unit_floats);
    zeros(w.band_cols, (plan.bq + kBandRows - 1) / kBandRows);
    zeros(w.visible, plan.bq);
    zeros(w.cols, plan.bq);
    w.tile_terms.Reset(*p.scheme, 4 * (plan.bq + plan.bk), plan.ldk);
    serial.emplace_back(1, ctx.backend());
  }
}

// What the groups of one RunSegments call share: its inputs, the kernels,
// and the calling thread's packed tiles and per-worker buffers.
struct SegmentsCall {
  const Problem& p;
  const std::vector<Segment>& segs;
  const ForwardPlan& plan;
  const TensorView& q;
  const TensorView& k;
  const TensorView& v;
  const TensorView& out;
  const Context& ctx;
  const TileOps& ops;
  const RowOps& rows;
  std::vector<float>& packed;
  std::vector<Work>& work;
  std::vector<Context>& serial;
};

// Query task `local` of unit u (query head of the unit's kv group, query
// tile) over the unit's packed key tiles, on worker `worker`.
void RunUnitQueryTile(const SegmentsCall& call, const Unit& u, std::int64_t local,
                      const float* packed, int worker) {
  const ForwardPlan& plan = call.plan;
  const Segment& s = call.segs[u.segment];
  const std::int64_t q_tiles = plan.QueryTiles(s);
  const std::int64_t h = u.hk * call.p.dims.Group() + local / q_tiles;
  // Last query tiles first: under a causal mask they see the most keys.
  const std::int64_t i0 = (q_tiles - 1 - local % q_tiles) * plan.bq;
  QueryTask qt{call.p,
               plan,
               s,
               static_cast<std::int64_t>(u.segment),
               h,
               i0,
               std::min(plan.bq, s.nq - i0),
               packed,
               call.ops,
               call.rows,
               call.work[static_cast<std::size_t>(worker)],
               PositionRange{}};
  RunQueryTile(qt, call.q, call.out, call.serial[static_cast<std::size_t>(worker)]);
}

// One group of units: packs their key tiles (one task per tile), then runs
// their query tiles over them (one task per (unit, query head of the unit's
// kv group, query tile), largest causal tiles first for load balance).
void RunGroup(const SegmentsCall& call, const std::vector<Unit>& units) {
  const Problem& p = call.p;
  const std::vector<Segment>& segs = call.segs;
  const ForwardPlan& plan = call.plan;
  const TensorView &k = call.k, &v = call.v;
  std::vector<float>& packed = call.packed;
  std::vector<Work>& work = call.work;
  std::vector<Context>& serial = call.serial;
  const std::int64_t group = p.dims.Group();
  // Offsets of each unit's packed tiles, and task prefixes of both phases.
  std::vector<std::int64_t> offset, pack_prefix{0}, query_prefix{0};
  std::int64_t floats = 0;
  for (const Unit& u : units) {
    const Segment& s = segs[u.segment];
    offset.push_back(floats);
    floats += plan.KeyTiles(s) * plan.tile_floats;
    pack_prefix.push_back(pack_prefix.back() + plan.KeyTiles(s));
    query_prefix.push_back(query_prefix.back() + group * plan.QueryTiles(s));
  }
  call.ctx.ParallelFor(pack_prefix.back(), [&](std::int64_t task, int worker) {
    const std::size_t ui = Locate(pack_prefix, task);
    const Unit& u = units[ui];
    const std::int64_t t = task - pack_prefix[ui];
    const std::int64_t tile = plan.tile_base[u.segment] + t;
    PackKeyTile(p, plan, segs[u.segment], tile, t, u.hk, k, v,
                work[static_cast<std::size_t>(worker)], serial[static_cast<std::size_t>(worker)],
                packed.data() + offset[ui] + t * plan.tile_floats);
  });
  call.ctx.ParallelFor(query_prefix.back(), [&](std::int64_t task, int worker) {
    const kernels::ScopedFlushSubnormals ftz;  // kernels/float_mode.h
    const std::size_t ui = Locate(query_prefix, task);
    RunUnitQueryTile(call, units[ui], task - query_prefix[ui], packed.data() + offset[ui], worker);
  });
}

// One task per unit (ForEachUnitInBlocks: each worker a contiguous block of
// units, ordered by segment, kv head): the unit's key tiles packed into the
// worker's buffer, then its query tiles over them, as RunGroup does.
void RunUnitTasks(const SegmentsCall& call, const std::vector<Unit>& units) {
  const ForwardPlan& plan = call.plan;
  ForEachUnitInBlocks(
      static_cast<std::int64_t>(units.size()), call.ctx, [&](std::int64_t i, int worker) {
        const kernels::ScopedFlushSubnormals ftz;  // kernels/float_mode.h
        Work& w = call.work[Z(worker)];
        const Unit& u = units[Z(i)];
        const Segment& s = call.segs[u.segment];
        for (std::int64_t t = 0; t < plan.KeyTiles(s); ++t) {
          float* dst = w.tiles.data() + t * plan.tile_floats;
          // A short last tile leaves rows unwritten: zero, as RunGroup's buffer.
          if (s.nk - t * plan.bk < plan.bk) std::fill(dst, dst + plan.tile_floats, 0.0f);
          PackKeyTile(call.p, plan, s, plan.tile_base[u.segment] + t, t, u.hk, call.k, call.v, w,
                      call.serial[Z(worker)], dst);
        }
        for (std::int64_t local = 0; local < call.p.dims.Group() * plan.QueryTiles(s); ++local) {
          RunUnitQueryTile(call, u, local, w.tiles.data(), worker);
        }
      });
}

}  // namespace

void RunSegments(const Problem& p, const std::vector<Segment>& segs, const TensorView& q,
                 const TensorView& k, const TensorView& v, const TensorView& out,
                 const FlashAttentionOptions& options, const Context& ctx) {
  // bfloat16 dot products need q and k that are bfloat16 values: inputs in
  // bfloat16 and no rotation in float32.
  // Under FlashPrecision::kBFloat16 rotated q and k are rounded to bfloat16.
  const bool simd = ctx.backend() != Backend::kScalar;
  const bool bf16 = simd && q.dtype == DType::kBFloat16 && k.dtype == DType::kBFloat16 &&
                    (p.rope == nullptr || p.Bf16()) && p.dims.head_dim % 2 == 0 &&
                    kernels::simd::FlashBf16LogitsPreferred(p.dims.head_dim);
  const ForwardPlan plan = MakePlan(p, segs, options, bf16, simd);
  // Units (segment, kv head) with queries, cut into groups under the budget.
  const UnitGroups grouped = GroupUnits(p, segs, plan);
  if (grouped.groups.empty()) return;
  const TileOps ops{ctx.backend() != Backend::kScalar};
  const RowOps rows{ctx.backend() != Backend::kScalar};
  // The packed tiles and the workers' buffers: the calling thread's, kept
  // between calls (ThreadBuffers), zeroed as fresh ones would be (memset,
  // faster than assign()'s fill loop; docs/PERFORMANCE.md, "Design figures").
  ThreadBuffers<ForwardBuffers> lease;
  ForwardBuffers& buffers = lease.get();
  std::vector<float>& packed = buffers.packed;
  const bool unit_tasks = grouped.units >= kUnitsPerThread * ctx.num_threads() &&
                          grouped.max_unit_floats * 4 <= kUnitTilesBytes;
  packed.resize(unit_tasks ? 0 : static_cast<std::size_t>(grouped.max_floats));
  if (!packed.empty()) std::memset(packed.data(), 0, packed.size() * sizeof(float));
  std::vector<Context> serial;
  PrepareWorkers(p, plan, ctx, unit_tasks ? grouped.max_unit_floats : 0, buffers.work, serial);
  const SegmentsCall call{p,    segs,   plan,         q,     k, v, out, ctx, ops,
                          rows, packed, buffers.work, serial};
  if (unit_tasks) {
    std::vector<Unit> all;
    for (const std::vector<Unit>& units : grouped.groups) {
      all.insert(all.end(), units.begin(), units.end());
    }
    return RunUnitTasks(call, all);
  }
  for (const std::vector<Unit>& units : grouped.groups) RunGroup(call, units);
}

}  // namespace posenc::flash_internal
