// Per-target row kernels of the fused attention (included once per Highway
// target through flash-inl.h): the forward's scale + bias + max and online
// softmax (FlashScaleRow, FlashExpRow, FlashSoftmaxTile), the backward's
// row pass (FlashBackwardRow, FlashBackwardTile), the exp they share and the
// bfloat16 rounding of P and dS. Contracts: kernels/simd/flash.h.

#if defined(POSENC_KERNELS_SIMD_FLASH_SOFTMAX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_SIMD_FLASH_SOFTMAX_INL_H_
#undef POSENC_KERNELS_SIMD_FLASH_SOFTMAX_INL_H_
#else
#define POSENC_KERNELS_SIMD_FLASH_SOFTMAX_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <limits>

#include <hwy/highway.h>

#include "kernels/flash_exp.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::kernels::simd {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;
using kernels::kBf16ExpC;
using kernels::kBf16ExpLn2;

// row[j] = row[j] * scale + bias[j] (+ 0 without bias) for j < nk, -inf for
// nk <= j < ld; returns the max of the first nk entries. bias (when given)
// holds ld finite or -inf entries.
// The max as a vector of lane maxima (ScaleRowMax; FlashSoftmaxTile's first
// pass runs it too).
template <class D>
HWY_INLINE hn::Vec<D> ScaleRowMax(D d, float* row, std::int64_t nk, std::int64_t ld, float scale,
                                  const float* bias) {
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  const auto neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const auto vscale = hn::Set(d, scale);
  auto vmax = neg_inf;
  for (std::int64_t j = 0; j < ld; j += N) {
    // One FMA with a bias (spelled out: the compiler's contraction of a Mul
    // and an Add depends on the inlining context, and so would the bits).
    const auto sv = hn::LoadU(d, row + j);
    auto x = bias != nullptr ? hn::MulAdd(sv, vscale, hn::LoadU(d, bias + j)) : hn::Mul(sv, vscale);
    if (j + N > nk) {
      const std::int64_t valid = nk > j ? nk - j : 0;
      x = hn::IfThenElse(hn::FirstN(d, static_cast<std::size_t>(valid)), x, neg_inf);
    }
    hn::StoreU(x, d, row + j);
    vmax = hn::Max(vmax, x);
  }
  return vmax;
}

float FlashScaleRowImpl(float* row, std::int64_t nk, std::int64_t ld, float scale,
                        const float* bias) {
  const hn::ScalableTag<float> d;
  return hn::GetLane(hn::MaxOfLanes(d, ScaleRowMax(d, row, nk, ld, scale, bias)));
}

// The integer n nearest y log2(e) for y in [-87, 0]: one FMA adding
// 1.5 * 2^23 rounds the exact product to an integer (|n| <= 126 < 2^22), the
// subtraction removes the offset. Spelled out as an FMA: gcc contracted the
// Mul and Add anyway, and bits must not depend on that. Two ops on either
// vector port; Round(Mul()) was three, VRNDSCALEPS's two on one port.
template <class D, class V>
HWY_INLINE V NearestLog2E(D d, V y) {
  const auto magic = hn::Set(d, 12582912.0f);
  return hn::Sub(hn::MulAdd(y, hn::Set(d, 1.44269504088896341f), magic), magic);
}

// e * 2^n for integral n in [-126, 0] (AVX-512: one vscalefps, the same
// correctly rounded product as the multiply by 2^n built in the exponent
// bits elsewhere).
template <class D, class V>
HWY_INLINE V TimesPow2(D d, V e, V n) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (hn::MaxLanes(D()) * sizeof(float) == 64) {
    (void)d;
    return V{_mm512_scalef_ps(e.raw, n.raw)};
  }
#endif
  const hn::RebindToSigned<D> di;
  return hn::Mul(
      e, hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127)))));
}

