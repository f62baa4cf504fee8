// Shared per-target building blocks of the SIMD kernels (Highway, included
// once per target from the kernel .cc files; toggle include guard):
//  - SinCos: sin and cos of float64 angles |a| <= 5e7 rad (Cody-Waite
//    reduction, then fdlibm's __kernel_sin / __kernel_cos polynomials);
//  - TrigRows: rows of weighted cos/sin of p * freq[c] for a run of
//    positions (angle addition for consecutive positions);
//  - LoadF / StoreF: float32 vectors from/to float32, bfloat16, float16
//    storage, bit for bit the scalar conversions of posenc/dtype.h.
// Numerics and design: above each one.

#if defined(POSENC_KERNELS_SIMD_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_SIMD_MATH_INL_H_
#undef POSENC_KERNELS_SIMD_MATH_INL_H_
#else
#define POSENC_KERNELS_SIMD_MATH_INL_H_
#endif

#include <cstdint>
#include <vector>

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace posenc::kernels::simd {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

// Row lengths of scratch tables are padded to a multiple of this many floats
// (the widest vector: 16 float32 lanes on AVX-512), so full vectors can be
// loaded and stored past the last real column.
inline constexpr std::int64_t kPadLanes = 16;
inline std::int64_t PadCols(std::int64_t n) { return (n + kPadLanes - 1) / kPadLanes * kPadLanes; }

// Rows between two directly computed base rows in TrigRows.
inline constexpr std::int64_t kSmallRows = 8;

// ---------------------------------------------------------------------------
// sin/cos in float64

// sin and cos of float64 angles |a| <= 5e7 rad (the kernels use
// |a| <= 2^24 * max inv_freq, routed here only when that is <= 5e7).
// Cody-Waite reduction by pi/2 in three parts (C1, C2 with 28 significant
// bits, so k*C1 and k*C2 are exact for |k| < 2^25 with or without FMA, and
// a - k*C1 is exact by Sterbenz), then fdlibm's __kernel_sin / __kernel_cos
// minimax polynomials on [-pi/4, pi/4]. Absolute error < 4e-16 for the
// float64 angle given (measured in simd_tables_test). We do not use
// hwy::Sin/Cos: valid only for |x| <= 39000 and float32-grade.
template <class DD, class VD = hn::Vec<DD>>
HWY_INLINE void SinCos(DD dd, VD a, VD& sin_out, VD& cos_out) {
  const VD k = hn::Round(hn::Mul(a, hn::Set(dd, 0.63661977236758134308)));
  // pi/2 = C1 + C2 + C3 (C1, C2: 28 significant bits).
  VD r = hn::Sub(a, hn::Mul(k, hn::Set(dd, 0x1.921fb54000000p+0)));
  r = hn::Sub(r, hn::Mul(k, hn::Set(dd, 0x1.10b4612000000p-30)));
  r = hn::Sub(r, hn::Mul(k, hn::Set(dd, -0x1.676733ae8fe48p-60)));
  const VD z = hn::Mul(r, r);
  // fdlibm __kernel_sin: r + r^3 (S1 + z (S2 + ... + z S6)).
  VD ps = hn::MulAdd(z, hn::Set(dd, 1.58969099521155010221e-10),
                     hn::Set(dd, -2.50507602534068634195e-08));
  ps = hn::MulAdd(z, ps, hn::Set(dd, 2.75573137070700676789e-06));
  ps = hn::MulAdd(z, ps, hn::Set(dd, -1.98412698298579493134e-04));
  ps = hn::MulAdd(z, ps, hn::Set(dd, 8.33333333332248946124e-03));
  ps = hn::MulAdd(z, ps, hn::Set(dd, -1.66666666666666324348e-01));
  const VD s = hn::MulAdd(hn::Mul(r, z), ps, r);
  // fdlibm __kernel_cos: 1 - z/2 + z^2 (C1 + z (C2 + ... + z C6)).
  VD pc = hn::MulAdd(z, hn::Set(dd, -1.13596475577881948265e-11),
                     hn::Set(dd, 2.08757232129817482790e-09));
  pc = hn::MulAdd(z, pc, hn::Set(dd, -2.75573143513906633035e-07));
  pc = hn::MulAdd(z, pc, hn::Set(dd, 2.48015872894767294178e-05));
  pc = hn::MulAdd(z, pc, hn::Set(dd, -1.38888888888741095749e-03));
  pc = hn::MulAdd(z, pc, hn::Set(dd, 4.16666666666666019037e-02));
  const VD w = hn::NegMulAdd(z, hn::Set(dd, 0.5), hn::Set(dd, 1.0));
  const VD c = hn::MulAdd(hn::Mul(z, z), pc, w);
  // Quadrant q = k mod 4 in {0, 1, 2, 3} (exact in float64, any sign of k).
  const VD q = hn::Sub(k, hn::Mul(hn::Set(dd, 4.0), hn::Floor(hn::Mul(k, hn::Set(dd, 0.25)))));
  const auto odd =
      hn::Eq(hn::Sub(q, hn::Mul(hn::Set(dd, 2.0), hn::Floor(hn::Mul(q, hn::Set(dd, 0.5))))),
             hn::Set(dd, 1.0));
  const auto sin_neg = hn::Ge(q, hn::Set(dd, 2.0));
  const auto cos_neg = hn::Eq(hn::Abs(hn::Sub(q, hn::Set(dd, 1.5))), hn::Set(dd, 0.5));
  const VD ss = hn::IfThenElse(odd, c, s);
  const VD cc = hn::IfThenElse(odd, s, c);
  sin_out = hn::IfThenElse(sin_neg, hn::Neg(ss), ss);
  cos_out = hn::IfThenElse(cos_neg, hn::Neg(cc), cc);
}

// ---------------------------------------------------------------------------
// TrigRows

// Per-column description, every array padded to PadCols(ncols) (zeros).
struct TrigCols {
  const double* freq = nullptr;  // radians per position
  const double* wc0 = nullptr;   // weights of output 0
  const double* ws0 = nullptr;
  const double* wc1 = nullptr;  // weights of output 1 (null: one output)
  const double* ws1 = nullptr;
  std::int64_t ncols = 0;
  std::int64_t pad = 0;  // PadCols(ncols)
  // cos/sin(t * freq[c]) for t < kSmallRows, row-major [kSmallRows][pad].
  const double* small_cos = nullptr;
  const double* small_sin = nullptr;
};

// Fills small_cos/small_sin (each kSmallRows * pad doubles) for `cols`.
inline void FillSmallTable(const TrigCols& cols, double* small_cos, double* small_sin) {
  const hn::ScalableTag<double> dd;
  const std::int64_t nd = static_cast<std::int64_t>(hn::Lanes(dd));
  for (std::int64_t t = 0; t < kSmallRows; ++t) {
    for (std::int64_t c = 0; c < cols.pad; c += nd) {
      hn::Vec<decltype(dd)> s, co;
      SinCos(dd, hn::Mul(hn::Set(dd, static_cast<double>(t)), hn::LoadU(dd, cols.freq + c)), s, co);
      hn::StoreU(co, dd, small_cos + t * cols.pad + c);
      hn::StoreU(s, dd, small_sin + t * cols.pad + c);
    }
  }
}

// Sizes small_cos/small_sin to kSmallRows * cols.pad, fills them
// (FillSmallTable) and points cols at them: the setup every TrigRows user
// does once per call.
inline void AttachSmallTable(TrigCols& cols, std::vector<double>& small_cos,
                             std::vector<double>& small_sin) {
  small_cos.assign(static_cast<std::size_t>(kSmallRows * cols.pad), 0.0);
  small_sin.assign(static_cast<std::size_t>(kSmallRows * cols.pad), 0.0);
  FillSmallTable(cols, small_cos.data(), small_sin.data());
  cols.small_cos = small_cos.data();
  cols.small_sin = small_sin.data();
}

// Rows of out0[c] = wc0[c]*cos(p*f[c]) + ws0[c]*sin(p*f[c]) (and a second
// output with weights wc1/ws1) for a run of positions. Runs of consecutive
// positions use one angle addition per element from a base row computed
// directly every kSmallRows rows:
//   cos(p0+t) = cos p0 cos t - sin p0 sin t, sin(p0+t) = sin p0 cos t +
//   cos p0 sin t
// (each factor within 4e-16, so the sum stays within ~1e-15: this is not a
// recurrence, errors do not accumulate). Any other positions: direct.
//
// Calls sink(row, col, v0, v1) for rows [0, n) and every column chunk
// col = 0, Lanes, 2*Lanes, ... < pad (the last chunk may pass ncols). Row r
// is position pos_of(r); `consecutive` promises pos_of(r) = pos_of(0) + r.
template <bool kTwo, class PosOf, class Sink>
HWY_INLINE void TrigRows(const TrigCols& cols, std::int64_t n, bool consecutive, PosOf pos_of,
                         Sink&& sink) {
  const hn::ScalableTag<double> dd;
  using VD = hn::Vec<decltype(dd)>;
  const std::int64_t nd = static_cast<std::int64_t>(hn::Lanes(dd));
  // Local copies: the sinks store through char pointers, which may alias
  // `cols`, so reading its members in the loops would reload them after
  // every store.
  const double* const wc0 = cols.wc0;
  const double* const ws0 = cols.ws0;
  const double* const wc1 = cols.wc1;
  const double* const ws1 = cols.ws1;
  const double* const freq = cols.freq;
  const double* const small_cos = cols.small_cos;
  const double* const small_sin = cols.small_sin;
  const std::int64_t pad = cols.pad;
  auto emit = [&](std::int64_t r, std::int64_t c, VD co, VD s) HWY_ATTR {
    const VD v0 = hn::MulAdd(hn::LoadU(dd, wc0 + c), co, hn::Mul(hn::LoadU(dd, ws0 + c), s));
    VD v1 = v0;
    if constexpr (kTwo) {
      v1 = hn::MulAdd(hn::LoadU(dd, wc1 + c), co, hn::Mul(hn::LoadU(dd, ws1 + c), s));
    }
    sink(r, c, v0, v1);
  };
  if (!consecutive) {
    for (std::int64_t r = 0; r < n; ++r) {
      const VD p = hn::Set(dd, static_cast<double>(pos_of(r)));
      for (std::int64_t c = 0; c < pad; c += nd) {
        VD s, co;
        SinCos(dd, hn::Mul(p, hn::LoadU(dd, freq + c)), s, co);
        emit(r, c, co, s);
      }
    }
    return;
  }
  for (std::int64_t r0 = 0; r0 < n; r0 += kSmallRows) {
    const std::int64_t rows = n - r0 < kSmallRows ? n - r0 : kSmallRows;
    const VD p = hn::Set(dd, static_cast<double>(pos_of(r0)));
    for (std::int64_t c = 0; c < pad; c += nd) {
      VD sb, cb;
      SinCos(dd, hn::Mul(p, hn::LoadU(dd, freq + c)), sb, cb);
      emit(r0, c, cb, sb);
      for (std::int64_t t = 1; t < rows; ++t) {
        const VD ct = hn::LoadU(dd, small_cos + t * pad + c);
        const VD st = hn::LoadU(dd, small_sin + t * pad + c);
        const VD co = hn::NegMulAdd(sb, st, hn::Mul(cb, ct));
        const VD s = hn::MulAdd(cb, st, hn::Mul(sb, ct));
        emit(r0 + t, c, co, s);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Storage conversions (float32 arithmetic)

// LoadF / StoreF (below) move float32 vectors from/to float32, bfloat16,
// float16 storage. Rounding is round-to-nearest-even with NaN kept quiet, bit
// for bit the scalar conversions of posenc/dtype.h (Highway 1.0.3's
// DemoteTo(bf16) truncates and its software f16 paths mishandle overflow, so
// only F16C (AVX2 and up) is used from Highway; the rest is here).

// Storage kinds of the fast kernels.
enum class Store : int { kF32, kBF16, kF16 };

template <class DF>
HWY_INLINE hn::Vec<DF> BF16BitsToF32(DF df, hn::Vec<hn::Rebind<std::uint16_t, DF>> bits) {
  const hn::RebindToUnsigned<DF> du32;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, bits)));
}

template <class DF>
HWY_INLINE hn::Vec<hn::Rebind<std::uint16_t, DF>> F32ToBF16Bits(DF df, hn::Vec<DF> v) {
  (void)df;
  const hn::RebindToUnsigned<DF> du32;
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<std::uint16_t, DF> du16;
  const auto u = hn::BitCast(du32, v);
  const auto hi = hn::ShiftRight<16>(u);
  const auto rounded = hn::ShiftRight<16>(
      hn::Add(u, hn::Add(hn::Set(du32, 0x7fffu), hn::And(hi, hn::Set(du32, 1u)))));
  const auto nan = hn::RebindMask(du32, hn::Ne(v, v));
  const auto bits = hn::IfThenElse(nan, hn::Or(hi, hn::Set(du32, 0x40u)), rounded);
  return hn::DemoteTo(du16, hn::BitCast(di32, bits));
}

template <class DF>
HWY_INLINE hn::Vec<DF> F16BitsToF32(DF df, hn::Vec<hn::Rebind<std::uint16_t, DF>> bits) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  const hn::Rebind<hwy::float16_t, DF> df16;
  return hn::PromoteTo(df, hn::BitCast(df16, bits));
#else
  // F. Giesen's half_to_float (exact, inf/NaN/subnormals included).
  const hn::RebindToUnsigned<DF> du32;
  const auto h = hn::PromoteTo(du32, bits);
  auto o = hn::ShiftLeft<13>(hn::And(h, hn::Set(du32, 0x7fffu)));
  const auto exp = hn::And(o, hn::Set(du32, 0x0f800000u));
  o = hn::Add(o, hn::Set(du32, 0x38000000u));
  const auto is_special = hn::Eq(exp, hn::Set(du32, 0x0f800000u));
  o = hn::IfThenElse(is_special, hn::Add(o, hn::Set(du32, 0x38000000u)), o);
  const auto is_small = hn::Eq(exp, hn::Zero(du32));
  const auto small =
      hn::BitCast(du32, hn::Sub(hn::BitCast(df, hn::Add(o, hn::Set(du32, 0x00800000u))),
                                hn::BitCast(df, hn::Set(du32, 0x38800000u))));
  o = hn::IfThenElse(is_small, small, o);
  return hn::BitCast(df, hn::Or(o, hn::ShiftLeft<16>(hn::And(h, hn::Set(du32, 0x8000u)))));
#endif
}

template <class DF>
HWY_INLINE hn::Vec<hn::Rebind<std::uint16_t, DF>> F32ToF16Bits(DF df, hn::Vec<DF> v) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  (void)df;
  const hn::Rebind<hwy::float16_t, DF> df16;
  const hn::Rebind<std::uint16_t, DF> du16;
  return hn::BitCast(du16, hn::DemoteTo(df16, v));  // vcvtps2ph, round to nearest even
#else
  // F. Giesen's float_to_half_fast3_rtne (round to nearest even, exact).
  const hn::RebindToUnsigned<DF> du32;
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<std::uint16_t, DF> du16;
  const auto u = hn::BitCast(du32, v);
  const auto sign = hn::And(u, hn::Set(du32, 0x80000000u));
  const auto a = hn::Xor(u, sign);
  const auto ai = hn::BitCast(di32, a);
  const auto big = hn::RebindMask(du32, hn::Gt(ai, hn::Set(di32, 0x477fffff)));
  const auto nan = hn::RebindMask(du32, hn::Gt(ai, hn::Set(di32, 0x7f800000)));
  const auto small = hn::RebindMask(du32, hn::Lt(ai, hn::Set(di32, 0x38800000)));
  const auto big_bits = hn::IfThenElse(nan, hn::Set(du32, 0x7e00u), hn::Set(du32, 0x7c00u));
  const auto magic = hn::Set(du32, 0x3f000000u);
  const auto small_bits =
      hn::Sub(hn::BitCast(du32, hn::Add(hn::BitCast(df, a), hn::BitCast(df, magic))), magic);
  const auto odd = hn::And(hn::ShiftRight<13>(a), hn::Set(du32, 1u));
  const auto normal_bits = hn::ShiftRight<13>(hn::Add(hn::Add(a, hn::Set(du32, 0xc8000fffu)), odd));
  auto bits = hn::IfThenElse(small, small_bits, normal_bits);
  bits = hn::IfThenElse(big, big_bits, bits);
  bits = hn::Or(bits, hn::ShiftRight<16>(sign));
  return hn::DemoteTo(du16, hn::BitCast(di32, bits));
#endif
}

