// SIMD (Highway) STREAM-like kernels behind posenc/bandwidth.h (validated
// and named in src/core/bandwidth.cc): one dynamic dispatch per call, then
// ctx.ParallelFor over 256 KiB tasks. Arguments are not validated here.
#pragma once

#include <cstdint>

#include "posenc/bandwidth.h"
#include "posenc/context.h"

namespace posenc::kernels::simd {

// a[i] = a[i] * scale (rmw), a[i] = b[i] * scale (copy), a[i] = scale
// (write), sum of a[i] (read; the sum goes to a volatile sink), i < n.
void Stream(StreamKernel kernel, float* a, const float* b, std::int64_t n, float scale,
            const Context& ctx);

}  // namespace posenc::kernels::simd
