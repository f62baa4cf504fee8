// SIMD (Highway) STREAM-like kernels behind posenc/bandwidth.h (validated
// and named in src/core/bandwidth.cc): one dynamic dispatch per call, then
// ctx.ParallelFor over 256 KiB tasks. Arguments are not validated here.
#pragma once

#include <cstdint>

#include "posenc/context.h"

namespace posenc::kernels::simd {

// The loops (the public names and byte counts are posenc/bandwidth.h's
// StreamKernel, mapped in src/core/bandwidth.cc; kernels include only the
// plain-data public headers).
enum class StreamOp : std::uint8_t {
  kReadModifyWrite,  // a[i] = a[i] * scale
  kCopy,             // a[i] = b[i] * scale
  kWrite,            // a[i] = scale
  kRead,             // sum of a[i] (the sum goes to a volatile sink)
};

// Runs `op` over i < n.
void Stream(StreamOp op, float* a, const float* b, std::int64_t n, float scale, const Context& ctx);

}  // namespace posenc::kernels::simd
