// The FlashAttention-2 backward on the CPU (Dao 2023, "FlashAttention-2: Faster Attention with
// Better Parallelism and Work Partitioning", Alg. 2): one pass over the visible (query tile, key
// tile) pairs that recomputes P once per pair and produces all three gradients from it.
// Formula: src/attention/flash_backward.cc; contract and memory: include/posenc/flash_attention.h.
// Work split: a call runs in groups of units (batch b, kv head hk) whose packed buffers stay under
// kPackBudgetBytes (a larger unit runs alone), each group in three ParallelFor phases:
//  1. Pack, over (unit, query head of its GQA group, query tile): PackQueryTile;
//  2. Key tiles, over (unit, chunk of consecutive key tiles): KeyChunk and RunTilePair;
//  3. Reduce, over (unit, query head, query tile): ReduceQueryTile.
// Many small units (one chunk each) run the three steps as one task per unit instead, each
// worker a contiguous block of units (RunUnitTasks, ForEachUnitInBlocks).
// Results race-free without atomics: a key tile's dK and dV are finished inside one task and each
// chunk owns a float32 partial of dQ, summed in chunk order; the chunks depend on the shape only,
// never on the threads, so gradients are bit-identical for any thread count. Numerics:
// flash_backward_tile.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attention/flash_backward_engine.h"
#include "attention/flash_backward_tile.h"
#include "kernels/float_mode.h"
#include "kernels/simd/flash.h"

