// posenc/bandwidth.h: names, byte counts and argument validation of the
// STREAM-like and compute ceiling kernels (the loops are kernels/simd/stream.*
// and kernels/simd/compute*), and the last-level cache size.
#include "posenc/bandwidth.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "kernels/simd/compute.h"
#include "kernels/simd/stream.h"
#include "kernels/simd/x86_features.h"
#include "posenc/error.h"

namespace posenc {

std::string_view StreamKernelName(StreamKernel kernel) {
  switch (kernel) {
    case StreamKernel::kReadModifyWrite:
      return "rmw";
    case StreamKernel::kCopy:
      return "copy";
    case StreamKernel::kWrite:
      return "write";
    case StreamKernel::kRead:
      return "read";
  }
  return "?";
}

std::int64_t StreamKernelBytes(StreamKernel kernel, std::int64_t n) {
  return kernel == StreamKernel::kWrite || kernel == StreamKernel::kRead ? 4 * n : 8 * n;
}

void RunStreamKernel(StreamKernel kernel, float* a, const float* b, std::int64_t n, float scale,
                     const Context& ctx) {
  Require(a != nullptr, "a", "null", "a non-null pointer");
  Require(n >= 1, "n", n, "at least 1 element");
  if (kernel == StreamKernel::kCopy) {
    Require(b != nullptr, "b", "null", "a non-null source for the copy kernel");
    Require(b + n <= a || a + n <= b, "b", "overlapping a", "a source disjoint from a");
  }
  using kernels::simd::StreamOp;
  const StreamOp op = kernel == StreamKernel::kReadModifyWrite ? StreamOp::kReadModifyWrite
                      : kernel == StreamKernel::kCopy          ? StreamOp::kCopy
                      : kernel == StreamKernel::kWrite         ? StreamOp::kWrite
                                                               : StreamOp::kRead;
  kernels::simd::Stream(op, a, b, n, scale, ctx);
}

std::string_view ComputeKernelName(ComputeKernel kernel) {
  switch (kernel) {
    case ComputeKernel::kFloat32Fma:
      return "float32_fma";
    case ComputeKernel::kBFloat16Dot:
      return "bfloat16_dot";
    case ComputeKernel::kAmxBFloat16:
      return "amx_bfloat16";
  }
  return "?";
}

std::string_view ComputeKernelDType(ComputeKernel kernel) {
  return kernel == ComputeKernel::kFloat32Fma ? "float32" : "bfloat16";
}

bool ComputeKernelAvailable(ComputeKernel kernel) {
  switch (kernel) {
    case ComputeKernel::kFloat32Fma:
      return true;
    case ComputeKernel::kBFloat16Dot:
      return kernels::simd::CpuHasAvx512Bf16();
    case ComputeKernel::kAmxBFloat16:
      return kernels::simd::AmxAvailable();
  }
  return false;
}

std::string ComputeKernelStatus(ComputeKernel kernel) {
  if (kernel == ComputeKernel::kAmxBFloat16) return kernels::simd::AmxStatus();
  if (ComputeKernelAvailable(kernel)) return "available";
  return "the CPU has no AVX512F + AVX512_BF16";
}

double RunComputeKernel(ComputeKernel kernel, std::int64_t iterations, const Context& ctx) {
  Require(iterations >= 1, "iterations", iterations, "at least 1");
  if (!(ComputeKernelAvailable(kernel))) {
    FailArgument("kernel", std::string(ComputeKernelName(kernel)),
                 "a kernel this CPU runs (" + ComputeKernelStatus(kernel) + ")");
  }
  constexpr std::int64_t kTasksPerThread = 8;
  const std::int64_t tasks = kTasksPerThread * ctx.num_threads();
  const std::int64_t per_task = std::max<std::int64_t>(1, iterations / kTasksPerThread);
  std::vector<double> flops(static_cast<std::size_t>(tasks), 0.0);
  ctx.ParallelFor(tasks, [&](std::int64_t task, int) {
    double& f = flops[static_cast<std::size_t>(task)];
    switch (kernel) {
      case ComputeKernel::kFloat32Fma:
        f = kernels::simd::ComputeFloat32Fma(per_task);
        break;
      case ComputeKernel::kBFloat16Dot:
        f = kernels::simd::ComputeBf16Dot(per_task);
        break;
      case ComputeKernel::kAmxBFloat16:
        f = kernels::simd::ComputeAmxBf16(per_task);
        break;
    }
  });
  double total = 0.0;
  for (double f : flops) total += f;
  return total;
}

namespace {

// "32768K", "1M", "512" -> bytes; 0 when malformed.
std::int64_t ParseCacheSize(const std::string& text) {
  std::size_t used = 0;
  std::int64_t n = 0;
  try {
    n = std::stoll(text, &used);
  } catch (...) {
    return 0;
  }
  const std::string unit = text.substr(used);
  if (unit.rfind("K", 0) == 0) return n << 10;
  if (unit.rfind("M", 0) == 0) return n << 20;
  if (unit.rfind("G", 0) == 0) return n << 30;
  return n;
}

}  // namespace

CacheInfo LastLevelCache() {
  CacheInfo info;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level_in(dir + "/level"), size_in(dir + "/size"), type_in(dir + "/type");
    int level = 0;
    std::string size, type;
    if (!(level_in >> level) || !(size_in >> size)) continue;
    type_in >> type;
    if (type == "Instruction") continue;
    if (level > info.level) {
      info.level = level;
      info.bytes = ParseCacheSize(size);
      info.source = "sysfs";
    }
  }
  if (info.bytes > 0) return info;
  for (const auto& [name, level] :
       {std::pair{_SC_LEVEL3_CACHE_SIZE, 3}, std::pair{_SC_LEVEL2_CACHE_SIZE, 2}}) {
    const long bytes = sysconf(name);
    if (bytes > 0) {
      info.bytes = bytes;
      info.level = level;
      info.source = "sysconf";
      return info;
    }
  }
  info = CacheInfo{};
  info.source = "unknown";
  return info;
}

}  // namespace posenc
