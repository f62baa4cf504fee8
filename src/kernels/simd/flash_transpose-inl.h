// Per-target tile transposition of the fused attention (included once per
// Highway target by flash.cc): K^T and V^T tiles for the float32 logits and
// products. Contract: kernels/simd/flash.h (FlashTransposeTile).

#if defined(POSENC_KERNELS_SIMD_FLASH_TRANSPOSE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_SIMD_FLASH_TRANSPOSE_INL_H_
#undef POSENC_KERNELS_SIMD_FLASH_TRANSPOSE_INL_H_
#else
#define POSENC_KERNELS_SIMD_FLASH_TRANSPOSE_INL_H_
#endif

#include <algorithm>
#include <cstdint>

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace posenc::kernels::simd {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
// Stores the 128-bit blocks of v: block b to out + b * step.
template <class D>
HWY_INLINE void StoreBlocks(D d, hn::Vec<D> v, float* out, std::int64_t step) {
  if constexpr (hn::MaxLanes(D()) <= 4) {
    hn::StoreU(v, d, out);
  } else {
    const hn::Half<D> dh;
    constexpr std::int64_t kLowerBlocks = static_cast<std::int64_t>(hn::MaxLanes(D()) / 8);
    StoreBlocks(dh, hn::LowerHalf(dh, v), out, step);
    StoreBlocks(dh, hn::UpperHalf(dh, v), out + kLowerBlocks * step, step);
  }
}

// Columns [x0, x0 + Lanes(d)) of rows [0, n4) (n4 a multiple of 4): per 4
// rows, one vector per row, then the 4 x 4 transposes of all 128-bit blocks
// at once (two interleave levels, 32-bit then 64-bit: 8 shuffles per 4
// vectors); block b of output vector i is row x0 + 4 b + i of dst.
template <class D>
HWY_INLINE void TransposeColumns(D d, const float* rows, std::int64_t n4, std::int64_t x0,
                                 std::int64_t ld_rows, float* dst, std::int64_t ldk) {
  const hn::Repartition<std::uint64_t, D> d64;
  for (std::int64_t j0 = 0; j0 < n4; j0 += 4) {
    const float* r = rows + j0 * ld_rows + x0;
    const auto r0 = hn::LoadU(d, r), r1 = hn::LoadU(d, r + ld_rows);
    const auto r2 = hn::LoadU(d, r + 2 * ld_rows), r3 = hn::LoadU(d, r + 3 * ld_rows);
    // Per block: t0 = r0[0] r1[0] r0[1] r1[1], t1 = r2[0] r3[0] r2[1] r3[1]; t2, t3: lanes 2, 3.
    const auto t0 = hn::BitCast(d64, hn::InterleaveLower(d, r0, r1));
    const auto t1 = hn::BitCast(d64, hn::InterleaveLower(d, r2, r3));
    const auto t2 = hn::BitCast(d64, hn::InterleaveUpper(d, r0, r1));
    const auto t3 = hn::BitCast(d64, hn::InterleaveUpper(d, r2, r3));
    float* out = dst + x0 * ldk + j0;
    StoreBlocks(d, hn::BitCast(d, hn::InterleaveLower(d64, t0, t1)), out, 4 * ldk);
    StoreBlocks(d, hn::BitCast(d, hn::InterleaveUpper(d64, t0, t1)), out + ldk, 4 * ldk);
    StoreBlocks(d, hn::BitCast(d, hn::InterleaveLower(d64, t2, t3)), out + 2 * ldk, 4 * ldk);
    StoreBlocks(d, hn::BitCast(d, hn::InterleaveUpper(d64, t2, t3)), out + 3 * ldk, 4 * ldk);
  }
}
#endif

// dst[x * ldk + j] = rows[j * ld_rows + x] for j < n, x < dim; zeros in
// [n, ldk) of each of the dim rows of dst. 4 x 4 blocks, as many per step
// as a vector has 128-bit blocks (TransposeColumns: 12 vector ops per 4
// rows of a vector's width, against 16 scalar loads and stores per block),
// the edges one value at a time. A pure permutation: the same bits on
// every target.
void FlashTransposeTileImpl(const float* rows, std::int64_t n, std::int64_t dim,
                            std::int64_t ld_rows, float* dst, std::int64_t ldk) {
  std::int64_t x0 = 0;
#if HWY_TARGET != HWY_SCALAR
  const std::int64_t n4 = n / 4 * 4;
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  for (; N > 4 && x0 + N <= dim; x0 += N) TransposeColumns(d, rows, n4, x0, ld_rows, dst, ldk);
  const hn::FixedTag<float, 4> d4;
  for (; x0 + 4 <= dim; x0 += 4) TransposeColumns(d4, rows, n4, x0, ld_rows, dst, ldk);
  for (std::int64_t x = 0; x < x0; ++x) {
    for (std::int64_t j = n4; j < n; ++j) dst[x * ldk + j] = rows[j * ld_rows + x];
  }
#endif
  for (std::int64_t x = x0; x < dim; ++x) {
    for (std::int64_t j = 0; j < n; ++j) dst[x * ldk + j] = rows[j * ld_rows + x];
  }
  for (std::int64_t x = 0; x < dim; ++x) std::fill(dst + x * ldk + n, dst + (x + 1) * ldk, 0.0f);
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::kernels::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
