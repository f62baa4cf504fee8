// posenc/bandwidth.h: the machine ceilings posenc's kernels are judged
// against (`posenc bench`, docs/PERFORMANCE.md).
//
// Bandwidth: STREAM-like reference kernels (McCalpin's STREAM,
// https://www.cs.virginia.edu/stream/) that measure the memory-bandwidth
// ceiling posenc's memory-bound kernels are judged against (`posenc bench`,
// docs/PERFORMANCE.md). They use the same SIMD dispatch (Highway, best
// target of this CPU) and the same Context thread pool as the kernels, and
// touch exactly the bytes given, so a kernel and its ceiling are measured
// over the same memory with the same threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "posenc/context.h"

namespace posenc {

enum class StreamKernel : std::uint8_t {
  kReadModifyWrite,  // a[i] = a[i] * scale   (bytes: 8 per element, read + written)
  kCopy,             // a[i] = b[i] * scale   (bytes: 8 per element)
  kWrite,            // a[i] = scale          (bytes: 4 per element)
  kRead,             // sum of a[i]           (bytes: 4 per element, read only)
};

std::string_view StreamKernelName(StreamKernel kernel);  // "rmw", "copy", "write", "read"

// Bytes moved (read + written) by one pass over n elements.
std::int64_t StreamKernelBytes(StreamKernel kernel, std::int64_t n);

// One pass over n float32 elements, split into 256 KiB tasks run with
// ctx.ParallelFor (always SIMD, whatever ctx.backend()). b is read only by
// kCopy (must not overlap a; may be null otherwise). Throws InvalidArgument
// for null pointers, n < 1 or overlapping a and b.
void RunStreamKernel(StreamKernel kernel, float* a, const float* b, std::int64_t n, float scale,
                     const Context& ctx = Context{});

// Compute: peak-rate kernels of independent multiply-adds held in
// registers, enough independent accumulators to hide the latency
// (kernels/simd/compute.h), run on every thread of a Context at once, the
// ceiling a compute-bound kernel (the fused attention) is judged against.
enum class ComputeKernel : std::uint8_t {
  kFloat32Fma,   // vector float32 FMA, the best Highway target (any CPU)
  kBFloat16Dot,  // AVX512_BF16 VDPBF16PS (bfloat16 pairs, float32 sums)
  kAmxBFloat16,  // AMX TDPBF16PS on 16 x 16 float32 tiles
};
std::string_view ComputeKernelName(
    ComputeKernel kernel);  // "float32_fma", "bfloat16_dot", "amx_bfloat16"
std::string_view ComputeKernelDType(ComputeKernel kernel);  // "float32", "bfloat16"

// True when this CPU (and, for AMX, the kernel's permission, requested once
// per process with arch_prctl) runs the kernel.
bool ComputeKernelAvailable(ComputeKernel kernel);
// Why a kernel is or is not available ("available", "no AVX512_BF16", the
// AMX permission request's result, ...).
std::string ComputeKernelStatus(ComputeKernel kernel);

// Runs `iterations` steps of the kernel on each of ctx's threads at once
// (8 tasks per thread, whatever ctx.backend()); returns the floating-point
// operations done (2 per multiply-add): divide by the wall time for FLOP/s.
// Throws InvalidArgument for iterations < 1 and for a kernel this CPU does
// not run (naming the kernel and ComputeKernelStatus).
double RunComputeKernel(ComputeKernel kernel, std::int64_t iterations,
                        const Context& ctx = Context{});

// The last-level cache: its size in bytes (0 when unknown) and where it was
// read. From sysfs (/sys/devices/system/cpu/cpu0/cache/index*/{level,size}:
// the highest level's "size"), else sysconf(_SC_LEVEL3_CACHE_SIZE, then
// _SC_LEVEL2_CACHE_SIZE) (glibc reads CPUID). A buffer of >= 4x this size is
// DRAM-sized for the bandwidth figures of `posenc bench`.
struct CacheInfo {
  std::int64_t bytes = 0;
  int level = 0;
  std::string source;  // "sysfs", "sysconf", "unknown"
};
CacheInfo LastLevelCache();

}  // namespace posenc
