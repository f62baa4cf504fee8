// Per-target ALiBi and T5 bias kernels (included once per Highway target by
// bias.cc). Design, numerics and coverage: kernels/simd/bias.h.

#if defined(POSENC_KERNELS_SIMD_BIAS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_SIMD_BIAS_INL_H_
#undef POSENC_KERNELS_SIMD_BIAS_INL_H_
#else
#define POSENC_KERNELS_SIMD_BIAS_INL_H_
#endif

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "kernels/simd/bias.h"
#include "kernels/simd/simd_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::kernels::simd {
namespace HWY_NAMESPACE {

namespace bias_detail {

// Rows per line (a task's row tile) and keys per line chunk.
constexpr std::int64_t kRowTile = 64;
constexpr std::int64_t kColChunk = 4096;
// Longest line, plus room for full-vector stores past its end.
constexpr std::int64_t kLineMax = kRowTile + kColChunk - 1 + kPadLanes;
// Boundary margin of the vector T5 buckets (relative; see bias.h).
constexpr float kBucketMargin = 0x1p-19f;

template <DType kT>
inline constexpr std::int64_t kBytes = static_cast<std::int64_t>(DTypeSize(kT));

// Stores Lanes(df) float32 values at p in dtype kT (not kFloat64).
template <DType kT, class DF>
HWY_INLINE void StoreFloat(DF df, hn::Vec<DF> v, char* p) {
  if constexpr (kT == DType::kFloat32) {
    StoreF<Store::kF32>(df, v, p);
  } else if constexpr (kT == DType::kBFloat16) {
    StoreF<Store::kBF16>(df, v, p);
  } else {
    static_assert(kT == DType::kFloat16, "StoreFloat: 32/16-bit dtypes only");
    StoreF<Store::kF16>(df, v, p);
  }
}

// float64 -> float32 with IEEE round-to-nearest-even, overflow to
// +-infinity (static_cast<float>). The x86 targets' DemoteTo is cvtpd2ps;
// Highway's portable targets saturate infinities to +-FLT_MAX instead, so
// they convert lane by lane.
template <class DD>
HWY_INLINE hn::Vec<hn::Rebind<float, DD>> DemoteIeee(DD dd, hn::Vec<DD> v) {
  const hn::Rebind<float, DD> df;
#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
  alignas(64) double in[kPadLanes];
  alignas(64) float out[kPadLanes];
  hn::StoreU(v, dd, in);
  for (std::size_t i = 0; i < hn::Lanes(dd); ++i) out[i] = static_cast<float>(in[i]);
  return hn::LoadU(df, out);
#else
  (void)dd;
  return hn::DemoteTo(df, v);
#endif
}

// Stores Lanes(dd) float64 values at p in dtype kT, rounded as
// StoreFromDouble does (float64 -> float32 -> 16 bits).
template <DType kT, class DD>
HWY_INLINE void StoreDouble(DD dd, hn::Vec<DD> v, char* p) {
  if constexpr (kT == DType::kFloat64) {
    hn::StoreU(v, dd, reinterpret_cast<double*>(p));
  } else {
    const hn::Rebind<float, DD> df;
    StoreFloat<kT>(df, DemoteIeee(dd, v), p);
  }
}

// line[t] = ALiBi bias at rel = key - query = rel0 + t, t < n (stores whole
// vectors: the line has kPadLanes elements of slack).
template <DType kT>
void AlibiLine(double slope, BiasMask mask, std::int64_t rel0, std::int64_t n, char* line) {
  const hn::ScalableTag<double> dd;
  const std::int64_t nl = static_cast<std::int64_t>(hn::Lanes(dd));
  const auto vslope = hn::Set(dd, slope);
  const auto zero = hn::Zero(dd);
  const auto ninf = hn::Set(dd, -std::numeric_limits<double>::infinity());
  const auto step = hn::Set(dd, static_cast<double>(nl));
  auto rel = hn::Iota(dd, static_cast<double>(rel0));  // exact: |rel| < 2^53
  for (std::int64_t t = 0; t < n; t += nl) {
    // 0.0 - slope * |d|: +0 on the diagonal, like AlibiBiasValue.
    auto v = hn::Sub(zero, hn::Mul(vslope, hn::Abs(rel)));
    if (mask == BiasMask::kCausal) v = hn::IfThenElse(hn::Gt(rel, zero), ninf, v);
    StoreDouble<kT>(dd, v, line + t * kBytes<kT>);
    rel = hn::Add(rel, step);
  }
}

// Buckets of rel[0..n) into out (rel and out hold n rounded up to a whole
// vector; the slack lanes are computed and ignored). Returns the number of
// lanes (< n) recomputed by the scalar reference.
std::int64_t BucketArray(const T5BucketSpec& s, const std::int64_t* rel, std::int64_t n,
                         std::int32_t* out) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const hn::Rebind<std::int32_t, decltype(dd)> di;
  const hn::Rebind<std::int64_t, decltype(dd)> dl;
  const std::int64_t nl = static_cast<std::int64_t>(hn::Lanes(dd));
  const bool bidir = s.sign == T5Sign::kBidirectional;
  const auto zero = hn::Zero(df);
  const auto one = hn::Set(df, 1.0f);
  const auto me = hn::Set(df, static_cast<float>(s.max_exact));
  const auto nbf = hn::Set(df, static_cast<float>(s.nb));
  const auto denom = hn::Set(df, s.log_denominator);
  const auto range = hn::Set(df, static_cast<float>(s.nb - s.max_exact));
  const auto cap = hn::Set(df, static_cast<float>(s.nb - 1 - s.max_exact));
  const auto margin = hn::Set(df, kBucketMargin);
  std::int64_t fallbacks = 0;
  for (std::int64_t t = 0; t < n; t += nl) {
    // float32(rel) as the scalar path's float(n): exact for |rel| <= 2^24.
    const auto r = hn::DemoteTo(df, hn::ConvertTo(dd, hn::LoadU(dl, rel + t)));
    const auto nabs = bidir ? hn::Abs(r) : hn::Max(hn::Neg(r), zero);
    const auto base = bidir ? hn::IfThenElseZero(hn::Gt(r, zero), nbf) : zero;
    const auto exact = hn::Lt(nabs, me);
    // HF: log(n / max_exact) / log(max_distance / max_exact) * (nb - max_exact),
    // float32, with the logarithm in float64 rounded once to float32.
    const auto ratio = hn::Div(hn::Max(nabs, me), me);
    const auto lg = hn::DemoteTo(df, hn::Log(dd, hn::PromoteTo(dd, ratio)));
    const auto scaled = hn::Mul(hn::Div(lg, denom), range);
    const auto large = hn::Add(me, hn::Trunc(hn::Min(scaled, cap)));
    const auto bucket = hn::Add(base, hn::IfThenElse(exact, nabs, large));
    hn::StoreU(hn::ConvertTo(di, bucket), di, out + t);
    const auto nearest = hn::Round(scaled);
    const auto near =
        hn::And(hn::Le(hn::Abs(hn::Sub(scaled, nearest)), hn::Mul(hn::Max(scaled, one), margin)),
                hn::Le(nearest, cap));
    const auto redo = hn::AndNot(exact, near);
    if (hn::AllFalse(df, redo)) continue;
    std::uint8_t bits[(kPadLanes + 7) / 8] = {};
    hn::StoreMaskBits(df, redo, bits);
    for (std::int64_t i = 0; i < nl && t + i < n; ++i) {
      if ((bits[i / 8] >> (i % 8)) & 1) {
        out[t + i] = static_cast<std::int32_t>(s.scalar_bucket(s.bucketer, rel[t + i]));
        ++fallbacks;
      }
    }
  }
  return fallbacks;
}

// Stores Lanes(df) float32 table values at element t of a line of dtype kT.
template <DType kT, class DF>
HWY_INLINE void StoreValues(DF df, hn::Vec<DF> v, char* line, std::int64_t t) {
  if constexpr (kT == DType::kFloat64) {
    const hn::Rebind<double, DF> dd;
    hn::StoreU(hn::PromoteTo(dd, v), dd, reinterpret_cast<double*>(line) + t);
  } else {
    StoreFloat<kT>(df, v, line + t * kBytes<kT>);
  }
}

// line[t] = table[buckets[t], head] in dtype kT, t < n. buckets holds n
// rounded up to a whole vector of valid buckets (BucketArray's slack).
template <DType kT>
void T5ValueLine(const T5TableSpec& spec, std::int64_t head, const std::int32_t* buckets,
                 std::int64_t n, char* line) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const hn::Rebind<std::int32_t, decltype(dd)> di;
  const std::int64_t nl = static_cast<std::int64_t>(hn::Lanes(dd));
  const std::int64_t padded = (n + nl - 1) / nl * nl;
  if (spec.num_buckets * spec.heads <= (std::int64_t{1} << 31) - 1) {
    // Vector gather: element offsets bucket * heads fit in int32.
    const auto vheads = hn::Set(di, static_cast<std::int32_t>(spec.heads));
    for (std::int64_t t = 0; t < padded; t += nl) {
      const auto idx = hn::Mul(hn::LoadU(di, buckets + t), vheads);
      StoreValues<kT>(df, hn::GatherIndex(df, spec.table + head, idx), line, t);
    }
    return;
  }
  alignas(64) float vals[kPadLanes];
  for (std::int64_t t = 0; t < padded; t += nl) {
    for (std::int64_t i = 0; i < nl; ++i) {
      vals[i] = spec.table[static_cast<std::int64_t>(buckets[t + i]) * spec.heads + head];
    }
    StoreValues<kT>(df, hn::LoadU(df, vals), line, t);
  }
}

