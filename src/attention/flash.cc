// Fused (flash) attention on the CPU (include/posenc/flash_attention.h).
//
// FlashAttention-2 forward (Dao 2023, Alg. 1): one task per (batch, head,
// query tile); inside a task the key tiles are visited in order with an
// online softmax (running max m_i, running sum l_i, accumulator O_i rescaled
// by exp(m_old - m_new)). Position terms come from the (query, key) positions
// of the tile: ALiBi slopes, T5 buckets (T5Bucketer) + table, Shaw clipped
// indices (ShawIndex) + float32 copies of a^K / a^V; RoPE rotates float32
// tile copies with posenc::ApplyRope. Tiles fully hidden by the causal mask
// or the sliding window (decided from the tile's min/max positions) are
// skipped; tiles where every pair is visible skip the per-pair mask. Scratch
// per worker: [Bq, Bk] logits plus q/k/v/acc tiles; never an [Sq, Sk] array.
// Float32 arithmetic throughout. The q.k logits (K tile transposed to
// [D, Bk]), the row exponentials and the P.V accumulation run in the Highway
// kernels of kernels/simd/flash.h (Backend::kScalar: plain loops here); the
// position terms and masks are scalar loops per row.
// Error bound: within 2x a plain float32 attention's error vs float64 (see
// tests/unit/flash_attention_test.cc). Positions [0, 2^24).
#include "posenc/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "attention/policies.h"
#include "kernels/simd/flash.h"
#include "posenc/error.h"

namespace posenc {

std::string_view FlashRopeKeysName(FlashRopeKeys keys) {
  return keys == FlashRopeKeys::kRotate ? "rotate" : "pre_rotated";
}

FlashRopeKeys ParseFlashRopeKeys(std::string_view text, std::string_view arg) {
  if (text == "rotate") return FlashRopeKeys::kRotate;
  if (text == "pre_rotated") return FlashRopeKeys::kPreRotated;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "one of rotate, pre_rotated"));
}

void ValidateFlashAttentionOptions(const FlashAttentionOptions& options) {
  Require(options.query_tile >= 1 && options.query_tile <= 4096, "query_tile", options.query_tile,
          "a tile of 1 to 4096 query rows");
  Require(options.key_tile >= 1 && options.key_tile <= 4096, "key_tile", options.key_tile,
          "a tile of 1 to 4096 key rows");
}

