// Per-target cos/sin rows of the RoPE kernels (included once per Highway
// target by rope-inl.h, toggle include guard): the float32 cos/sin rows
// [n][pad] that the row rotation reads, from the frequency tables (TrigRows),
// in HF numerics (FillHfRows), or from a cos/sin cache (FillCacheRows), and
// RoundF, the rounding to a storage kind. Numerics, conventions and
// coverage: kernels/simd/rope.h.

#if defined(POSENC_KERNELS_SIMD_ROPE_TABLES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_SIMD_ROPE_TABLES_INL_H_
#undef POSENC_KERNELS_SIMD_ROPE_TABLES_INL_H_
#else
#define POSENC_KERNELS_SIMD_ROPE_TABLES_INL_H_
#endif

#include <cstdint>
#include <vector>

#include <hwy/highway.h>

#include "kernels/simd/rope.h"
#include "kernels/simd/simd_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::kernels::simd {
namespace HWY_NAMESPACE {

namespace rope_detail {

using scalar::RopePairs;

// Rounds float32 lanes to storage kind S and back (identity for float32).
template <Store S, class DF>
HWY_INLINE hn::Vec<DF> RoundF(DF df, hn::Vec<DF> v) {
  if constexpr (S == Store::kF32) {
    return v;
  } else if constexpr (S == Store::kBF16) {
    return BF16BitsToF32(df, F32ToBF16Bits(df, v));
  } else {
    return F16BitsToF32(df, F32ToF16Bits(df, v));
  }
}

// Column description of the HF rows: float32-valued frequencies, the sign
// of each sin column (interleaved: -, + per pair; times sin_sign).
struct HfCols {
  std::vector<double> freq;
  std::vector<float> sign;
  float factor = 1.0f;
  std::int64_t pad = 0;
};

void MakeHfColumns(const RopeApplySpec& spec, HfCols& h) {
  const bool inter = spec.pairs == RopePairs::kInterleaved;
  const std::int64_t ncols = inter ? 2 * spec.half : spec.half;
  h.pad = PadCols(ncols);
  h.freq.assign(static_cast<std::size_t>(h.pad), 0.0);
  h.sign.assign(static_cast<std::size_t>(h.pad), 0.0f);
  h.factor = static_cast<float>(spec.attention_factor);
  for (std::int64_t col = 0; col < ncols; ++col) {
    h.freq[col] = static_cast<float>(spec.inv_freq[inter ? col / 2 : col]);
    h.sign[col] = static_cast<float>(spec.sin_sign * ((inter && col % 2 == 0) ? -1.0 : 1.0));
  }
}

// HF cos/sin rows (scalar RopeTrig kHF, then the cast to storage S):
// angle = float32(p) * inv_freq in float32 (the exact double product demoted
// once), cos/sin of that angle by SinCos in float64 rounded to float32,
// times the factor in float32, rounded to S; sin times its column sign.
template <Store S, class PosOf>
HWY_INLINE void FillHfRows(const HfCols& h, std::int64_t n, PosOf pos_of, float* HWY_RESTRICT c,
                           float* HWY_RESTRICT s) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> dfh;
  const std::int64_t nl = static_cast<std::int64_t>(hn::Lanes(dd));
  for (std::int64_t r = 0; r < n; ++r) {
    const auto p = hn::Set(dd, static_cast<double>(static_cast<float>(pos_of(r))));
    for (std::int64_t col = 0; col < h.pad; col += nl) {
      const auto angle =
          hn::PromoteTo(dd, hn::DemoteTo(dfh, hn::Mul(p, hn::LoadU(dd, h.freq.data() + col))));
      hn::Vec<decltype(dd)> sv, cv;
      SinCos(dd, angle, sv, cv);
      const auto f = hn::Set(dfh, h.factor);
      const auto cf = RoundF<S>(dfh, hn::Mul(hn::DemoteTo(dfh, cv), f));
      const auto sf = RoundF<S>(dfh, hn::Mul(hn::DemoteTo(dfh, sv), f));
      hn::StoreU(cf, dfh, c + r * h.pad + col);
      hn::StoreU(hn::Mul(sf, hn::LoadU(dfh, h.sign.data() + col)), dfh, s + r * h.pad + col);
    }
  }
}

struct Tables {
  std::vector<double> freq, wc0, ws0, wc1, ws1, small_cos, small_sin;
  TrigCols cols;
};

// Column description of the float32 rows RotateRow expects.
void MakeApplyColumns(const RopeApplySpec& spec, Tables& t) {
  const bool inter = spec.pairs == RopePairs::kInterleaved;
  const std::int64_t ncols = inter ? 2 * spec.half : spec.half;
  const std::int64_t pad = PadCols(ncols);
  for (auto* v : {&t.freq, &t.wc0, &t.ws0, &t.wc1, &t.ws1}) v->assign(pad, 0.0);
  const double af = spec.attention_factor;
  for (std::int64_t c = 0; c < ncols; ++c) {
    const std::int64_t j = inter ? c / 2 : c;
    t.freq[c] = spec.inv_freq[j];
    t.wc0[c] = af;                                                         // output 0: cos
    t.ws1[c] = af * spec.sin_sign * ((inter && c % 2 == 0) ? -1.0 : 1.0);  // output 1: sin
  }
  t.cols = TrigCols{t.freq.data(), t.wc0.data(), t.ws0.data(), t.wc1.data(), t.ws1.data(),
                    ncols,         pad,          nullptr,      nullptr};
  AttachSmallTable(t.cols, t.small_cos, t.small_sin);
}

// Fills float32 rows c/s ([n][pad]) for positions pos_of(r), r < n.
template <class PosOf>
HWY_INLINE void FillTrigRows(const TrigCols& cols, std::int64_t n, bool consecutive, PosOf pos_of,
                             float* HWY_RESTRICT c, float* HWY_RESTRICT s) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> dfh;
  TrigRows<true>(cols, n, consecutive, pos_of,
                 [&](std::int64_t r, std::int64_t col, hn::Vec<decltype(dd)> v0,
                     hn::Vec<decltype(dd)> v1) HWY_ATTR {
                   hn::StoreU(hn::DemoteTo(dfh, v0), dfh, c + r * cols.pad + col);
                   hn::StoreU(hn::DemoteTo(dfh, v1), dfh, s + r * cols.pad + col);
                 });
}