// dst[c] += src[c], c < n (float or double).
template <typename T>
void AddRow(T* dst, const T* src, std::int64_t n) {
  const hn::ScalableTag<T> d;
  const std::int64_t nl = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t c = 0;
  for (; c + nl <= n; c += nl) {
    hn::StoreU(hn::Add(hn::LoadU(d, dst + c), hn::LoadU(d, src + c)), d, dst + c);
  }
  for (; c < n; ++c) dst[c] += src[c];
}

// Writes rows i < m of a run from one line: row i is the window
// [m-1-i, m-1-i+cw); out0 is row 0, column 0 of the window's destination.
template <DType kT>
void WriteRows(const char* line, std::int64_t m, std::int64_t cw, char* out0,
               std::int64_t row_stride, TileWrite write) {
  for (std::int64_t i = 0; i < m; ++i) {
    char* dst = out0 + i * row_stride * kBytes<kT>;
    const char* src = line + (m - 1 - i) * kBytes<kT>;
    if constexpr (kT == DType::kFloat32 || kT == DType::kFloat64) {
      using T = std::conditional_t<kT == DType::kFloat32, float, double>;
      if (write == TileWrite::kAdd) {
        AddRow(reinterpret_cast<T*>(dst), reinterpret_cast<const T*>(src), cw);
        continue;
      }
    }
    std::memcpy(dst, src, static_cast<std::size_t>(cw * kBytes<kT>));
  }
}