// exp(y) for y <= 0 (softmax arguments x - max), Cephes expf (S. Moshier):
// n = round(y log2 e), r = y - n ln 2 (two-constant Cody-Waite split,
// |r| <= ln2 / 2 + 3e-6), exp(r) = 1 + r (1 + r P(r)) with the degree-5
// Cephes polynomial, times 2^n. Max error ~1 ulp in float32 (Cephes: 1.0e-7
// relative peak over [-87, 0]), 13 vector ops on AVX-512 instead of
// Highway's general Exp, because this exp is a visible share of the fused
// forward (docs/PERFORMANCE.md, "Design figures"). y is clamped to >= -87
// (exp(-87) = 1.6e-38, a normal float) so that 2^n stays representable;
// inputs below contribute < 2^-125 of a row sum >= 1.
template <class D, class V>
HWY_INLINE V ExpNonPositive(D d, V y) {
  y = hn::Max(y, hn::Set(d, -87.0f));
  const auto n = NearestLog2E(d, y);
  auto r = hn::NegMulAdd(n, hn::Set(d, 0.693359375f), y);
  r = hn::NegMulAdd(n, hn::Set(d, -2.12194440e-4f), r);
  auto poly = hn::Set(d, 1.9875691500e-4f);
  poly = hn::MulAdd(poly, r, hn::Set(d, 1.3981999507e-3f));
  poly = hn::MulAdd(poly, r, hn::Set(d, 8.3334519073e-3f));
  poly = hn::MulAdd(poly, r, hn::Set(d, 4.1665795894e-2f));
  poly = hn::MulAdd(poly, r, hn::Set(d, 1.6666665459e-1f));
  poly = hn::MulAdd(poly, r, hn::Set(d, 5.0000001201e-1f));
  // 1 + r + r^2 P(r) as 1 + r (1 + r P(r)): two FMAs.
  const auto one = hn::Set(d, 1.0f);
  return TimesPow2(d, hn::MulAdd(hn::MulAdd(poly, r, one), r, one), n);
}

// FlashExp::kBFloat16's exp(y) for y <= 0 (kernels/flash_exp.h: formula,
// coefficients, error bound; the scalar form is kernels::ExpNonPositiveBf16):
// the same reduction with one ln 2 constant, a degree-4 polynomial.
template <class D, class V>
HWY_INLINE V ExpNonPositiveBf16(D d, V y) {
  y = hn::Max(y, hn::Set(d, -87.0f));
  const auto n = NearestLog2E(d, y);
  const auto r = hn::NegMulAdd(n, hn::Set(d, kBf16ExpLn2), y);
  auto e = hn::MulAdd(hn::Set(d, kBf16ExpC[4]), r, hn::Set(d, kBf16ExpC[3]));
  e = hn::MulAdd(e, r, hn::Set(d, kBf16ExpC[2]));
  e = hn::MulAdd(e, r, hn::Set(d, kBf16ExpC[1]));
  return TimesPow2(d, hn::MulAdd(e, r, hn::Set(d, kBf16ExpC[0])), n);
}

// ExpNonPositiveBf16 where the result is rounded to bfloat16 (kBf16Exp),
// else ExpNonPositive.
template <bool kBf16Exp, class D, class V>
HWY_INLINE V ExpForProducts(D d, V y) {
  if constexpr (kBf16Exp) {
    return ExpNonPositiveBf16(d, y);
  } else {
    return ExpNonPositive(d, y);
  }
}

// The bfloat16 bits of v in the high half of each lane (low half zero):
// round to nearest even, NaN kept quiet, exactly as FloatToBF16.
template <class D>
hn::Vec<hn::RebindToUnsigned<D>> Bf16HighBits(D /*d*/, hn::Vec<D> v) {
  const hn::RebindToUnsigned<D> du;
  const auto u = hn::BitCast(du, v);
  const auto rounding =
      hn::Add(hn::Set(du, 0x7fffu), hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u)));
  const auto rounded = hn::Add(u, rounding);
  const auto quiet = hn::Or(u, hn::Set(du, 0x400000u));
  const auto high = hn::Set(du, 0xffff0000u);
  return hn::And(hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet, rounded), high);
}

// How a row kernel rounds to bfloat16: by integer arithmetic
// (Bf16HighBits, 8 vector ops), or with AVX512_BF16's VCVTNEPS2BF16 (3 ops
// with the widening back to float32 lanes). Both give FloatToBF16's bits for
// normal, zero, infinite and NaN values; VCVTNEPS2BF16 also flushes a
// subnormal input to +-0 (Intel SDM), which the engines never hand it: their
// tasks run with FTZ and DAZ (kernels/float_mode.h), so P and dS are never
// subnormal there.
enum class Bf16Round { kInteger, kConvert };
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
inline constexpr bool kHaveBf16Convert = true;

