// STREAM-like bandwidth reference kernels of posenc/bandwidth.h (Highway;
// one dynamic dispatch per call, then ctx.ParallelFor over 256 KiB tasks).
#include "posenc/bandwidth.h"

#include <algorithm>
#include <string>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/stream.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "posenc/error.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::kernels::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void StreamImpl(StreamKernel kernel, float* a, const float* b, std::int64_t n, float scale,
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
      case StreamKernel::kReadModifyWrite:
        for (; i + nl <= i1; i += nl) hn::StoreU(hn::Mul(hn::LoadU(d, a + i), s), d, a + i);
        for (; i < i1; ++i) a[i] *= scale;
        break;
      case StreamKernel::kCopy:
        for (; i + nl <= i1; i += nl) hn::StoreU(hn::Mul(hn::LoadU(d, b + i), s), d, a + i);
        for (; i < i1; ++i) a[i] = b[i] * scale;
        break;
      case StreamKernel::kWrite:
        for (; i + nl <= i1; i += nl) hn::StoreU(s, d, a + i);
        for (; i < i1; ++i) a[i] = scale;
        break;
    }
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::kernels::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc {
namespace kernels::simd {
HWY_EXPORT(StreamImpl);
}  // namespace kernels::simd

std::string_view StreamKernelName(StreamKernel kernel) {
  switch (kernel) {
    case StreamKernel::kReadModifyWrite: return "rmw";
    case StreamKernel::kCopy: return "copy";
    case StreamKernel::kWrite: return "write";
  }
  return "?";
}

std::int64_t StreamKernelBytes(StreamKernel kernel, std::int64_t n) {
  return kernel == StreamKernel::kWrite ? 4 * n : 8 * n;
}

void RunStreamKernel(StreamKernel kernel, float* a, const float* b, std::int64_t n, float scale,
                     const Context& ctx) {
  Require(a != nullptr, "a", "null", "a non-null pointer");
  Require(n >= 1, "n", n, "at least 1 element");
  if (kernel == StreamKernel::kCopy) {
    Require(b != nullptr, "b", "null", "a non-null source for the copy kernel");
    Require(b + n <= a || a + n <= b, "b", "overlapping a", "a source disjoint from a");
  }
  HWY_DYNAMIC_DISPATCH(kernels::simd::StreamImpl)(kernel, a, b, n, scale, ctx);
}

}  // namespace posenc
#endif  // HWY_ONCE