// The Toeplitz driver (bias.h): nq <= kRowTile query positions qp, keys
// key_first + c for c < cols, heads [h0, h1). prepare(rel0, len) runs once
// per run and column chunk; make_line(h, rel0, len, line) builds the line
// of head h. Cell (h, r, c) is out + ((h - h0) * hs + r * rs + c) elements.
template <DType kT, class Prepare, class MakeLine>
void ToeplitzBlock(const std::int64_t* qp, std::int64_t nq, std::int64_t key_first,
                   std::int64_t cols, std::int64_t h0, std::int64_t h1, char* out, std::int64_t hs,
                   std::int64_t rs, TileWrite write, Prepare&& prepare, MakeLine&& make_line) {
  alignas(64) char line[kLineMax * kBytes<kT>];
  for (std::int64_t a = 0; a < nq;) {
    std::int64_t b = a + 1;
    while (b < nq && qp[b] == qp[b - 1] + 1) ++b;  // run of consecutive positions
    const std::int64_t m = b - a;
    for (std::int64_t c0 = 0; c0 < cols; c0 += kColChunk) {
      const std::int64_t cw = std::min(kColChunk, cols - c0);
      // rel at line index t: (key_first + c0) - (qp[a] + m - 1) + t.
      const std::int64_t rel0 = key_first + c0 - qp[b - 1];
      const std::int64_t len = m + cw - 1;
      prepare(rel0, len);
      for (std::int64_t h = h0; h < h1; ++h) {
        make_line(h, rel0, len, line);
        WriteRows<kT>(line, m, cw, out + ((h - h0) * hs + a * rs + c0) * kBytes<kT>, rs, write);
      }
    }
    a = b;
  }
}