namespace posenc::flash_internal {
namespace {

using attention_internal::SchemeGradSums;

// Packed bytes of one group of units: q, dO, lse, D and the dQ partials of
// the units in flight, O(B H Sq (D + Dv) (1 + chunks)) floats in all for a
// call, are bounded by it (a unit larger than that runs alone).
constexpr std::int64_t kPackBudgetBytes = std::int64_t{64} << 20;
constexpr std::int64_t kMinTasks = 4;  // key-tile tasks per call, at least (when key tiles allow)
// One chunk per unit, at least kUnitsPerThread units per thread, each under
// kUnitBytes: one task per unit (RunUnitTasks), its rows still in L1/L2
// (docs/PERFORMANCE.md, "Design figures").
constexpr std::int64_t kUnitsPerThread = 8;
constexpr std::int64_t kUnitBytes = std::int64_t{1} << 20;

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
  const bool bp = L.bf16_pairs;
  w.k_b.assign(bp ? Z((bk + 1) / 2 * L.ldd * 2) : 0, 0);
  w.pt_a.assign(bp ? Z(L.half_bq * L.ldk * 2) : 0, 0);
  w.dst_a.assign(bp ? Z(L.half_bq * L.ldk * 2) : 0, 0);
  w.ds_a.assign(bp ? Z(bq * L.ldk / 2) : 0, 0);
  w.ones.assign(bp ? Z(std::max(bq, bk)) : 0, 1.0f);
  const bool rounded = L.bf16_products && !L.bf16_pairs;
  w.p16.assign(rounded ? Z(bq * L.ldk) : 0, 0.0f);
  w.ds16.assign(rounded ? Z(bq * L.ldk) : 0, 0.0f);
  w.band_cols.assign(Z((bq + kBandRows - 1) / kBandRows), 0);
  w.bias_rows.assign(Z(bq), nullptr);
  w.delta_rows.assign(Z(bq), 0.0f);
  w.visible_rows.assign(Z(bq), 0);
  w.cols_rows.assign(Z(bq), 0);
  w.serial = Context(1, backend);
  w.tile_terms.Reset(*c.p.scheme, cap, L.ldk);
  w.sums = c.p.scheme->NewGradSums();
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
  // Unpadded rows (ldd == D) load in place; padded ones through w.rows.
  float* tmp = w.rows.data();
  float* rows = L.ldd == L.D ? u.q + row0 * L.ldd : tmp;
  LoadRows(q, p.qd, b, h, i0, nq, rows, L.D);
  if (p.rope != nullptr) {
    RotateTile(*p.rope, rows, nq, L.D, qpos, w.serial);
    if (p.Bf16()) RoundToBf16(rows, nq * L.D);  // as the forward rounds them
  }
  for (Index i = 0; i < nq && rows == tmp; ++i) {
    float* dst = u.q + (row0 + i) * L.ldd;
    std::copy_n(tmp + i * L.D, L.D, dst);
    std::fill(dst + L.D, dst + L.ldd, 0.0f);
  }
  float* dst = u.dout + row0 * L.ldv;
  LoadRows(dout, c.dod, b, h, i0, nq, dst, L.ldv);
  // D_i in float64 (kernels/scalar/flash.h FlashRowDotsF64: one summation
  // order on every target and backend), O's rows read in place where SIMD
  // can (no float32 copy of O: the same bits).
  const std::optional<StoredRows> o = L.simd ? StoredRowsOf(out, c.od, b, h, i0) : std::nullopt;
  if (o) {
    kernels::simd::FlashRowDotsF64Stored(o->storage, dst, L.ldv, o->first, o->stride, nq, L.Dv,
                                         u.delta + row0);
  } else {
    LoadRows(out, c.od, b, h, i0, nq, tmp, L.Dv);
    if (L.simd) {
      kernels::simd::FlashRowDotsF64(dst, L.ldv, tmp, L.Dv, nq, L.Dv, u.delta + row0);
    } else {
      kernels::scalar::FlashRowDotsF64(dst, L.ldv, tmp, L.Dv, nq, L.Dv, u.delta + row0);
    }
  }
  for (Index i = 0; i < nq; ++i) {
    float* row = dst + i * L.ldv;
    std::fill(row + L.Dv, row + L.ldv, 0.0f);
    u.lse[row0 + i] = c.lse.As<const float>()[b * c.lse.strides[0] + h * c.lse.strides[1] +
                                              (i0 + i) * c.lse.strides[2]];
  }
  if (L.bf16_qk) PackPairs(u.q + row0 * L.ldd, nq, L.D, L.ldd, u.q_pairs + row0 * L.D / 2);
  if (L.bf16_dv) PackPairs(dst, nq, L.Dv, L.ldv, u.dout_pairs + row0 * L.Dv / 2);
  if (L.bf16_pairs) {
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
  // Unpadded K rows (ldd == D) load in place into w.krows.
  float* tmp = L.ldd == L.D && !L.bf16_pairs ? w.krows.data() : w.rows.data();
  LoadRows(k, p.kd, b, hk, j0, nk, tmp, L.D);
  if (p.rotate_keys) {
    RotateTile(*p.rope, tmp, nk, L.D, &c.kpos[Z(b * p.dims.key_len + j0)], w.serial);
    if (p.Bf16()) RoundToBf16(tmp, nk * L.D);  // as the forward rounds them
  }
  // K^T as float32 or as bfloat16 pairs; K rows as float32 or as pairs along the keys.
  if (L.bf16_qk) {
    PackTransposedPairs(tmp, nk, L.D, L.D, w.kt_pairs.data(), L.ldk);
  } else {
    TransposeTile(tmp, nk, L.D, L.D, w.kt.data(), L.ldk, L.simd);
  }
  if (L.bf16_pairs) {
    kernels::simd::FlashPackPairsB(tmp, L.D, nk, L.D, w.k_b.data(), L.ldd, L.simd);
  } else if (tmp != w.krows.data()) {
    for (Index j = 0; j < nk; ++j) {
      float* dst = w.krows.data() + j * L.ldd;
      std::copy_n(tmp + j * L.D, L.D, dst);
      std::fill(dst + L.D, dst + L.ldd, 0.0f);
    }
  }
  tmp = w.rows.data();
  LoadRows(v, p.vd, b, hk, j0, nk, tmp, L.Dv);
  if (L.bf16_dv) {
    PackTransposedPairs(tmp, nk, L.Dv, L.Dv, w.vt_pairs.data(), L.ldk);
  } else {
    TransposeTile(tmp, nk, L.Dv, L.Dv, w.vt.data(), L.ldk, L.simd);
  }
}

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
      const TileTask task{b, hk * L.G + hl, hl, chunk};
      for (Index t = 0; t < c.q_tiles; ++t) {
        const PositionRange& qr = c.q_ranges[Z(b * c.q_tiles + t)];
        if (p.TileHidden(qr.min, qr.max, kr.min, kr.max)) continue;
        RunTilePair(c, L, ops, u, w, task, t, ku, qr, kr);
      }
    }
    // dk = scale * acc, rotated back to the unrotated keys' frame.
    StoreGradRows(g.dk, c.dkd, b, hk, j0, nk, w.dk.data(), L.ldd, p.scale,
                  p.rotate_keys ? p.rope : nullptr, &c.kpos[Z(b * p.dims.key_len + j0)],
                  w.rows.data(), w.serial);
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
  StoreGradRows(g.dq, c.dqd, b, h, i0, nq, sum, L.ldd, p.scale, p.rope, &c.qpos[Z(b * L.Sq + i0)],
                w.rows.data(), w.serial);
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
  const bool bf16_qk_cpu = simd && kernels::simd::FlashBf16LogitsPreferred(d.head_dim);
  const bool bf16_dv_cpu = simd && kernels::simd::FlashBf16LogitsPreferred(d.value_dim);
  Layout L;
  L.D = d.head_dim;
  L.Dv = d.value_dim;
  L.ldd = Pad(L.D);
  L.ldv = Pad(L.Dv);
  L.ldk = Pad(c.bk);
  L.G = d.Group();
  L.Sq = d.query_len;
  L.bf16_qk = bf16_qk_cpu && q.dtype == DType::kBFloat16 && k.dtype == DType::kBFloat16 &&
              (p.rope == nullptr || p.Bf16()) && L.D % 2 == 0;
  L.bf16_products = p.Bf16();
  L.bf16_pairs = L.bf16_products && (!simd || kernels::simd::FlashBf16DotPreferred());
  L.simd = simd;
  L.q_tiles = c.q_tiles;
  L.half_bq = (c.bq + 1) / 2;
  L.bf16_dv =
      bf16_dv_cpu && dout.dtype == DType::kBFloat16 && v.dtype == DType::kBFloat16 && L.Dv % 2 == 0;
  const Index units = d.batch * d.kv_heads;
  // Enough tasks for the threads: when units are few, each unit's key tiles
  // are split into chunks, each with its own dQ partial. The count depends
  // on the shape only (not on the threads), so gradients are bit-identical
  // for any thread count.
  L.chunks = std::clamp<Index>((kMinTasks + units - 1) / units, 1, c.k_tiles);
  return L;
}

