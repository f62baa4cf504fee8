// posenc/bandwidth.h: names, byte counts and argument validation of the
// STREAM-like ceiling kernels; the loops are kernels/simd/stream.*.
#include "posenc/bandwidth.h"

#include "kernels/simd/stream.h"
#include "posenc/error.h"

namespace posenc {

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
  const kernels::simd::StreamOp op = kernel == StreamKernel::kReadModifyWrite
                                          ? kernels::simd::StreamOp::kReadModifyWrite
                                      : kernel == StreamKernel::kCopy ? kernels::simd::StreamOp::kCopy
                                                                      : kernels::simd::StreamOp::kWrite;
  kernels::simd::Stream(op, a, b, n, scale, ctx);
}

}  // namespace posenc