template <DType kT>
void AlibiRowsTyped(const AlibiRowsSpec& spec, void* out, std::int64_t hs, std::int64_t rs,
                    const Context& ctx) {
  const std::int64_t tiles = (spec.rows + kRowTile - 1) / kRowTile;
  ctx.ParallelFor(spec.num_heads * tiles, [&](std::int64_t task, int) {
    const std::int64_t h = task / tiles, r0 = (task % tiles) * kRowTile;
    const std::int64_t nq = std::min(kRowTile, spec.rows - r0);
    std::int64_t qp[kRowTile];
    for (std::int64_t r = 0; r < nq; ++r) qp[r] = spec.query_first + r0 + r;
    char* base = static_cast<char*>(out) + (h * hs + r0 * rs) * kBytes<kT>;
    const double slope = spec.slopes[h];
    ToeplitzBlock<kT>(
        qp, nq, spec.key_first, spec.cols, h, h + 1, base, hs, rs, TileWrite::kOverwrite,
        [](std::int64_t, std::int64_t) {},
        [&](std::int64_t, std::int64_t rel0, std::int64_t len, char* line) {
          AlibiLine<kT>(slope, spec.mask, rel0, len, line);
        });
  });
}

// Buckets shared by every head of a block: computed once per line.
struct BucketLine {
  alignas(64) std::int64_t rel[kLineMax];
  alignas(64) std::int32_t buckets[kLineMax];
  void Fill(const T5BucketSpec& s, std::int64_t rel0, std::int64_t len) {
    for (std::int64_t t = 0; t < len + kPadLanes && t < kLineMax; ++t) rel[t] = rel0 + t;
    BucketArray(s, rel, len, buckets);
  }
};

template <DType kT>
void T5Block(const T5TableSpec& spec, const std::int64_t* qp, std::int64_t nq,
             std::int64_t key_first, std::int64_t cols, std::int64_t h0, std::int64_t h1, char* out,
             std::int64_t hs, std::int64_t rs, TileWrite write) {
  BucketLine bl;
  ToeplitzBlock<kT>(
      qp, nq, key_first, cols, h0, h1, out, hs, rs, write,
      [&](std::int64_t rel0, std::int64_t len) { bl.Fill(spec.buckets, rel0, len); },
      [&](std::int64_t h, std::int64_t, std::int64_t len, char* line) {
        T5ValueLine<kT>(spec, h, bl.buckets, len, line);
      });
}

template <DType kT>
void T5FillRowsTyped(const T5TableSpec& spec, const Positions& qpos, std::int64_t rows,
                     std::int64_t cols, void* out, std::int64_t hs, std::int64_t rs,
                     const Context& ctx) {
  const std::int64_t tiles = (rows + kRowTile - 1) / kRowTile;
  // Heads share a tile's buckets; split them only when tiles are too few
  // to keep every thread busy.
  const std::int64_t want = 4 * static_cast<std::int64_t>(ctx.num_threads());
  const std::int64_t groups0 = std::clamp<std::int64_t>((want + tiles - 1) / tiles, 1, spec.heads);
  const std::int64_t per = (spec.heads + groups0 - 1) / groups0;
  const std::int64_t groups = (spec.heads + per - 1) / per;
  ctx.ParallelFor(tiles * groups, [&](std::int64_t task, int) {
    const std::int64_t r0 = (task / groups) * kRowTile, g = task % groups;
    const std::int64_t nq = std::min(kRowTile, rows - r0);
    const std::int64_t h0 = g * per, h1 = std::min(spec.heads, h0 + per);
    std::int64_t qp[kRowTile];
    for (std::int64_t r = 0; r < nq; ++r) qp[r] = qpos.At(0, r0 + r, rows);
    char* base = static_cast<char*>(out) + (h0 * hs + r0 * rs) * kBytes<kT>;
    T5Block<kT>(spec, qp, nq, 0, cols, h0, h1, base, hs, rs, TileWrite::kOverwrite);
  });
}

// T5 tile with key ids that are not consecutive: buckets element by element.
template <DType kT>
void T5TileScattered(const T5TableSpec& spec, std::int64_t head, const std::int64_t* qp,
                     std::int64_t nq, const std::int64_t* kp, std::int64_t nk, char* out,
                     std::int64_t ld, TileWrite write) {
  BucketLine bl;
  alignas(64) char line[kLineMax * kBytes<kT>];
  for (std::int64_t r = 0; r < nq; ++r) {
    for (std::int64_t c0 = 0; c0 < nk; c0 += kColChunk) {
      const std::int64_t cw = std::min(kColChunk, nk - c0);
      for (std::int64_t c = 0; c < cw; ++c) bl.rel[c] = kp[c0 + c] - qp[r];
      std::fill(bl.rel + cw, bl.rel + cw + kPadLanes, std::int64_t{0});
      BucketArray(spec.buckets, bl.rel, cw, bl.buckets);
      T5ValueLine<kT>(spec, head, bl.buckets, cw, line);
      WriteRows<kT>(line, 1, cw, out + (r * ld + c0) * kBytes<kT>, ld, write);
    }
  }
}