// VCVTNEPS2BF16 zmm -> ymm: the 16 bfloat16 values of v. Inline asm:
// Highway 1.0.3 has no op for the instruction, and GCC's intrinsic needs the
// avx512bf16 target on every function that inlines it. Runs only where the
// CPU has AVX512_BF16 (FlashBf16ConvertPreferred).
HWY_INLINE __m256i ConvertToBf16(__m512 v) {
  __m256i packed;
  asm("vcvtneps2bf16 %1, %0" : "=v"(packed) : "v"(v));
  return packed;
}
#else
inline constexpr bool kHaveBf16Convert = false;
#endif

// The bfloat16 bits of v in the high half of each lane (low half zero), as
// Bf16HighBits, rounded the kRound way.
template <Bf16Round kRound, class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> RoundBf16High(D d, hn::Vec<D> v) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (kRound == Bf16Round::kConvert && hn::MaxLanes(D()) == 16) {
    const __m512i wide = _mm512_cvtepu16_epi32(ConvertToBf16(v.raw));
    return hn::Vec<hn::RebindToUnsigned<D>>{_mm512_slli_epi32(wide, 16)};
  }
#endif
  return Bf16HighBits(d, v);
}

// The exponentials exp(x - m) of row[0, cols) (0 where x is -inf; m = -inf
// gives zeros) in place, rounded the kRound way when round, and the vector
// of their unrounded lane sums (SumOfLanes of it: the row's sum). The
// forward's second pass, shared by its row and tile kernels.
template <Bf16Round kRound, bool kBf16Exp, class D>
HWY_INLINE hn::Vec<D> ExpRowInPlace(D d, float* row, std::int64_t cols, float m, bool round) {
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  const auto neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const auto vm = hn::Set(d, m);
  auto sum = hn::Zero(d);
  for (std::int64_t j = 0; j < cols; j += N) {
    const auto x = hn::LoadU(d, row + j);
    const auto e =
        hn::IfThenElseZero(hn::Gt(x, neg_inf), ExpForProducts<kBf16Exp>(d, hn::Sub(x, vm)));
    hn::StoreU(round ? hn::BitCast(d, RoundBf16High<kRound>(d, e)) : e, d, row + j);
    sum = hn::Add(sum, e);
  }
  return sum;
}

template <bool kBf16Exp>
float ExpRow(float* row, std::int64_t n, float max) {
  const hn::ScalableTag<float> d;
  return hn::GetLane(
      hn::SumOfLanes(d, ExpRowInPlace<Bf16Round::kInteger, kBf16Exp>(d, row, n, max, false)));
}

// bf16_exp: FlashExp::kBFloat16.
float FlashExpRowImpl(float* row, std::int64_t n, float max, bool bf16_exp) {
  return bf16_exp ? ExpRow<true>(row, n, max) : ExpRow<false>(row, n, max);
}