namespace {

using Kind = PositionScheme::Kind;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

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
  std::vector<float> slopes;              // ALiBi, [H]
  const T5BiasTable* t5 = nullptr;        // T5
  std::int64_t shaw_clip = 0;             // Shaw
  std::vector<float> a_key, a_value;      // Shaw, [2k + 1, D], [2k + 1, Dv]

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

std::vector<float> ToFloats(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

Problem Setup(const AttentionParams& params, const TensorView& q, const TensorView& k,
              const TensorView& v, const TensorView& out, const FlashAttentionOptions& options) {
  ValidateFlashAttentionOptions(options);
  const Kind kind = params.scheme.kind;
  Require(kind != Kind::kTransformerXL && kind != Kind::kDeBERTa, "scheme.kind",
          PositionSchemeKindName(kind),
          "one of none, absolute, rope, alibi, t5, shaw (flash attention; use "
          "AttentionReference for transformer_xl and deberta)");
  Problem p;
  p.kind = kind;
  attention_internal::CallShape shape = attention_internal::ValidateCallShape(params, q, k, v);
  p.qd = shape.qd;
  p.kd = shape.kd;
  p.vd = shape.vd;
  p.dims = shape.dims;
  p.window = shape.window;
  p.query_positions = shape.query_positions;
  p.key_positions = shape.key_positions;
  const auto& qd = p.qd;
  const auto& d = p.dims;
  p.scale = static_cast<float>(EffectiveAttentionScale(params, qd.head_dim));
  p.mask = params.mask;
  // The reference's policy validates the scheme against the dims (messages
  // name "scheme.<field>") and gives float64 copies of the Shaw tables.
  const attention_internal::Policy policy(params.scheme, d);
  (void)policy;
  switch (kind) {
    case Kind::kRope:
      p.rope = params.scheme.rope;
      p.rotate_keys = options.rope_keys == FlashRopeKeys::kRotate;
      break;
    case Kind::kAlibi:
      for (double s : params.scheme.alibi.slopes) p.slopes.push_back(static_cast<float>(s));
      break;
    case Kind::kT5:
      p.t5 = params.scheme.t5.table;
      break;
    case Kind::kShaw: {
      const auto& s = params.scheme.shaw;
      p.shaw_clip = s.params.clip;
      const std::int64_t rows = s.params.TableRows();
      p.a_key = ToFloats(attention_internal::CopyTable(s.a_key, "scheme.shaw.a_key", {rows, d.head_dim}));
      p.a_value = ToFloats(
          attention_internal::CopyTable(s.a_value, "scheme.shaw.a_value", {rows, d.value_dim}));
      break;
    }
    default:
      break;
  }
  ValidateView(out, "out", 4, /*writable=*/true);
  p.od = GetAttentionDims(out, params.layout, "out");
  const auto& od = p.od;
  Require(od.batch == d.batch && od.seq == d.query_len && od.heads == d.heads &&
              od.head_dim == d.value_dim,
          "out", out.Describe(),
          "[batch, seq, heads, dim] = [" + std::to_string(d.batch) + ", " +
              std::to_string(d.query_len) + ", " + std::to_string(d.heads) + ", " +
              std::to_string(d.value_dim) + "] in layout " + std::string(LayoutName(params.layout)));
  RequireNoOverlap(out, "out", q, "q", /*inplace_allowed=*/false);
  RequireNoOverlap(out, "out", k, "k", /*inplace_allowed=*/false);
  RequireNoOverlap(out, "out", v, "v", /*inplace_allowed=*/false);
  return p;
}

// Rows [s0, s0 + n) of head h of batch b of a rank-4 view, converted to
// float32 rows of `ld` >= dim floats (columns >= dim untouched).
void LoadRows(const TensorView& view, const AttentionDims& ad, std::int64_t b, std::int64_t h,
              std::int64_t s0, std::int64_t n, float* dst, std::int64_t ld) {
  const std::int64_t dim = ad.head_dim;
  for (std::int64_t s = 0; s < n; ++s) {
    const std::int64_t base = b * ad.stride_batch + h * ad.stride_head + (s0 + s) * ad.stride_seq;
    float* row = dst + s * ld;
    if (view.dtype == DType::kFloat32 && ad.stride_dim == 1) {
      const float* src = view.As<const float>() + base;
      std::copy(src, src + dim, row);
    } else if (view.dtype == DType::kFloat32) {
      const float* src = view.As<const float>() + base;
      for (std::int64_t x = 0; x < dim; ++x) row[x] = src[x * ad.stride_dim];
    } else if (view.dtype == DType::kBFloat16) {
      const BFloat16* src = view.As<const BFloat16>() + base;
      for (std::int64_t x = 0; x < dim; ++x) row[x] = BF16ToFloat(src[x * ad.stride_dim]);
    } else {
      for (std::int64_t x = 0; x < dim; ++x) {
        row[x] = static_cast<float>(LoadAsDouble(view.data, view.dtype, base + x * ad.stride_dim));
      }
    }
  }
}

using kernels::simd::kFlashPad;

std::int64_t Pad(std::int64_t n) { return (n + kFlashPad - 1) / kFlashPad * kFlashPad; }

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

// Rotates a [n, D] float32 tile in place by per-row positions.
void RotateTile(const RopeParams& rope, float* tile, std::int64_t n, std::int64_t dim,
                const std::int64_t* pos, const Context& serial) {
  ApplyRope(rope, TensorView::Contiguous(tile, DType::kFloat32, {1, n, 1, dim}),
            AttentionLayout::kBSHD, Positions::Ids(pos, n), RopeDirection::kForward, nullptr,
            serial);
}

float Dot(const float* a, const float* b, std::int64_t n) {
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
  void Logits(const float* q, const float* kt, std::int64_t nq, std::int64_t dim,
              std::int64_t ld, float* s) const {
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

// One task: query tile [i0, i0 + nq) of head h of batch b.
void RunQueryTile(const Problem& p, const FlashAttentionOptions& opt, const TileOps& ops,
                  const TensorView& q, const TensorView& k, const TensorView& v,
                  const TensorView& out, std::int64_t b, std::int64_t h, std::int64_t i0,
                  std::int64_t nq, Scratch& w, const Context& serial) {
  const auto& d = p.dims;
  const std::int64_t D = d.head_dim, Dv = d.value_dim, bk = opt.key_tile;
  const std::int64_t ldk = Pad(bk), ldv = Pad(Dv);
  const std::int64_t hk = h / d.Group();
  LoadRows(q, p.qd, b, h, i0, nq, w.q.data(), D);
  std::int64_t pmin = std::numeric_limits<std::int64_t>::max(), pmax = -1;
  for (std::int64_t i = 0; i < nq; ++i) {
    const std::int64_t pos = p.query_positions.At(b, i0 + i, d.query_len);
    w.qpos[static_cast<std::size_t>(i)] = pos;
    pmin = std::min(pmin, pos);
    pmax = std::max(pmax, pos);
  }
  if (p.kind == Kind::kRope) RotateTile(p.rope, w.q.data(), nq, D, w.qpos.data(), serial);
  std::fill(w.m.begin(), w.m.begin() + nq, kNegInf);
  std::fill(w.l.begin(), w.l.begin() + nq, 0.0f);
  std::fill(w.acc.begin(), w.acc.begin() + nq * ldv, 0.0f);
  for (std::int64_t j0 = 0; j0 < d.key_len; j0 += bk) {
    const std::int64_t nk = std::min(bk, d.key_len - j0);
    std::int64_t rmin = std::numeric_limits<std::int64_t>::max(), rmax = -1;
    for (std::int64_t j = 0; j < nk; ++j) {
      const std::int64_t pos = p.key_positions.At(b, j0 + j, d.key_len);
      w.kpos[static_cast<std::size_t>(j)] = pos;
      rmin = std::min(rmin, pos);
      rmax = std::max(rmax, pos);
    }
    if (p.TileHidden(pmin, pmax, rmin, rmax)) continue;
    const bool all_visible = p.TileVisible(pmin, pmax, rmin, rmax);
    LoadRows(k, p.kd, b, hk, j0, nk, w.k.data(), D);
    if (p.kind == Kind::kRope && p.rotate_keys) {
      RotateTile(p.rope, w.k.data(), nk, D, w.kpos.data(), serial);
    }
    // Transpose to [D, ldk]; columns [nk, ldk) of a short last tile are
    // zeroed so that stale keys never reach a logit.
    for (std::int64_t x = 0; x < D; ++x) {
      float* col = &w.kt[static_cast<std::size_t>(x * ldk)];
      for (std::int64_t j = 0; j < nk; ++j) col[j] = w.k[static_cast<std::size_t>(j * D + x)];
      std::fill(col + nk, col + ldk, 0.0f);
    }
    LoadRows(v, p.vd, b, hk, j0, nk, w.v.data(), ldv);
    float* s = w.s.data();
    ops.Logits(w.q.data(), w.kt.data(), nq, D, ldk, s);
    for (std::int64_t i = 0; i < nq; ++i) {
      float* row = s + i * ldk;
      const float* qi = w.q.data() + i * D;
      const std::int64_t qp = w.qpos[static_cast<std::size_t>(i)];
      const std::int64_t* kpos = w.kpos.data();
      // Position terms, one loop per scheme (vectorisable), then the mask.
      switch (p.kind) {
        case Kind::kShaw:
          for (std::int64_t j = 0; j < nk; ++j) {
            const float* a = &p.a_key[static_cast<std::size_t>(ShawIndex(p.shaw_clip, qp, kpos[j]) * D)];
            row[j] = (row[j] + Dot(qi, a, D)) * p.scale;
          }
          break;
        case Kind::kAlibi: {
          const float slope = p.slopes[static_cast<std::size_t>(h)];
          for (std::int64_t j = 0; j < nk; ++j) {
            row[j] = row[j] * p.scale - slope * static_cast<float>(std::llabs(qp - kpos[j]));
          }
          break;
        }
        case Kind::kT5:
          for (std::int64_t j = 0; j < nk; ++j) row[j] = row[j] * p.scale + p.t5->Bias(h, qp, kpos[j]);
          break;
        default:
          for (std::int64_t j = 0; j < nk; ++j) row[j] *= p.scale;
          break;
      }
      if (!all_visible) {
        for (std::int64_t j = 0; j < nk; ++j) {
          if (!p.Visible(qp, kpos[j])) row[j] = kNegInf;
        }
      }
      float row_max = kNegInf;
      for (std::int64_t j = 0; j < nk; ++j) row_max = std::max(row_max, row[j]);
      std::fill(row + nk, row + ldk, kNegInf);
      float& m = w.m[static_cast<std::size_t>(i)];
      if (row_max == kNegInf) {  // nothing visible in this tile for row i
        std::fill(row, row + ldk, 0.0f);
        continue;
      }
      const float m_new = std::max(m, row_max);
      const float alpha = std::exp(m - m_new);  // 0 when m was -inf
      m = m_new;
      float* acc = w.acc.data() + i * ldv;
      if (alpha != 1.0f) {
        for (std::int64_t x = 0; x < ldv; ++x) acc[x] *= alpha;
      }
      const float sum = ops.ExpRow(row, ldk, m_new);
      float& l = w.l[static_cast<std::size_t>(i)];
      l = l * alpha + sum;
      if (p.kind == Kind::kShaw) {
        for (std::int64_t j = 0; j < nk; ++j) {
          const float pj = row[j];
          if (pj == 0.0f) continue;
          const float* av = &p.a_value[static_cast<std::size_t>(
              ShawIndex(p.shaw_clip, qp, w.kpos[static_cast<std::size_t>(j)]) * Dv)];
          for (std::int64_t x = 0; x < Dv; ++x) acc[x] += pj * av[x];
        }
      }
    }
    ops.PV(s, ldk, w.v.data(), nq, nk, ldv, w.acc.data());
  }
  const auto& od = p.od;
  for (std::int64_t i = 0; i < nq; ++i) {
    const float l = w.l[static_cast<std::size_t>(i)];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const float* acc = w.acc.data() + i * ldv;
    const std::int64_t base = b * od.stride_batch + h * od.stride_head + (i0 + i) * od.stride_seq;
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

}  // namespace

void FlashAttention(const AttentionParams& params, const TensorView& q, const TensorView& k,
                    const TensorView& v, const TensorView& out,
                    const FlashAttentionOptions& options, const Context& ctx) {
  const Problem p = Setup(params, q, k, v, out, options);
  const auto& d = p.dims;
  const std::int64_t bq = std::min(options.query_tile, d.query_len);
  const std::int64_t bk = std::min(options.key_tile, d.key_len);
  FlashAttentionOptions opt = options;
  opt.query_tile = bq;
  opt.key_tile = bk;
  const std::int64_t q_tiles = (d.query_len + bq - 1) / bq;
  const TileOps ops{ctx.backend() != Backend::kScalar};
  std::vector<Scratch> scratch(static_cast<std::size_t>(ctx.num_threads()));
  std::vector<Context> serial;
  serial.reserve(scratch.size());
  for (std::size_t w = 0; w < scratch.size(); ++w) {
    scratch[w].Resize(bq, bk, d.head_dim, d.value_dim);
    serial.emplace_back(1, ctx.backend());
  }
  ctx.ParallelFor(d.batch * d.heads * q_tiles, [&](std::int64_t task, int worker) {
    const std::int64_t t = task % q_tiles;
    const std::int64_t bh = task / q_tiles;
    const std::int64_t b = bh / d.heads, h = bh % d.heads;
    const std::int64_t i0 = t * bq;
    RunQueryTile(p, opt, ops, q, k, v, out, b, h, i0, std::min(bq, d.query_len - i0),
                 scratch[static_cast<std::size_t>(worker)], serial[static_cast<std::size_t>(worker)]);
  });
}

}  // namespace posenc
