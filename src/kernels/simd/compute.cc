// The float32 FMA compute ceiling (kernels/simd/compute.h), per Highway target.
#include "kernels/simd/compute.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/compute.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace posenc::kernels::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET <= HWY_AVX3
inline constexpr int kAccumulators = 16;
#else
inline constexpr int kAccumulators = 8;
#endif

double ComputeFloat32FmaImpl(std::int64_t iterations) {
  const hn::ScalableTag<float> d;
  hn::Vec<decltype(d)> acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i)
    acc[i] = hn::Set(d, 1.0f + 0.001f * static_cast<float>(i));
  // acc -> acc * m + a converges to a / (1 - m): values stay normal.
  const auto m = hn::Set(d, 0.999999f), a = hn::Set(d, 1e-6f);
  for (std::int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < kAccumulators; ++i) acc[i] = hn::MulAdd(acc[i], m, a);
  }
  auto sum = acc[0];
  for (int i = 1; i < kAccumulators; ++i) sum = hn::Add(sum, acc[i]);
  g_compute_sink = hn::GetLane(sum);
  return 2.0 * static_cast<double>(iterations) * kAccumulators * static_cast<double>(hn::Lanes(d));
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::kernels::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::kernels::simd {
HWY_EXPORT(ComputeFloat32FmaImpl);

double ComputeFloat32Fma(std::int64_t iterations) {
  return HWY_DYNAMIC_DISPATCH(ComputeFloat32FmaImpl)(iterations);
}
}  // namespace posenc::kernels::simd
#endif  // HWY_ONCE
