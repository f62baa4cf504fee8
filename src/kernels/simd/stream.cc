// STREAM-like bandwidth reference kernels (kernels/simd/stream.h).
#include "kernels/simd/stream.h"

#include "kernels/simd/compute.h"

#include <algorithm>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/stream.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace posenc::kernels::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void StreamImpl(StreamOp kernel, float* a, const float* b, std::int64_t n, float scale,
                const Context& ctx) {
  constexpr std::int64_t kTask = 65536;  // floats: 256 KiB
  const std::int64_t tasks = (n + kTask - 1) / kTask;
  ctx.ParallelFor(tasks, [&](std::int64_t task, int) {
    const hn::ScalableTag<float> d;
    const std::int64_t nl = static_cast<std::int64_t>(hn::Lanes(d));
    const std::int64_t i0 = task * kTask, i1 = std::min(n, i0 + kTask);
    const auto s = hn::Set(d, scale);
    std::int64_t i = i0;
    switch (kernel) {
      case StreamOp::kReadModifyWrite:
        for (; i + nl <= i1; i += nl) hn::StoreU(hn::Mul(hn::LoadU(d, a + i), s), d, a + i);
        for (; i < i1; ++i) a[i] *= scale;
        break;
      case StreamOp::kCopy:
        for (; i + nl <= i1; i += nl) hn::StoreU(hn::Mul(hn::LoadU(d, b + i), s), d, a + i);
        for (; i < i1; ++i) a[i] = b[i] * scale;
        break;
      case StreamOp::kWrite:
        for (; i + nl <= i1; i += nl) hn::StoreU(s, d, a + i);
        for (; i < i1; ++i) a[i] = scale;
        break;
      case StreamOp::kRead: {  // four independent sums: the loads, not the adds, limit
        auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
        for (; i + 4 * nl <= i1; i += 4 * nl) {
          s0 = hn::Add(s0, hn::LoadU(d, a + i));
          s1 = hn::Add(s1, hn::LoadU(d, a + i + nl));
          s2 = hn::Add(s2, hn::LoadU(d, a + i + 2 * nl));
          s3 = hn::Add(s3, hn::LoadU(d, a + i + 3 * nl));
        }
        float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
        for (; i < i1; ++i) sum += a[i];
        g_compute_sink = sum;
        break;
      }
    }
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::kernels::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::kernels::simd {
HWY_EXPORT(StreamImpl);

void Stream(StreamOp kernel, float* a, const float* b, std::int64_t n, float scale,
            const Context& ctx) {
  HWY_DYNAMIC_DISPATCH(StreamImpl)(kernel, a, b, n, scale, ctx);
}
}  // namespace posenc::kernels::simd
#endif  // HWY_ONCE
