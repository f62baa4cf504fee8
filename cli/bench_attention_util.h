// Helpers shared by the parts of `posenc bench attention`
// (cli/cmd_bench_attention.cc forward, cmd_bench_attention_backward.cc,
// cmd_bench_attention_decode.cc): pre-faulted inputs, the median, a
// measurement run in a forked child (so that its ru_maxrss high-water mark
// is its own), one torch baseline process per case, and the unmasked work
// of a causal attention.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_attention.h"
#include "bench_buffers.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"
#include "posenc/t5.h"

namespace posenc::cli::bench_attention {

inline long MaxRssKiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

inline double Median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
}

// n values in [-1, 1] from xorshift32, as float32 or bfloat16 storage
// (every page touched, page-aligned). Returns the storage as bytes.
inline BenchVector<unsigned char> Filled(DType dtype, std::size_t n, std::uint32_t seed) {
  BenchVector<unsigned char> bytes(n * DTypeSize(dtype));
  std::uint32_t state = seed * 2654435761u + 1u;
  for (std::size_t i = 0; i < n; ++i) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    const float x = static_cast<float>(state) * 0x1p-31f - 1.0f;
    if (dtype == DType::kFloat32) {
      std::memcpy(bytes.data() + 4 * i, &x, 4);
    } else {
      const std::uint16_t b = FloatToBF16(x).bits;
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    }
  }
  return bytes;
}

// The ALiBi slopes 2^(-8 (h + 1) / H) of the benchmarks.
inline std::vector<double> BenchSlopes(std::int64_t heads) {
  std::vector<double> slopes;
  for (std::int64_t h = 0; h < heads; ++h) {
    slopes.push_back(std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(heads)));
  }
  return slopes;
}

// The scheme of a benchmark case ("none", "alibi", "t5", "rope"): the
// parameters every part of `bench attention` times, and the T5 table they
// point to (kept alive with them).
struct BenchScheme {
  PositionScheme scheme;
  std::unique_ptr<T5BiasTable> t5;
};

inline BenchScheme MakeBenchScheme(const std::string& name, std::int64_t heads,
                                   std::int64_t head_dim) {
  BenchScheme b;
  if (name == "alibi") {
    b.scheme = AlibiScheme(BenchSlopes(heads));
  } else if (name == "t5") {
    T5BucketParams tp;
    tp.direction = T5Direction::kCausal;
    b.t5 = std::make_unique<T5BiasTable>(tp, heads);
    b.t5->InitNormal(7, 1.0);
    b.scheme = T5Scheme(*b.t5);
  } else if (name == "rope") {
    RopeParams rp;
    rp.head_dim = head_dim;
    b.scheme = RopeScheme(rp);
  } else if (name != "none") {
    throw InvalidArgument("scheme: got '" + name + "', expected none, alibi, t5 or rope");
  }
  return b;
}

// Runs `measure` in a forked child and returns its Reply (a trivially
// copyable struct with `int ok` and `char error[240]`). `what` names the
// case in the IoError thrown when the child fails.
template <typename Reply>
Reply RunInChild(const std::function<Reply()>& measure, const std::string& what) {
  int fds[2];
  if (pipe(fds) != 0) throw IoError("bench attention: cannot create a pipe");
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw IoError("bench attention: cannot fork a measuring child");
  if (pid == 0) {
    close(fds[0]);
    Reply r;
    try {
      r = measure();
      r.ok = 1;
    } catch (const std::exception& e) {
      std::snprintf(r.error, sizeof r.error, "%s", e.what());
    }
    const ssize_t w = write(fds[1], &r, sizeof r);
    _exit(w == static_cast<ssize_t>(sizeof r) ? 0 : 1);
  }
  close(fds[1]);
  Reply r;
  const ssize_t got = read(fds[0], &r, sizeof r);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != static_cast<ssize_t>(sizeof r) || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      !r.ok) {
    throw IoError(fmt::format("bench attention: the {} case failed{}", what,
                              r.error[0] ? std::string(": ") + r.error : ""));
  }
  return r;
}

// Runs `cmd` through the shell and parses what it prints as JSON; IoError
// "ARG: WHAT failed (...)" or "ARG: WHAT did not print JSON" otherwise.
inline nlohmann::json RunJsonCommand(const std::string& cmd, const std::string& what,
                                     const std::string& arg = "bench attention") {
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) throw IoError(arg + ": cannot run " + what);
  std::string text;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, pipe)) text.append(buf, n);
  const int status = pclose(pipe);
  if (status != 0) {
    throw IoError(arg + ": " + what + " failed (exit status " +
                  std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                  "); pass --no-torch to skip the PyTorch baselines");
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw IoError(arg + ": " + what + " did not print JSON");
  }
}

// One fresh python process running o.script with `spec`; its JSON reply.
inline nlohmann::json RunTorchCase(const nlohmann::json& spec, const AttentionBenchOptions& o) {
  std::string cmd;
  if (std::ifstream(o.jemalloc).good()) {
    cmd += "LD_PRELOAD=" + o.jemalloc + " MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 ";
  }
  cmd += "'" + o.python + "' '" + o.script + "' '" + spec.dump() + "'";
  return RunJsonCommand(cmd,
                        "the attention baseline '" + o.script + "' (next to it) run by " + o.python,
                        "--torch-script");
}

// The options of a measured posenc call: the bfloat16 cases run
// o.precision, the others float32 (bfloat16 precision needs bfloat16 inputs).
inline FlashAttentionOptions CaseOptions(const AttentionBenchOptions& o, DType dtype) {
  FlashAttentionOptions options;
  if (dtype == DType::kBFloat16) options.precision = o.precision;
  return options;
}
inline std::string CasePrecision(const AttentionBenchOptions& o, DType dtype) {
  return std::string(FlashPrecisionName(CaseOptions(o, dtype).precision));
}

inline nlohmann::json OrNull(double x, bool have) {
  return have ? nlohmann::json(x) : nlohmann::json();
}

// Visible (query, key) pairs of a causal self-attention of length S.
inline double CausalPairs(std::int64_t seq) {
  return static_cast<double>(seq) * static_cast<double>(seq + 1) / 2.0;
}

// The compute ceiling an entry of `dtype` inputs is judged against (the
// highest this CPU reaches for that dtype: bfloat16 products are exact in
// float32, so float32 FMAs count for them too, and win on CPUs whose
// VDPBF16PS is half-rate, kernels/simd/x86_features.h CpuBf16DotSlow) and
// its GFLOP/s (0: none).
inline std::pair<std::string, double> CeilingFor(const ComputeCeilings& c, DType dtype) {
  std::pair<std::string, double> best{"float32_fma", c.f32_fma};
  if (dtype != DType::kBFloat16) return best;
  if (c.bf16_dot > best.second) best = {"bfloat16_dot", c.bf16_dot};
  if (c.amx_bf16 > best.second) best = {"amx_bfloat16", c.amx_bf16};
  return best;
}

}  // namespace posenc::cli::bench_attention
