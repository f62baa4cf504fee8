// The forward engine of the fused attention (FlashAttention-2, Dao 2023,
// Alg. 1, on the CPU), shared by the dense and the packed varlen entry
// points. Contract, formulas and error bound: include/posenc/flash_attention.h.
//
// A call is a list of segments (a dense batch row, or one packed sequence)
// and is run in groups of (segment, kv head) units:
//  1. Pack (one ParallelFor over the group's key tiles): every key tile of a
//     unit is loaded once, converted to float32 (any input dtype), rotated
//     by RoPE when the kernel rotates keys, transposed to [D, ldk] and
//     stored next to its float32 [bk, ldv] value rows. Each K/V row is thus
//     converted, rotated and transposed once per call instead of once per
//     (query tile, key tile) pair, which is what made the per-task loads of
//     the first version cost as much as the arithmetic. Groups are cut so
//     that the packed tiles of one group stay under kPackBudgetBytes
//     (16 MiB; a single unit larger than that is packed alone), so extra
//     memory is O(min(total K/V, 16 MiB) + workers x tile scratch), never
//     O(Sq x Sk).
//  2. Queries (one ParallelFor over (unit, query head of the unit's kv
//     group, query tile), largest causal tiles first for load balance): the
//     online softmax of flash.cc's first version over the packed key tiles.
//     Tiles hidden by the causal mask / window are skipped from the
//     per-tile min/max positions; on fully visible tiles the scale, the
//     ALiBi term and the row max are one SIMD pass (FlashScaleAlibiRow /
//     FlashScaleRow); on partially visible tiles and for T5 / Shaw a float32
//     bias row (position term + mask as -inf) is built first. T5 biases come
//     from a per-tile lookup table over the tile's distance range (bq + bk
//     - 1 bucket look-ups instead of bq x bk) when the range is small (always,
//     for consecutive positions). The online-softmax rescale of the
//     accumulator is fused into the P.V kernel (FlashAccumulatePVScaled).
// Backend::kScalar runs plain loops with the same buffers and formulas.
// Float32 throughout; positions [0, 2^24).
#include "attention/flash_forward.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "kernels/simd/flash.h"

namespace posenc::flash_internal {
namespace {

constexpr std::int64_t kPackBudgetBytes = std::int64_t{16} << 20;

// Tile geometry and key positions of one call (positions do not depend on
// the head, so they are computed once per key tile).
struct Plan {
  std::int64_t bq = 1, bk = 1, ldk = 0, ldv = 0, D = 0, Dv = 0;
  std::int64_t tile_floats = 0;            // packed K^T block + V block (+ bf16 K^T) of one key tile
  bool bf16 = false;                       // bfloat16 q.k logits (FlashTileLogitsBf16)
  std::vector<std::int64_t> tile_base;     // per segment: its first key tile
  std::vector<std::int64_t> kpos;          // [tiles, bk]
  std::vector<float> kposf;                // [tiles, ldk] (padding 0)
  std::vector<std::int64_t> rmin, rmax;    // [tiles]
  std::vector<char> consecutive;           // [tiles]: kpos[j] == kpos[0] + j
  std::int64_t KeyTiles(const Segment& s) const { return (s.nk + bk - 1) / bk; }
  std::int64_t QueryTiles(const Segment& s) const { return (s.nq + bq - 1) / bq; }
};

struct Work {
  std::vector<float> q, k, s, acc, m, l, alpha, bias, lut;
  std::vector<std::uint32_t> q_pairs;  // bf16 logits: q as bfloat16 pairs
  std::vector<std::int64_t> qpos;
};

// The row kernels, Highway or (Backend::kScalar) plain loops.
struct RowOps {
  bool simd = true;

