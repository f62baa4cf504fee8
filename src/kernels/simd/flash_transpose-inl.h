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

// dst[x * ldk + j] = rows[j * ld_rows + x] for j < n, x < dim; zeros in
// [n, ldk) of each of the dim rows of dst. 4 x 4 blocks in 128-bit vectors
// (two interleave levels, 32-bit then 64-bit: 8 shuffles per 16 values,
// against 16 scalar loads and stores), the edges one value at a time.
void FlashTransposeTileImpl(const float* rows, std::int64_t n, std::int64_t dim,
                            std::int64_t ld_rows, float* dst, std::int64_t ldk) {
  std::int64_t x0 = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::FixedTag<float, 4> d;
  const hn::Repartition<std::uint64_t, decltype(d)> d64;
  for (; x0 + 4 <= dim; x0 += 4) {
    std::int64_t j0 = 0;
    for (; j0 + 4 <= n; j0 += 4) {
      const float* r = rows + j0 * ld_rows + x0;
      const auto r0 = hn::LoadU(d, r), r1 = hn::LoadU(d, r + ld_rows);
      const auto r2 = hn::LoadU(d, r + 2 * ld_rows), r3 = hn::LoadU(d, r + 3 * ld_rows);
      // t0 = r0[0] r1[0] r0[1] r1[1], t1 = r2[0] r3[0] r2[1] r3[1]; t2, t3: lanes 2, 3.
      const auto t0 = hn::BitCast(d64, hn::InterleaveLower(d, r0, r1));
      const auto t1 = hn::BitCast(d64, hn::InterleaveLower(d, r2, r3));
      const auto t2 = hn::BitCast(d64, hn::InterleaveUpper(d, r0, r1));
      const auto t3 = hn::BitCast(d64, hn::InterleaveUpper(d, r2, r3));
      float* out = dst + x0 * ldk + j0;
      hn::StoreU(hn::BitCast(d, hn::InterleaveLower(d64, t0, t1)), d, out);
      hn::StoreU(hn::BitCast(d, hn::InterleaveUpper(d64, t0, t1)), d, out + ldk);
      hn::StoreU(hn::BitCast(d, hn::InterleaveLower(d64, t2, t3)), d, out + 2 * ldk);
      hn::StoreU(hn::BitCast(d, hn::InterleaveUpper(d64, t2, t3)), d, out + 3 * ldk);
    }
    for (std::int64_t x = x0; x < x0 + 4; ++x) {
      for (std::int64_t j = j0; j < n; ++j) dst[x * ldk + j] = rows[j * ld_rows + x];
    }
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