// Fills float32 rows c/s ([n][pad], RotateRow's layout) from the cache rows
// pos_of(r), r < n. Per token, not per head: a scalar loop is enough.
template <class PosOf>
HWY_INLINE void FillCacheRows(const RopeApplySpec& spec, std::int64_t pad, std::int64_t n,
                              PosOf pos_of, float* HWY_RESTRICT c, float* HWY_RESTRICT s) {
  const RopeCacheSource& k = spec.cache;
  const bool inter = spec.pairs == RopePairs::kInterleaved;
  for (std::int64_t r = 0; r < n; ++r) {
    const std::int64_t base = pos_of(r) * k.row_stride;
    float* cr = c + r * pad;
    float* sr = s + r * pad;
    for (std::int64_t j = 0; j < spec.half; ++j) {
      const float cv = static_cast<float>(LoadAsDouble(k.data, k.dtype, base + j * k.col_stride));
      const float sv = static_cast<float>(
          spec.sin_sign * LoadAsDouble(k.data, k.dtype, base + (spec.half + j) * k.col_stride));
      if (inter) {
        cr[2 * j] = cr[2 * j + 1] = cv;
        sr[2 * j] = -sv;
        sr[2 * j + 1] = sv;
      } else {
        cr[j] = cv;
        sr[j] = sv;
      }
    }
  }
}

}  // namespace rope_detail

}  // namespace HWY_NAMESPACE
}  // namespace posenc::kernels::simd
HWY_AFTER_NAMESPACE();

#endif  // POSENC_KERNELS_SIMD_ROPE_TABLES_INL_H_ toggle