template <DType kT>
void T5TileTyped(const T5TableSpec& spec, std::int64_t head, const std::int64_t* qp,
                 std::int64_t nq, const std::int64_t* kp, std::int64_t nk, void* out,
                 std::int64_t ld, TileWrite write) {
  if (nq <= 0 || nk <= 0) return;  // an empty tile (the scalar loop writes nothing either)
  char* o = static_cast<char*>(out);
  bool consecutive = true;
  for (std::int64_t c = 1; c < nk && consecutive; ++c) consecutive = kp[c] == kp[0] + c;
  if (!consecutive) {
    T5TileScattered<kT>(spec, head, qp, nq, kp, nk, o, ld, write);
    return;
  }
  for (std::int64_t r0 = 0; r0 < nq; r0 += kRowTile) {
    const std::int64_t n = std::min(kRowTile, nq - r0);
    T5Block<kT>(spec, qp + r0, n, kp[0], nk, head, head + 1, o + r0 * ld * kBytes<kT>, 0, ld,
                write);
  }
}

}  // namespace bias_detail

void AlibiRowsImpl(const AlibiRowsSpec& spec, void* out, DType dtype, std::int64_t head_stride,
                   std::int64_t row_stride, const Context& ctx) {
  using bias_detail::AlibiRowsTyped;
  switch (dtype) {
    case DType::kFloat32:
      AlibiRowsTyped<DType::kFloat32>(spec, out, head_stride, row_stride, ctx);
      break;
    case DType::kFloat64:
      AlibiRowsTyped<DType::kFloat64>(spec, out, head_stride, row_stride, ctx);
      break;
    case DType::kBFloat16:
      AlibiRowsTyped<DType::kBFloat16>(spec, out, head_stride, row_stride, ctx);
      break;
    case DType::kFloat16:
      AlibiRowsTyped<DType::kFloat16>(spec, out, head_stride, row_stride, ctx);
      break;
  }
}

std::int64_t T5BucketRangeImpl(const T5BucketSpec& spec, std::int64_t first, std::int64_t count,
                               std::int32_t* out) {
  bias_detail::BucketLine bl;
  std::int64_t fallbacks = 0;
  for (std::int64_t i = 0; i < count; i += bias_detail::kColChunk) {
    const std::int64_t n = std::min(bias_detail::kColChunk, count - i);
    for (std::int64_t t = 0; t < n + kPadLanes; ++t) bl.rel[t] = first + i + t;
    fallbacks += bias_detail::BucketArray(spec, bl.rel, n, bl.buckets);
    if (out != nullptr) std::copy(bl.buckets, bl.buckets + n, out + i);
  }
  return fallbacks;
}

void T5FillRowsImpl(const T5TableSpec& spec, const Positions& query_positions, std::int64_t rows,
                    std::int64_t cols, void* out, DType dtype, std::int64_t head_stride,
                    std::int64_t row_stride, const Context& ctx) {
  using bias_detail::T5FillRowsTyped;
  switch (dtype) {
    case DType::kFloat32:
      T5FillRowsTyped<DType::kFloat32>(spec, query_positions, rows, cols, out, head_stride,
                                       row_stride, ctx);
      break;
    case DType::kFloat64:
      T5FillRowsTyped<DType::kFloat64>(spec, query_positions, rows, cols, out, head_stride,
                                       row_stride, ctx);
      break;
    case DType::kBFloat16:
      T5FillRowsTyped<DType::kBFloat16>(spec, query_positions, rows, cols, out, head_stride,
                                        row_stride, ctx);
      break;
    case DType::kFloat16:
      T5FillRowsTyped<DType::kFloat16>(spec, query_positions, rows, cols, out, head_stride,
                                       row_stride, ctx);
      break;
  }
}

void T5TileImpl(const T5TableSpec& spec, std::int64_t head, const std::int64_t* query_pos,
                std::int64_t nq, const std::int64_t* key_pos, std::int64_t nk, void* out,
                DType dtype, std::int64_t ld, TileWrite write) {
  using bias_detail::T5TileTyped;
  if (dtype == DType::kFloat64) {
    T5TileTyped<DType::kFloat64>(spec, head, query_pos, nq, key_pos, nk, out, ld, write);
  } else {
    T5TileTyped<DType::kFloat32>(spec, head, query_pos, nq, key_pos, nk, out, ld, write);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::kernels::simd
HWY_AFTER_NAMESPACE();

#endif  // POSENC_KERNELS_SIMD_BIAS_INL_H_ toggle