  float ScaleRow(float* row, std::int64_t nk, std::int64_t ld, float scale,
                 const float* bias) const {
    if (simd) return kernels::simd::FlashScaleRow(row, nk, ld, scale, bias);
    float mx = kNegInf;
    for (std::int64_t j = 0; j < ld; ++j) {
      row[j] = j < nk ? row[j] * scale + (bias ? bias[j] : 0.0f) : kNegInf;
      mx = std::max(mx, row[j]);
    }
    return mx;
  }
  float ScaleAlibiRow(float* row, std::int64_t nk, std::int64_t ld, float scale, float slope,
                      float qpos, const float* kpos) const {
    if (simd) return kernels::simd::FlashScaleAlibiRow(row, nk, ld, scale, slope, qpos, kpos);
    float mx = kNegInf;
    for (std::int64_t j = 0; j < ld; ++j) {
      row[j] = j < nk ? row[j] * scale - slope * std::abs(qpos - kpos[j]) : kNegInf;
      mx = std::max(mx, row[j]);
    }
    return mx;
  }
  void PVScaled(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                std::int64_t nk, std::int64_t ldv, const float* alpha, float* acc) const {
    if (simd) return kernels::simd::FlashAccumulatePVScaled(p, ldp, v, nq, nk, ldv, alpha, acc);
    for (std::int64_t i = 0; i < nq; ++i) {
      float* a = acc + i * ldv;
      if (alpha != nullptr) {
        for (std::int64_t x = 0; x < ldv; ++x) a[x] *= alpha[i];
      }
      for (std::int64_t j = 0; j < nk; ++j) {
        const float pj = p[i * ldp + j];
        if (pj == 0.0f) continue;
        for (std::int64_t x = 0; x < ldv; ++x) a[x] += pj * v[j * ldv + x];
      }
    }
  }
};

Plan MakePlan(const Problem& p, const std::vector<Segment>& segs,
              const FlashAttentionOptions& options, bool bf16) {
  Plan plan;
  plan.bf16 = bf16;
  std::int64_t max_q = 1, max_k = 1;
  for (const Segment& s : segs) {
    max_q = std::max(max_q, s.nq);
    max_k = std::max(max_k, s.nk);
  }
  plan.bq = std::min(options.query_tile, max_q);
  plan.bk = std::min(options.key_tile, max_k);
  plan.ldk = Pad(plan.bk);
  plan.D = p.dims.head_dim;
  plan.Dv = p.dims.value_dim;
  plan.ldv = Pad(plan.Dv);
  plan.tile_floats = plan.D * plan.ldk + plan.bk * plan.ldv + (bf16 ? plan.D * plan.ldk / 2 : 0);
  std::int64_t tiles = 0;
  for (const Segment& s : segs) {
    plan.tile_base.push_back(tiles);
    tiles += plan.KeyTiles(s);
  }
  plan.kpos.assign(static_cast<std::size_t>(tiles * plan.bk), 0);
  plan.kposf.assign(static_cast<std::size_t>(tiles * plan.ldk), 0.0f);
  plan.rmin.assign(static_cast<std::size_t>(tiles), 0);
  plan.rmax.assign(static_cast<std::size_t>(tiles), 0);
  plan.consecutive.assign(static_cast<std::size_t>(tiles), 0);
  for (std::size_t si = 0; si < segs.size(); ++si) {
    const Segment& s = segs[si];
    for (std::int64_t t = 0; t < plan.KeyTiles(s); ++t) {
      const std::int64_t tile = plan.tile_base[si] + t, j0 = t * plan.bk;
      const std::int64_t nk = std::min(plan.bk, s.nk - j0);
      std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = -1;
      for (std::int64_t j = 0; j < nk; ++j) {
        const std::int64_t pos = s.relative ? j0 + j
                                            : p.key_positions.At(s.batch, s.k0 + j0 + j,
                                                                 p.dims.key_len);
        plan.kpos[static_cast<std::size_t>(tile * plan.bk + j)] = pos;
        plan.kposf[static_cast<std::size_t>(tile * plan.ldk + j)] = static_cast<float>(pos);
        lo = std::min(lo, pos);
        hi = std::max(hi, pos);
      }
      plan.rmin[static_cast<std::size_t>(tile)] = lo;
      plan.rmax[static_cast<std::size_t>(tile)] = hi;
      bool consecutive = true;
      const std::int64_t* kp = &plan.kpos[static_cast<std::size_t>(tile * plan.bk)];
      for (std::int64_t j = 1; j < nk; ++j) consecutive = consecutive && kp[j] == kp[0] + j;
      plan.consecutive[static_cast<std::size_t>(tile)] = consecutive ? 1 : 0;
    }
  }
  return plan;
}

// Rotates n float32 rows of D by their positions; consecutive positions go
// through ApplyRope's Offset path (angle addition between directly computed
// rows) instead of one direct float64 SinCos per row and frequency.
void RotateRows(const RopeParams& rope, float* tile, std::int64_t n, std::int64_t dim,
                const std::int64_t* pos, const Context& serial) {
  bool consecutive = true;
  for (std::int64_t i = 1; i < n; ++i) consecutive = consecutive && pos[i] == pos[0] + i;
  if (!consecutive) return RotateTile(rope, tile, n, dim, pos, serial);
  ApplyRope(rope, TensorView::Contiguous(tile, DType::kFloat32, {1, n, 1, dim}),
            AttentionLayout::kBSHD, Positions::Offset(pos[0]), RopeDirection::kForward, nullptr,
            serial);
}

// Packs key tile t of unit (segment s, kv head hk) at dst.
void PackKeyTile(const Problem& p, const Plan& plan, const Segment& s, std::int64_t tile,
                 std::int64_t t, std::int64_t hk, const TensorView& k, const TensorView& v,
                 Work& w, const Context& serial, float* dst) {
  const std::int64_t D = plan.D, ldk = plan.ldk, ldv = plan.ldv, j0 = t * plan.bk;
  const std::int64_t nk = std::min(plan.bk, s.nk - j0);
  LoadRows(k, p.kd, s.batch, hk, s.k0 + j0, nk, w.k.data(), D);
  if (p.kind == Kind::kRope && p.rotate_keys) {
    RotateRows(p.rope, w.k.data(), nk, D, &plan.kpos[static_cast<std::size_t>(tile * plan.bk)],
               serial);
  }
  // K^T [D, ldk]; columns [nk, ldk) zero so that no stale key reaches a logit.
  for (std::int64_t x = 0; x < D; ++x) {
    float* col = dst + x * ldk;
    for (std::int64_t j = 0; j < nk; ++j) col[j] = w.k[static_cast<std::size_t>(j * D + x)];
    std::fill(col + nk, col + ldk, 0.0f);
  }
  float* vt = dst + D * ldk;
  LoadRows(v, p.vd, s.batch, hk, s.k0 + j0, nk, vt, ldv);
  for (std::int64_t j = 0; j < nk; ++j) std::fill(vt + j * ldv + plan.Dv, vt + (j + 1) * ldv, 0.0f);
  if (plan.bf16) {  // K^T as bfloat16 pairs [D / 2, ldk, 2] (exact: k holds bfloat16 values)
    auto* kb = reinterpret_cast<std::uint16_t*>(vt + plan.bk * ldv);
    for (std::int64_t x = 0; x < D; ++x) {
      const float* col = dst + x * ldk;
      std::uint16_t* out = kb + (x / 2) * 2 * ldk + (x % 2);
      for (std::int64_t j = 0; j < ldk; ++j) out[2 * j] = FloatToBF16(col[j]).bits;
    }
  }
}

// The position term (and mask) of row i into w.bias[0, nk): the unscaled
// bias, or for Shaw the scaled content term scale * q_i . a^K[idx].
void BiasRow(const Problem& p, const Plan& plan, std::int64_t h, const float* qi, std::int64_t qp,
             const std::int64_t* kpos, std::int64_t nk, bool all_visible, const float* lut,
             std::int64_t lut_lo, float* bias) {
  switch (p.kind) {
    case Kind::kAlibi: {
      const float slope = p.slopes[static_cast<std::size_t>(h)];
      for (std::int64_t j = 0; j < nk; ++j) bias[j] = -slope * static_cast<float>(std::llabs(qp - kpos[j]));
      break;
    }
    case Kind::kT5:
      if (lut != nullptr) {
        for (std::int64_t j = 0; j < nk; ++j) bias[j] = lut[kpos[j] - qp - lut_lo];
      } else {
        for (std::int64_t j = 0; j < nk; ++j) bias[j] = p.t5->Bias(h, qp, kpos[j]);
      }
      break;
    case Kind::kShaw:
      for (std::int64_t j = 0; j < nk; ++j) {
        const float* a = &p.a_key[static_cast<std::size_t>(ShawIndex(p.shaw_clip, qp, kpos[j]) * plan.D)];
        bias[j] = p.scale * Dot(qi, a, plan.D);
      }
      break;
    default:
      std::fill(bias, bias + nk, 0.0f);
      break;
  }
  if (!all_visible) {
    for (std::int64_t j = 0; j < nk; ++j) {
      if (!p.Visible(qp, kpos[j])) bias[j] = kNegInf;
    }
  }
  std::fill(bias + nk, bias + plan.ldk, 0.0f);
}

// One task: query tile [i0, i0 + nq) of segment s, query head h.
void RunQueryTile(const Problem& p, const Plan& plan, const Segment& s, std::int64_t si,
                  std::int64_t h, std::int64_t i0, const float* packed, const TileOps& ops,
                  const RowOps& rows, const TensorView& q, const TensorView& out, Work& w,
                  const Context& serial) {
  const std::int64_t D = plan.D, Dv = plan.Dv, ldk = plan.ldk, ldv = plan.ldv;
  const std::int64_t nq = std::min(plan.bq, s.nq - i0);
  LoadRows(q, p.qd, s.batch, h, s.q0 + i0, nq, w.q.data(), D);
  std::int64_t pmin = std::numeric_limits<std::int64_t>::max(), pmax = -1;
  for (std::int64_t i = 0; i < nq; ++i) {
    const std::int64_t pos = s.relative ? s.q_pos0 + i0 + i
                                        : p.query_positions.At(s.batch, s.q0 + i0 + i, p.dims.query_len);
    w.qpos[static_cast<std::size_t>(i)] = pos;
    pmin = std::min(pmin, pos);
    pmax = std::max(pmax, pos);
  }
  if (p.kind == Kind::kRope) RotateRows(p.rope, w.q.data(), nq, D, w.qpos.data(), serial);
  if (plan.bf16) {
    for (std::int64_t i = 0; i < nq * D / 2; ++i) {
      w.q_pairs[static_cast<std::size_t>(i)] =
          static_cast<std::uint32_t>(FloatToBF16(w.q[static_cast<std::size_t>(2 * i)]).bits) |
          static_cast<std::uint32_t>(FloatToBF16(w.q[static_cast<std::size_t>(2 * i + 1)]).bits) << 16;
    }
  }
  std::fill(w.m.begin(), w.m.begin() + nq, kNegInf);
  std::fill(w.l.begin(), w.l.begin() + nq, 0.0f);
  std::fill(w.acc.begin(), w.acc.begin() + nq * ldv, 0.0f);
  const bool shaw = p.kind == Kind::kShaw;
  const float slope = p.kind == Kind::kAlibi ? p.slopes[static_cast<std::size_t>(h)] : 0.0f;
  const std::int64_t lut_cap = static_cast<std::int64_t>(w.lut.size()) - ldk;
  for (std::int64_t t = 0; t < plan.KeyTiles(s); ++t) {
    const std::int64_t tile = plan.tile_base[static_cast<std::size_t>(si)] + t;
    const std::int64_t rmin = plan.rmin[static_cast<std::size_t>(tile)];
    const std::int64_t rmax = plan.rmax[static_cast<std::size_t>(tile)];
    if (p.TileHidden(pmin, pmax, rmin, rmax)) continue;
    const bool all_visible = p.TileVisible(pmin, pmax, rmin, rmax);
    const std::int64_t nk = std::min(plan.bk, s.nk - t * plan.bk);
    const float* kt = packed + t * plan.tile_floats;
    const float* vt = kt + D * ldk;
    const std::int64_t* kpos = &plan.kpos[static_cast<std::size_t>(tile * plan.bk)];
    const float* kposf = &plan.kposf[static_cast<std::size_t>(tile * ldk)];
    const bool consecutive = plan.consecutive[static_cast<std::size_t>(tile)] != 0;
    // T5: one bucket look-up per distance in the tile pair's range.
    const float* lut = nullptr;
    const std::int64_t lut_lo = rmin - pmax;
    // (The table holds ldk more entries than lut_cap: a row window may read
    // up to ldk entries past the last distance; the kernel masks them.)
    if (p.kind == Kind::kT5 && rmax - pmin - lut_lo + 1 <= lut_cap) {
      for (std::int64_t dlt = lut_lo; dlt <= rmax - pmin; ++dlt) {
        w.lut[static_cast<std::size_t>(dlt - lut_lo)] = p.t5->Bias(h, pmax, pmax + dlt);
      }
      lut = w.lut.data();
    }
    float* sc = w.s.data();
    if (plan.bf16) {
      kernels::simd::FlashTileLogitsBf16(
          w.q_pairs.data(), reinterpret_cast<const std::uint16_t*>(vt + plan.bk * ldv), nq, D, ldk, sc);
    } else {
      ops.Logits(w.q.data(), kt, nq, D, ldk, sc);
    }
    for (std::int64_t i = 0; i < nq; ++i) {
      float* row = sc + i * ldk;
      const std::int64_t qp = w.qpos[static_cast<std::size_t>(i)];
      float row_max;
      if (all_visible && (p.kind == Kind::kNone || p.kind == Kind::kAbsolute || p.kind == Kind::kRope)) {
        row_max = rows.ScaleRow(row, nk, ldk, p.scale, nullptr);
      } else if (all_visible && p.kind == Kind::kAlibi) {
        row_max = rows.ScaleAlibiRow(row, nk, ldk, p.scale, slope, static_cast<float>(qp), kposf);
      } else if (all_visible && lut != nullptr && consecutive) {
        // Consecutive keys: the bias row is a window of the lookup table.
        row_max = rows.ScaleRow(row, nk, ldk, p.scale, lut + (kpos[0] - qp - lut_lo));
      } else {
        BiasRow(p, plan, h, w.q.data() + i * D, qp, kpos, nk, all_visible, lut, lut_lo,
                w.bias.data());
        row_max = rows.ScaleRow(row, nk, ldk, p.scale, w.bias.data());
      }
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
      const float sum = ops.ExpRow(row, ldk, m_new);
      float& l = w.l[static_cast<std::size_t>(i)];
      l = l * alpha + sum;
      if (shaw) {  // rescale now, then add the a^V terms; PV adds plain P.V
        float* acc = w.acc.data() + i * ldv;
        for (std::int64_t x = 0; x < ldv; ++x) acc[x] *= alpha;
        alpha = 1.0f;
        for (std::int64_t j = 0; j < nk; ++j) {
          const float pj = row[j];
          if (pj == 0.0f) continue;
          const float* av = &p.a_value[static_cast<std::size_t>(ShawIndex(p.shaw_clip, qp, kpos[j]) * Dv)];
          for (std::int64_t x = 0; x < Dv; ++x) acc[x] += pj * av[x];
        }
      }
    }
    rows.PVScaled(sc, ldk, vt, nq, nk, ldv, w.alpha.data(), w.acc.data());
  }
  const auto& od = p.od;
  for (std::int64_t i = 0; i < nq; ++i) {
    const float l = w.l[static_cast<std::size_t>(i)];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const float* acc = w.acc.data() + i * ldv;
    const std::int64_t base =
        s.batch * od.stride_batch + h * od.stride_head + (s.q0 + i0 + i) * od.stride_seq;
    if (p.lse.data != nullptr) {  // log-sum-exp for the backward; -inf: no visible key
      p.lse.As<float>()[s.batch * p.lse.strides[0] + h * p.lse.strides[1] +
                        (s.q0 + i0 + i) * p.lse.strides[2]] =
          l > 0.0f ? w.m[static_cast<std::size_t>(i)] + std::log(l) : kNegInf;
    }
    if (out.dtype == DType::kFloat32) {
      float* dst = out.As<float>() + base;
      for (std::int64_t x = 0; x < Dv; ++x) dst[x * od.stride_dim] = acc[x] * inv;
    } else {
      for (std::int64_t x = 0; x < Dv; ++x) {
        StoreFromDouble(out.data, out.dtype, base + x * od.stride_dim,
                        static_cast<double>(acc[x] * inv));
      }
    }
  }
}

// Index of the entry of `prefix` (nondecreasing, prefix[0] = 0) whose range
// [prefix[u], prefix[u + 1]) holds task.
std::size_t Locate(const std::vector<std::int64_t>& prefix, std::int64_t task) {
  return static_cast<std::size_t>(std::upper_bound(prefix.begin(), prefix.end(), task) -
                                  prefix.begin() - 1);
}

}  // namespace

void RunSegments(const Problem& p, const std::vector<Segment>& segs, const TensorView& q,
                const TensorView& k, const TensorView& v, const TensorView& out,
                const FlashAttentionOptions& options, const Context& ctx) {
  // bfloat16 dot products need q and k that are bfloat16 values: inputs in
  // bfloat16 and no RoPE rotation in float32.
  const bool bf16 = ctx.backend() != Backend::kScalar && q.dtype == DType::kBFloat16 &&
                    k.dtype == DType::kBFloat16 && p.kind != Kind::kRope &&
                    p.dims.head_dim % 2 == 0 && kernels::simd::FlashBf16DotAvailable();
  const Plan plan = MakePlan(p, segs, options, bf16);
  const std::int64_t group = p.dims.Group();
  // Units (segment, kv head) with queries, cut into groups under the budget.
  struct Unit {
    std::size_t segment;
    std::int64_t hk;
  };
  std::vector<std::vector<Unit>> groups;
  std::int64_t group_floats = 0, max_floats = 0;
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
      max_floats = std::max(max_floats, group_floats);
    }
  }
  if (groups.empty()) return;
  const TileOps ops{ctx.backend() != Backend::kScalar};
  const RowOps rows{ctx.backend() != Backend::kScalar};
  std::vector<float> packed(static_cast<std::size_t>(max_floats));
  std::vector<Work> work(static_cast<std::size_t>(ctx.num_threads()));
  std::vector<Context> serial;
  serial.reserve(work.size());
  const std::int64_t lut_size = 4 * (plan.bq + plan.bk);
  for (Work& w : work) {
    w.q.resize(static_cast<std::size_t>(plan.bq * plan.D));
    w.k.resize(static_cast<std::size_t>(plan.bk * plan.D));
    w.s.resize(static_cast<std::size_t>(plan.bq * plan.ldk));
    w.acc.resize(static_cast<std::size_t>(plan.bq * plan.ldv));
    w.m.resize(static_cast<std::size_t>(plan.bq));
    w.l.resize(static_cast<std::size_t>(plan.bq));
    w.alpha.resize(static_cast<std::size_t>(plan.bq));
    w.bias.resize(static_cast<std::size_t>(plan.ldk));
    w.lut.assign(p.kind == Kind::kT5 ? static_cast<std::size_t>(lut_size + plan.ldk) : 0, 0.0f);
    w.qpos.resize(static_cast<std::size_t>(plan.bq));
    w.q_pairs.resize(bf16 ? static_cast<std::size_t>(plan.bq * plan.D / 2) : 0);
    serial.emplace_back(1, ctx.backend());
  }
  for (const std::vector<Unit>& units : groups) {
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
    ctx.ParallelFor(pack_prefix.back(), [&](std::int64_t task, int worker) {
      const std::size_t ui = Locate(pack_prefix, task);
      const Unit& u = units[ui];
      const std::int64_t t = task - pack_prefix[ui];
      const std::int64_t tile = plan.tile_base[u.segment] + t;
      PackKeyTile(p, plan, segs[u.segment], tile, t, u.hk, k, v, work[static_cast<std::size_t>(worker)],
                  serial[static_cast<std::size_t>(worker)],
                  packed.data() + offset[ui] + t * plan.tile_floats);
    });
    ctx.ParallelFor(query_prefix.back(), [&](std::int64_t task, int worker) {
      const std::size_t ui = Locate(query_prefix, task);
      const Unit& u = units[ui];
      const Segment& s = segs[u.segment];
      const std::int64_t q_tiles = plan.QueryTiles(s), local = task - query_prefix[ui];
      const std::int64_t h = u.hk * group + local / q_tiles;
      // Last query tiles first: under a causal mask they see the most keys.
      const std::int64_t t = q_tiles - 1 - local % q_tiles;
      RunQueryTile(p, plan, s, static_cast<std::int64_t>(u.segment), h, t * plan.bq,
                   packed.data() + offset[ui], ops, rows, q, out,
                   work[static_cast<std::size_t>(worker)], serial[static_cast<std::size_t>(worker)]);
    });
  }
}

}  // namespace posenc::flash_internal
