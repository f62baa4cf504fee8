// posenc/bandwidth.h: STREAM-like reference kernels (McCalpin's STREAM,
// https://www.cs.virginia.edu/stream/) that measure the memory-bandwidth
// ceiling posenc's memory-bound kernels are judged against (`posenc bench`,
// docs/PERFORMANCE.md). They use the same SIMD dispatch (Highway, best
// target of this CPU) and the same Context thread pool as the kernels, and
// touch exactly the bytes given, so a kernel and its ceiling are measured
// over the same memory with the same threads.
#pragma once

#include <cstdint>
#include <string_view>

#include "posenc/context.h"

namespace posenc {

enum class StreamKernel : std::uint8_t {
  kReadModifyWrite,  // a[i] = a[i] * scale   (bytes: 8 per element, read + written)
  kCopy,             // a[i] = b[i] * scale   (bytes: 8 per element)
  kWrite,            // a[i] = scale          (bytes: 4 per element)
};

std::string_view StreamKernelName(StreamKernel kernel);  // "rmw", "copy", "write"

// Bytes moved (read + written) by one pass over n elements.
std::int64_t StreamKernelBytes(StreamKernel kernel, std::int64_t n);

// One pass over n float32 elements, split into 256 KiB tasks run with
// ctx.ParallelFor (always SIMD, whatever ctx.backend()). b is read only by
// kCopy (must not overlap a; may be null otherwise). Throws InvalidArgument
// for null pointers, n < 1 or overlapping a and b.
void RunStreamKernel(StreamKernel kernel, float* a, const float* b, std::int64_t n, float scale,
                     const Context& ctx = Context{});

}  // namespace posenc
