// SIMD tile kernels of the fused attention: per-target code in
// flash-inl.h, dispatch here. Numerics and coverage: kernels/simd/flash.h.
#include "kernels/simd/flash.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/flash.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/simd/flash-inl.h"

#if HWY_ONCE
namespace posenc::kernels::simd {

HWY_EXPORT(FlashTileLogitsImpl);
HWY_EXPORT(FlashExpRowImpl);
HWY_EXPORT(FlashAccumulatePVImpl);

void FlashTileLogits(const float* q, const float* kt, std::int64_t nq, std::int64_t dim,
                     std::int64_t ld, float* s) {
  HWY_DYNAMIC_DISPATCH(FlashTileLogitsImpl)(q, kt, nq, dim, ld, s);
}

float FlashExpRow(float* row, std::int64_t n, float max) {
  return HWY_DYNAMIC_DISPATCH(FlashExpRowImpl)(row, n, max);
}

void FlashAccumulatePV(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                       std::int64_t nk, std::int64_t ldv, float* acc) {
  HWY_DYNAMIC_DISPATCH(FlashAccumulatePVImpl)(p, ldp, v, nq, nk, ldv, acc);
}

}  // namespace posenc::kernels::simd
#endif  // HWY_ONCE