// Runs f.template operator()<kRound, kBf16Exp>(round) for a row kernel's
// modes, chosen once per call: round (P, dS rounded to bfloat16), convert
// (with VCVTNEPS2BF16 where this target can: RoundBf16High) and bf16_exp
// (FlashExp::kBFloat16).
template <class F>
HWY_INLINE void WithRowModes(bool round, bool convert, bool bf16_exp, F&& f) {
  if constexpr (kHaveBf16Convert) {
    if (round && convert) {
      if (bf16_exp) return f.template operator()<Bf16Round::kConvert, true>(true);
      return f.template operator()<Bf16Round::kConvert, false>(true);
    }
  }
  if (bf16_exp) return f.template operator()<Bf16Round::kInteger, true>(round);
  f.template operator()<Bf16Round::kInteger, false>(round);
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// Rows per batch of the AVX-512 SoftmaxTile: one vector of row results.
inline constexpr std::int64_t kRowBatch = 16;

// The 16 lane reductions of v[0..15] as one vector, lane r = v[r]'s: the
// pairs added (or maxed) in _mm512_reduce_add_ps's (_max_ps's) order and
// operand order (lanes i + 8 with i, i + 4 with i, then i with i + 2, i
// with i + 1), so each row's result has the bits of SumOfLanes (MaxOfLanes)
// of its vector, signed zeros and NaNs included, in 46 vector ops instead of
// 16 dependent chains of ~8 (docs/PERFORMANCE.md, "The training shape,
// eighth pass"). Op: an add or max functor.
template <class Op>
HWY_INLINE __m512 ReduceRows16(const __m512* v, Op op) {
  __m512 c[8], e[4], f[2];
  for (int k = 0; k < 8; ++k) {  // [row 2k: lanes (i + 8) op i | row 2k + 1: the same]
    c[k] = op(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)),
              _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)));
  }
  for (int k = 0; k < 4; ++k) {  // block j: row 4k + j, lanes (i + 4) op i
    e[k] = op(_mm512_shuffle_f32x4(c[2 * k], c[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)),
              _mm512_shuffle_f32x4(c[2 * k], c[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)));
  }
  for (int k = 0; k < 2; ++k) {  // block j: rows 8k + j, 8k + 4 + j, two lanes each: i op (i + 2)
    f[k] = op(_mm512_shuffle_ps(e[2 * k], e[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
              _mm512_shuffle_ps(e[2 * k], e[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // Block j: rows j, 4 + j, 8 + j, 12 + j (lanes 0 + 1); then row r to lane r.
  const __m512 g = op(_mm512_shuffle_ps(f[0], f[1], _MM_SHUFFLE(2, 0, 2, 0)),
                      _mm512_shuffle_ps(f[0], f[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i rows = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(rows, g);
}

struct AddOp {
  __m512 operator()(__m512 a, __m512 b) const { return _mm512_add_ps(a, b); }
};
struct MaxOp {
  __m512 operator()(__m512 a, __m512 b) const { return _mm512_max_ps(a, b); }
};

// SoftmaxTile on rows [0, n) of a batch of n <= 16 (AVX-512): the same
// values, bits included, with the rows' max and sum reductions, the new
// maxima, alpha and l computed 16 rows at a time (ReduceRows16, one vector
// exp for the 16 alphas, l = l * alpha + sum as one FMA as before).
template <Bf16Round kRound, bool kBf16Exp>
HWY_INLINE void SoftmaxRows16(float* s, std::int64_t ld, std::int64_t n, std::int64_t nk,
                              float scale, const float* const* bias, float* m, float* l,
                              float* alpha, const std::int64_t* visible, const std::int64_t* cols,
                              bool round) {
  const hn::Full512<float> d;
  const auto neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const auto rows = hn::FirstN(d, static_cast<std::size_t>(n));
  __m512 part[kRowBatch];
  for (std::int64_t i = 0; i < kRowBatch; ++i) {
    part[i] = i < n ? ScaleRowMax(d, s + i * ld, visible != nullptr ? visible[i] : nk,
                                  cols != nullptr ? cols[i] : ld, scale,
                                  bias != nullptr ? bias[i] : nullptr)
                          .raw
                    : neg_inf.raw;
  }
  const hn::Vec<decltype(d)> row_max{ReduceRows16(part, MaxOp())};
  const auto m_old = hn::IfThenElse(rows, hn::MaskedLoad(rows, d, m), neg_inf);
  const auto m_new = hn::Max(m_old, row_max);
  // A row with no finite x keeps m and takes alpha 1; one seen for the first
  // time takes alpha 0; the others exp(m_old - m_new), as per row before.
  auto a = ExpNonPositive(d, hn::Sub(m_old, m_new));
  a = hn::IfThenElse(hn::Eq(m_old, neg_inf), hn::Zero(d), a);
  a = hn::IfThenElse(hn::Eq(row_max, neg_inf), hn::Set(d, 1.0f), a);
  hn::BlendedStore(m_new, rows, d, m);
  hn::BlendedStore(a, rows, d, alpha);
  for (std::int64_t i = 0; i < kRowBatch; ++i) {
    if (i >= n) {
      part[i] = hn::Zero(d).raw;
      continue;
    }
    part[i] =
        ExpRowInPlace<kRound, kBf16Exp>(d, s + i * ld, cols != nullptr ? cols[i] : ld, m[i], round)
            .raw;
  }
  const hn::Vec<decltype(d)> sums{ReduceRows16(part, AddOp())};
  hn::BlendedStore(hn::MulAdd(hn::MaskedLoad(rows, d, l), a, sums), rows, d, l);
}
#endif

// The forward's online-softmax step for a whole tile in one call (no
// per-row dispatch): per row i < nq of s [nq, ld], x = s * scale + bias[i]
// (bias null, or bias[i] null: no terms; ld entries), -inf for j >= nk;
// m_new = max(m[i], max_j x); alpha[i] = exp(m[i] - m_new) (0 when m[i] was
// -inf); s = exp(x - m_new); l[i] = l[i] * alpha[i] + sum_j s. A row with no
// finite x is zeroed with alpha 1 and m, l unchanged. visible (or null: nk)
// and cols (or null: ld) per row: row i sees its first visible[i] keys, and
// only its first cols[i] entries are read and written. round: s holds the
// bfloat16 values of the exponentials (Bf16HighBits; l sums them unrounded),
// computed by ExpNonPositiveBf16 when kBf16Exp (the rescale alpha keeps
// ExpNonPositive: it compounds over the key tiles).
template <Bf16Round kRound, bool kBf16Exp = false>
HWY_INLINE void SoftmaxTile(float* s, std::int64_t ld, std::int64_t nq, std::int64_t nk,
                            float scale, const float* const* bias, float* m, float* l, float* alpha,
                            const std::int64_t* visible, const std::int64_t* cols, bool round) {
  const hn::ScalableTag<float> d;
  const float kInf = std::numeric_limits<float>::infinity();
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (hn::MaxLanes(decltype(d)()) == kRowBatch) {
    for (std::int64_t i0 = 0; i0 < nq; i0 += kRowBatch) {
      SoftmaxRows16<kRound, kBf16Exp>(s + i0 * ld, ld, std::min(kRowBatch, nq - i0), nk, scale,
                                      bias != nullptr ? bias + i0 : nullptr, m + i0, l + i0,
                                      alpha + i0, visible != nullptr ? visible + i0 : nullptr,
                                      cols != nullptr ? cols + i0 : nullptr, round);
    }
    return;
  }
#endif
  // Two passes over the rows: every row's logits and max, then every row's
  // exponentials. Within one row the exponentials wait on the row's max (a
  // lane reduction); across rows they do not, so the second pass is one
  // stream of independent work instead of a chain per row.
  for (std::int64_t i = 0; i < nq; ++i) {
    float* row = s + i * ld;
    const auto vmax =
        ScaleRowMax(d, row, visible != nullptr ? visible[i] : nk, cols != nullptr ? cols[i] : ld,
                    scale, bias != nullptr ? bias[i] : nullptr);
    const float row_max = hn::GetLane(hn::MaxOfLanes(d, vmax));
    if (row_max == -kInf) {  // m stays; the second pass writes zeros and adds 0 to l
      alpha[i] = 1.0f;
      continue;
    }
    const float m_new = m[i] > row_max ? m[i] : row_max;
    alpha[i] = m[i] == -kInf ? 0.0f : hn::GetLane(ExpNonPositive(d, hn::Set(d, m[i] - m_new)));
    m[i] = m_new;
  }
  for (std::int64_t i = 0; i < nq; ++i) {
    const auto sum =
        ExpRowInPlace<kRound, kBf16Exp>(d, s + i * ld, cols != nullptr ? cols[i] : ld, m[i], round);
    l[i] = l[i] * alpha[i] + hn::GetLane(hn::SumOfLanes(d, sum));
  }
}

// round, convert, bf16_exp: WithRowModes.
void FlashSoftmaxTileImpl(float* s, std::int64_t ld, std::int64_t nq, std::int64_t nk, float scale,
                          const float* const* bias, float* m, float* l, float* alpha,
                          const std::int64_t* visible, const std::int64_t* cols, bool round,
                          bool convert, bool bf16_exp) {
  WithRowModes(round, convert, bf16_exp, [&]<Bf16Round kRound, bool kBf16Exp>(bool r) {
    SoftmaxTile<kRound, kBf16Exp>(s, ld, nq, nk, scale, bias, m, l, alpha, visible, cols, r);
  });
}

// The backward's row pass: x = s * scale (+ bias), P = exp(x - lse) (0 where
// x is -inf and for j >= nk), dS = P * (dp - delta); P replaces s, dS
// replaces dp (j < ld), both as bfloat16 values (Bf16HighBits) when round;
// P from ExpNonPositiveBf16 when kBf16Exp (as the forward's).
template <Bf16Round kRound, bool kBf16Exp = false>
HWY_INLINE void BackwardRow(float* s, float* dp, std::int64_t nk, std::int64_t ld, float scale,
                            const float* bias, float lse, float delta, bool round) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  const auto neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const auto vscale = hn::Set(d, scale), vlse = hn::Set(d, lse), vdelta = hn::Set(d, delta);
  for (std::int64_t j = 0; j < ld; j += N) {
    // One FMA with a bias (as in ScaleRowMax).
    const auto sv = hn::LoadU(d, s + j);
    auto x = bias != nullptr ? hn::MulAdd(sv, vscale, hn::LoadU(d, bias + j)) : hn::Mul(sv, vscale);
    auto visible = hn::Gt(x, neg_inf);
    if (j + N > nk) {
      const std::int64_t valid = nk > j ? nk - j : 0;
      visible = hn::And(visible, hn::FirstN(d, static_cast<std::size_t>(valid)));
    }
    const auto p = hn::IfThenElseZero(visible, ExpForProducts<kBf16Exp>(d, hn::Sub(x, vlse)));
    const auto ds = hn::Mul(p, hn::Sub(hn::LoadU(d, dp + j), vdelta));
    if (round) {
      hn::StoreU(hn::BitCast(d, RoundBf16High<kRound>(d, p)), d, s + j);
      hn::StoreU(hn::BitCast(d, RoundBf16High<kRound>(d, ds)), d, dp + j);
    } else {
      hn::StoreU(p, d, s + j);
      hn::StoreU(ds, d, dp + j);
    }
  }
}

// round, convert, bf16_exp: WithRowModes.
void FlashBackwardRowImpl(float* s, float* dp, std::int64_t nk, std::int64_t ld, float scale,
                          const float* bias, float lse, float delta, bool round, bool convert,
                          bool bf16_exp) {
  WithRowModes(round, convert, bf16_exp, [&]<Bf16Round kRound, bool kBf16Exp>(bool r) {
    BackwardRow<kRound, kBf16Exp>(s, dp, nk, ld, scale, bias, lse, delta, r);
  });
}

// The backward's row pass over a whole tile (one dispatch instead of one per
// row): row i < nq as BackwardRow with its own nk (visible[i], or nk), its
// columns (cols[i], or ld; [cols[i], ld) zeroed in both rows), bias[i]
// (bias or bias[i] null: none), lse[i] and delta[i]; a row whose lse is
// -inf (it sees no key) becomes zeros.
template <Bf16Round kRound, bool kBf16Exp>
HWY_INLINE void BackwardTile(float* s, float* dp, std::int64_t ld, std::int64_t nq, std::int64_t nk,
                             float scale, const float* const* bias, const float* lse,
                             const float* delta, const std::int64_t* visible,
                             const std::int64_t* cols, bool round) {
  const float kNegInf = -std::numeric_limits<float>::infinity();
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t i = 0; i < nq; ++i) {
    float* srow = s + i * ld;
    float* dprow = dp + i * ld;
    std::int64_t ldi = cols != nullptr ? cols[i] : ld;
    if (lse[i] == kNegInf) {
      ldi = 0;
    } else {
      BackwardRow<kRound, kBf16Exp>(srow, dprow, visible != nullptr ? visible[i] : nk, ldi, scale,
                                    bias != nullptr ? bias[i] : nullptr, lse[i], delta[i], round);
    }
    // Vector stores (ld and the columns are multiples of kFlashPad): the
    // loop compiled to two memset calls per row of a causal diagonal tile.
    for (std::int64_t j = ldi; j < ld; j += N) {
      hn::StoreU(hn::Zero(d), d, srow + j);
      hn::StoreU(hn::Zero(d), d, dprow + j);
    }
  }
}

// round, convert, bf16_exp: WithRowModes.
void FlashBackwardTileImpl(float* s, float* dp, std::int64_t ld, std::int64_t nq, std::int64_t nk,
                           float scale, const float* const* bias, const float* lse,
                           const float* delta, const std::int64_t* visible,
                           const std::int64_t* cols, bool round, bool convert, bool bf16_exp) {
  WithRowModes(round, convert, bf16_exp, [&]<Bf16Round kRound, bool kBf16Exp>(bool r) {
    BackwardTile<kRound, kBf16Exp>(s, dp, ld, nq, nk, scale, bias, lse, delta, visible, cols, r);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::kernels::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