// Loads Lanes(df) elements of storage kind S at p as float32.
template <Store S, class DF>
HWY_INLINE hn::Vec<DF> LoadF(DF df, const void* p) {
  if constexpr (S == Store::kF32) {
    return hn::LoadU(df, static_cast<const float*>(p));
  } else {
    const hn::Rebind<std::uint16_t, DF> du16;
    const auto bits = hn::LoadU(du16, static_cast<const std::uint16_t*>(p));
    if constexpr (S == Store::kBF16) return BF16BitsToF32(df, bits);
    return F16BitsToF32(df, bits);
  }
}

// Stores Lanes(df) float32 values at p in storage kind S (rounded once).
template <Store S, class DF>
HWY_INLINE void StoreF(DF df, hn::Vec<DF> v, void* p) {
  if constexpr (S == Store::kF32) {
    hn::StoreU(v, df, static_cast<float*>(p));
  } else {
    const hn::Rebind<std::uint16_t, DF> du16;
    if constexpr (S == Store::kBF16) {
      hn::StoreU(F32ToBF16Bits(df, v), du16, static_cast<std::uint16_t*>(p));
    } else {
      hn::StoreU(F32ToF16Bits(df, v), du16, static_cast<std::uint16_t*>(p));
    }
  }
}

template <Store S>
inline constexpr std::int64_t kStoreBytes = S == Store::kF32 ? 4 : 2;

}  // namespace HWY_NAMESPACE
}  // namespace posenc::kernels::simd
HWY_AFTER_NAMESPACE();

#endif  // POSENC_KERNELS_SIMD_MATH_INL_H_ toggle