// What the phases of one RunBackward call share.
struct BackwardRun {
  const BackwardCall& c;
  const Layout& L;
  const TileOps& ops;
  const TensorView &q, &k, &v, &out, &dout;
  const AttentionGrads& g;
  BackwardBuffers& buffers;
  std::vector<std::vector<Index>> bounds;  // per batch: chunk boundaries of its key tiles

  // The packed query side of slot `slot` of the buffers.
  UnitView Slot(Index slot) const {
    return ViewOf(L, buffers.floats.data() + slot * L.UnitFloats(),
                  buffers.deltas.data() + slot * L.G * L.Sq,
                  buffers.pairs.data() + slot * L.UnitPairs());
  }
  // The phases' steps for unit (b, hk) = (unit / Hkv, unit % Hkv): query
  // task r = (local head, query tile), chunk ch.
  void Pack(const UnitView& u, Index unit, Index r, Scratch& w) const {
    const Index hk = unit % c.p.dims.kv_heads, hl = r / c.q_tiles;
    PackQueryTile(c, L, u, q, out, dout, unit / c.p.dims.kv_heads, hk * L.G + hl, hl, r % c.q_tiles,
                  w);
  }
  void Keys(const UnitView& u, Index unit, Index ch, Scratch& w) const {
    const Index b = unit / c.p.dims.kv_heads, *bd = bounds[Z(b)].data();
    KeyChunk(c, L, ops, u, k, v, g, b, unit % c.p.dims.kv_heads, ch, bd[ch], bd[ch + 1], w);
  }
  void Reduce(const UnitView& u, Index unit, Index r, Scratch& w) const {
    const Index hk = unit % c.p.dims.kv_heads, hl = r / c.q_tiles;
    ReduceQueryTile(c, L, ops, u, g, unit / c.p.dims.kv_heads, hk * L.G + hl, hl, r % c.q_tiles, w);
  }
};

