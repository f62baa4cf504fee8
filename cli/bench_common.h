// Shared pieces of `posenc bench` (cli/cmd_bench.cc and the per-family
// bench files such as cli/cmd_bench_bias.cc): options, one result row,
// the median timer and pre-faulted buffers. Methodology: docs/PERFORMANCE.md.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_buffers.h"
#include "posenc/context.h"

#ifndef POSENC_BENCH_SCRIPT
#define POSENC_BENCH_SCRIPT "bench/torch_baseline.py"
#endif

namespace posenc::cli {

// The PyTorch baseline script: PREFIX/share/posenc/bench/torch_baseline.py
// beside an installed PREFIX/bin/posenc, else the source tree's (compile-time).
inline std::string DefaultBenchScript() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path installed = exe.parent_path().parent_path();
    installed /= "share/posenc/bench/torch_baseline.py";
    if (std::filesystem::exists(installed, ec)) return installed.string();
  }
  return POSENC_BENCH_SCRIPT;
}

// The build tree's Python module (BUILD/python beside BUILD/cli/posenc), or
// "" when there is none (an installed posenc module is importable as is).
inline std::string DefaultPosencPython() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const std::filesystem::path dir = exe.parent_path().parent_path() / "python";
  return std::filesystem::exists(dir / "posenc", ec) ? dir.string() : "";
}

struct BenchOptions {
  std::string what = "all";
  int threads = 0;  // 0: hardware threads
  bool json = false;
  int reps = 10;
  int warmup = 3;
  std::int64_t max_seq = 16384;
  bool torch = true;
  std::string python = "/usr/bin/python3";
  std::string script = DefaultBenchScript();
  std::string jemalloc = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
  bool backward = false;              // attention: add the forward + backward cases
  bool decode = false;                // attention: add the decode cases
  std::string precision = "float32";  // attention: FlashPrecision of the bfloat16 cases
  std::string posenc_python;          // attention --backward: PYTHONPATH holding the posenc module
  std::int64_t llc_bytes = 0;         // last-level cache size (posenc/bandwidth.h LastLevelCache)
};

// One row of the report: a kernel, dtype and shape timed against a ceiling
// ("rmw", "copy" or "write") measured over the same bytes in the same run.
// cache_resident (in the JSON): the bytes it touches are < 4x the
// last-level cache, so repeated calls can be served partly from cache.
struct Result {
  std::string kernel, dtype, ceiling;
  std::vector<std::int64_t> shape;
  bool inplace = true;
  double ms = 0, bytes = 0, ceiling_ms = 0;
  double footprint = 0;     // distinct bytes touched (cache_resident: footprint < 4x the LLC)
  bool skip_torch = false;  // DRAM-sized cases: no torch baseline (its temporaries need GiBs)
  std::optional<double> torch_ms;  // empty: no baseline (--no-torch, or torch lacks the op)
  std::string torch_variant;
  nlohmann::json TorchCase(int id) const {
    return {{"id", id}, {"kernel", kernel}, {"dtype", dtype}, {"shape", shape}};
  }
};

// The median of t (the mean of the middle two for an even count).
inline double MedianOf(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
}

// Median of `reps` timed calls after `warmup` untimed ones, in ms.
inline double MedianMs(const std::function<void()>& fn, int reps, int warmup) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return MedianOf(std::move(t));
}

// Medians of `reps` calls of a kernel and of its ceiling, alternating call
// by call after `warmup` of each, in ms: both see the same minutes of a
// memory system shared with other tenants (timed one after the other, a
// ceiling moves more from run to run than the kernel it is compared with).
inline std::pair<double, double> MedianMsAlternating(const std::function<void()>& kernel,
                                                     const std::function<void()>& ceiling, int reps,
                                                     int warmup) {
  for (int i = 0; i < warmup; ++i) {
    kernel();
    ceiling();
  }
  const auto ms = [](const std::function<void()>& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> tk, tc;
  for (int i = 0; i < reps; ++i) {
    tk.push_back(ms(kernel));
    tc.push_back(ms(ceiling));
  }
  return {MedianOf(std::move(tk)), MedianOf(std::move(tc))};
}

// Pre-faulted, page-aligned buffer of floats (bytes / 4, rounded up) filled with values in [-1, 1].
inline BenchVector<float> Buffer(std::int64_t bytes, std::uint32_t seed) {
  BenchVector<float> v(static_cast<std::size_t>((bytes + 3) / 4));
  std::uint32_t state = seed * 2654435761u + 1u;  // xorshift32: cheap, fills 512 MB quickly
  for (auto& x : v) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    x = static_cast<float>(state) * 0x1p-31f - 1.0f;  // [-1, 1], also sane as 16-bit pairs
  }
  return v;
}

// `posenc bench bias` (cli/cmd_bench_bias.cc): ALiBi and T5 bias matrices.
void BenchBias(const BenchOptions& o, const Context& ctx, std::vector<Result>& out);

}  // namespace posenc::cli
