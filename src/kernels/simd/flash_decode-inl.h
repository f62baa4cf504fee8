// Per-target decode logits of the fused attention (included once per
// Highway target by flash.cc, after flash-inl.h): q rows against key rows,
// one transposing lane sum per group of keys. Numerics and coverage:
// kernels/simd/flash.h (FlashDecodeLogits).

#if defined(POSENC_KERNELS_SIMD_FLASH_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_SIMD_FLASH_DECODE_INL_H_
#undef POSENC_KERNELS_SIMD_FLASH_DECODE_INL_H_
#else
#define POSENC_KERNELS_SIMD_FLASH_DECODE_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace posenc::kernels::simd {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

// Sums each of the kN vectors a[] over its lanes into lane i of the result
// (kN = Lanes): a tree of ConcatEven / ConcatOdd + Add (after each level,
// vector i holds the partial sums of vectors 2i and 2i + 1 side by side),
// log2(Lanes) levels instead of one horizontal sum per vector. Unrolled at
// compile time so the vectors stay in registers.
template <std::size_t kN, class D, class V>
HWY_INLINE V SumLanesOfEach(D d, const V* a) {
#if HWY_TARGET == HWY_SCALAR  // one lane: each vector is its own sum
  (void)d;
  return a[0];
#else
  if constexpr (kN == 1) {
    (void)d;
    return a[0];
  } else {
    V b[kN / 2];
    for (std::size_t i = 0; i < kN / 2; ++i) {
      b[i] = hn::Add(hn::ConcatEven(d, a[2 * i + 1], a[2 * i]),
                     hn::ConcatOdd(d, a[2 * i + 1], a[2 * i]));
    }
    return SumLanesOfEach<kN / 2>(d, b);
  }
#endif
}

// Decode logits: s[r * lds + j] = q_r . k_j for r < R, j < Pad(nk), with k
// as rows (stride ldkr, readable up to Pad(nk) rows, zero-padded to dim, a
// multiple of kFlashPad): per query row and group of Lanes keys, one vector
// accumulator per key along dim (Lanes independent FMA chains), then one
// transposing lane sum (SumLanesOfEach) stored as a vector.
void FlashDecodeLogitsImpl(const float* q, std::int64_t ldq, std::int64_t R, const float* k,
                           std::int64_t ldkr, std::int64_t nk, std::int64_t dim, float* s,
                           std::int64_t lds) {
  const hn::ScalableTag<float> d;
  constexpr std::size_t kN = hn::MaxLanes(decltype(d)());
  using V = hn::Vec<decltype(d)>;
  for (std::int64_t j0 = 0; j0 < nk; j0 += static_cast<std::int64_t>(kN)) {
    const float* kj = k + j0 * ldkr;
    for (std::int64_t r = 0; r < R; ++r) {
      const float* qr = q + r * ldq;
      V acc[kN];
      for (std::size_t jj = 0; jj < kN; ++jj) acc[jj] = hn::Zero(d);
      for (std::int64_t x = 0; x < dim; x += static_cast<std::int64_t>(kN)) {
        const V qv = hn::LoadU(d, qr + x);
        for (std::size_t jj = 0; jj < kN; ++jj) {
          acc[jj] =
              hn::MulAdd(qv, hn::LoadU(d, kj + static_cast<std::int64_t>(jj) * ldkr + x), acc[jj]);
        }
      }
      hn::StoreU(SumLanesOfEach<kN>(d, acc), d, s + r * lds + j0);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::kernels::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