// Groups of `group_units` consecutive units, each in three ParallelFor phases.
void RunPhases(const BackwardRun& run, Index units, Index group_units, const Context& ctx) {
  const Index row_tasks = run.L.G * run.c.q_tiles, chunks = run.L.chunks;
  std::vector<Scratch>& scratch = run.buffers.scratch;
  for (Index first = 0; first < units; first += group_units) {
    const Index n_units = std::min(group_units, units - first);
    ctx.ParallelFor(n_units * row_tasks, [&](Index task, int worker) {
      run.Pack(run.Slot(task / row_tasks), first + task / row_tasks, task % row_tasks,
               scratch[Z(worker)]);
    });
    ctx.ParallelFor(n_units * chunks, [&](Index task, int worker) {
      const kernels::ScopedFlushSubnormals ftz;  // kernels/float_mode.h
      run.Keys(run.Slot(task / chunks), first + task / chunks, task % chunks, scratch[Z(worker)]);
    });
    ctx.ParallelFor(n_units * row_tasks, [&](Index task, int worker) {
      const kernels::ScopedFlushSubnormals ftz;
      run.Reduce(run.Slot(task / row_tasks), first + task / row_tasks, task % row_tasks,
                 scratch[Z(worker)]);
    });
  }
}

// One task per unit (ForEachUnitInBlocks: each worker a contiguous block of
// units): the same steps in the same order as RunPhases, so the same bits,
// in the worker's own slot.
void RunUnitTasks(const BackwardRun& run, Index units, const Context& ctx) {
  const Index row_tasks = run.L.G * run.c.q_tiles;
  ForEachUnitInBlocks(units, ctx, [&](Index unit, int worker) {
    const kernels::ScopedFlushSubnormals ftz;  // kernels/float_mode.h
    const UnitView u = run.Slot(worker);
    Scratch& w = run.buffers.scratch[Z(worker)];
    for (Index r = 0; r < row_tasks; ++r) run.Pack(u, unit, r, w);
    run.Keys(u, unit, 0, w);
    for (Index r = 0; r < row_tasks; ++r) run.Reduce(u, unit, r, w);
  });
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
  const Index unit_bytes = 4 * L.UnitFloats() + 8 * L.G * L.Sq + 4 * L.UnitPairs();
  const bool unit_tasks =
      L.chunks == 1 && units >= kUnitsPerThread * threads && unit_bytes <= kUnitBytes;
  // Groups of consecutive units under the pack budget (RunPhases), or one
  // slot per worker (RunUnitTasks).
  const Index per_group = std::max<Index>(1, kPackBudgetBytes / std::max<Index>(unit_bytes, 1));
  const Index group_units = std::min(units, per_group);
  const Index slots = unit_tasks ? threads : group_units;
  // The calling thread's buffers, kept between calls (ThreadBuffers). The
  // packed units need no zeroing: PackQueryTile writes every float, delta
  // and pair of its rows (padding and dQ partials included) before any
  // other phase reads them.
  ThreadBuffers<BackwardBuffers> lease;
  BackwardBuffers& buffers = lease.get();
  buffers.floats.resize(Z(slots * L.UnitFloats()));
  buffers.deltas.resize(Z(slots * L.G * L.Sq));
  buffers.pairs.resize(Z(slots * L.UnitPairs()));
  buffers.scratch.resize(Z(threads));
  for (Scratch& w : buffers.scratch) Resize(w, c, L, ctx.backend());
  const TileOps ops{L.simd};
  BackwardRun run{c, L, ops, q, k, v, out, dout, g, buffers, {}};
  for (Index b = 0; b < d.batch; ++b) run.bounds.push_back(ChunkBounds(c, b, L.chunks));
  if (unit_tasks) {
    RunUnitTasks(run, units, ctx);
  } else {
    RunPhases(run, units, group_units, ctx);
  }
  // The scheme's parameter gradients: per-worker float64 sums, reduced at
  // the end.
  if (c.any_scheme_grad) {
    std::vector<const SchemeGradSums*> parts;
    for (const Scratch& w : buffers.scratch) parts.push_back(&w.sums);
    attention_internal::StoreSchemeGrads(*p.scheme, parts, c.scheme_grads);
  }
}

}  // namespace posenc::flash_internal
