// SIMD sinusoidal table kernels: per-target code in sinusoidal-inl.h,
// dispatch here. Numerics and coverage: kernels/simd/sinusoidal.h.
#include "kernels/simd/sinusoidal.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/sinusoidal.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/simd/sinusoidal-inl.h"

#if HWY_ONCE
namespace posenc::kernels::simd {

HWY_EXPORT(SinusoidalRowsImpl);
HWY_EXPORT(AddSinusoidalRowsImpl);
HWY_EXPORT(SinCosBatchImpl);

void SinCosBatch(const double* angles, std::int64_t n, double* sin, double* cos) {
  HWY_DYNAMIC_DISPATCH(SinCosBatchImpl)(angles, n, sin, cos);
}

bool SinusoidalSupported(DType dtype, std::int64_t col_stride) {
  return col_stride == 1 &&
         (dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16);
}

void SinusoidalRows(const scalar::SinusoidalRowSpec& spec, const Positions& positions,
                    std::int64_t rows, void* out, DType dtype, std::int64_t row_stride,
                    const Context& ctx) {
  HWY_DYNAMIC_DISPATCH(SinusoidalRowsImpl)(spec, positions, rows, out, dtype, row_stride, ctx);
}

void AddSinusoidalRows(const scalar::SinusoidalRowSpec& spec, const Positions& positions,
                       std::int64_t batch, std::int64_t seq, void* x, DType dtype,
                       std::int64_t stride_batch, std::int64_t stride_seq, const Context& ctx) {
  HWY_DYNAMIC_DISPATCH(AddSinusoidalRowsImpl)
  (spec, positions, batch, seq, x, dtype, stride_batch, stride_seq, ctx);
}

}  // namespace posenc::kernels::simd
#endif  // HWY_ONCE
