// `posenc bench attention`: the fused CPU attention (posenc::FlashAttention)
// against PyTorch eager with the bias materialised and against the reference
// attention (posenc::AttentionReference). Methodology (docs/PERFORMANCE.md):
//  - Cases: schemes alibi, t5, rope, none; causal; batch 1, 8 heads,
//    head_dim 64, bshd; S = 1024, 4096, 16384 (up to --max-seq; below 1024
//    the single S = --max-seq, for smoke runs); posenc with float32 inputs
//    and output, then with bfloat16 inputs and output; default tiles.
//  - Every posenc case runs in a forked child: q, k, v, out are allocated
//    and filled (every page touched) and the thread pool is started, then
//    ru_maxrss (the high-water resident set) is read before and after the
//    warm-up and timed calls: the difference is the peak extra memory of
//    the call (packed K/V tiles, scratch, thread stacks touched), measured,
//    not estimated. Time: median of min(--reps, 5) calls after
//    min(--warmup, 1) warm-up calls (an S = 16384 call takes seconds).
//  - For S <= 1024 the float32 child also times one AttentionReference call
//    (float64 scalar loops, same threads) and reports the max |flash -
//    reference| of the outputs: the benchmark checks what it times.
//  - torch: bench/torch_attention.py, one fresh /usr/bin/python3 process
//    per (scheme, S) with jemalloc preloaded and torch.set_num_threads(N);
//    bfloat16 eager, bias + causal mask materialised; its own ru_maxrss
//    delta. Skipped (null) when its [H, S, S] buffers would exceed 16 GiB
//    (~12 bytes per score: bf16 bias, bf16 scores, float32 softmax, bf16
//    probabilities), i.e. at S = 16384.
#include "bench_attention.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "posenc/error.h"
#include "posenc/flash_attention.h"

namespace posenc::cli {
namespace {

constexpr std::int64_t kHeads = 8, kHeadDim = 64;
constexpr double kTorchLimitBytes = 16.0 * (1u << 30);

struct ChildReply {
  double ms = 0, ref_ms = -1, ref_err = -1;
  long extra_kib = 0;
  int ok = 0;
  char error[240] = {};
};

long MaxRssKiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

double Median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
}

// Values in [-1, 1] from xorshift32, stored as `dtype` (every page touched).
void Fill(std::vector<float>& f32, std::vector<std::uint16_t>& b16, DType dtype, std::size_t n,
          std::uint32_t seed) {
  std::uint32_t state = seed * 2654435761u + 1u;
  if (dtype == DType::kFloat32) f32.resize(n);
  else b16.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    const float x = static_cast<float>(state) * 0x1p-31f - 1.0f;
    if (dtype == DType::kFloat32) f32[i] = x;
    else b16[i] = FloatToBF16(x).bits;
  }
}

// Runs in the forked child.
ChildReply MeasureInChild(const std::string& scheme, std::int64_t seq, DType dtype,
                          const AttentionBenchOptions& o) {
  ChildReply r;
  const auto n = static_cast<std::size_t>(seq * kHeads * kHeadDim);
  std::vector<float> qf, kf, vf, of;
  std::vector<std::uint16_t> qb, kb, vb, ob;
  Fill(qf, qb, dtype, n, 1);
  Fill(kf, kb, dtype, n, 2);
  Fill(vf, vb, dtype, n, 3);
  Fill(of, ob, dtype, n, 4);
  auto view = [&](std::vector<float>& f, std::vector<std::uint16_t>& b) {
    void* data = dtype == DType::kFloat32 ? static_cast<void*>(f.data()) : static_cast<void*>(b.data());
    return TensorView::Contiguous(data, dtype, {1, seq, kHeads, kHeadDim});
  };
  const TensorView q = view(qf, qb), k = view(kf, kb), v = view(vf, vb), out = view(of, ob);
  AttentionParams params;
  params.mask = AttentionMask::kCausal;
  std::unique_ptr<T5BiasTable> t5;
  if (scheme == "alibi") {
    std::vector<double> slopes;
    for (std::int64_t h = 0; h < kHeads; ++h) slopes.push_back(std::exp2(-8.0 * static_cast<double>(h + 1) / kHeads));
    params.scheme = PositionScheme::FromAlibi(slopes);
  } else if (scheme == "t5") {
    T5BucketParams tp;
    tp.direction = T5Direction::kCausal;
    t5 = std::make_unique<T5BiasTable>(tp, kHeads);
    t5->InitNormal(7, 1.0);
    params.scheme = PositionScheme::FromT5(*t5);
  } else if (scheme == "rope") {
    RopeParams rp;
    rp.head_dim = kHeadDim;
    params.scheme = PositionScheme::FromRope(rp);
  }
  const Context ctx(o.threads);
  const long before = MaxRssKiB();
  auto call = [&] { FlashAttention(params, q, k, v, out, FlashAttentionOptions{}, ctx); };
  for (int i = 0; i < std::min(o.warmup, 1); ++i) call();
  std::vector<double> times;
  for (int i = 0; i < std::min(o.reps, 5); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  r.extra_kib = MaxRssKiB() - before;
  r.ms = Median(times);
  if (seq <= 1024 && dtype == DType::kFloat32) {
    std::vector<float> ref(n);
    const auto t0 = std::chrono::steady_clock::now();
    AttentionReference(params, q, k, v,
                       TensorView::Contiguous(ref.data(), DType::kFloat32, {1, seq, kHeads, kHeadDim}),
                       nullptr, ctx);
    r.ref_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    r.ref_err = 0.0;
    for (std::size_t i = 0; i < n; ++i) r.ref_err = std::max(r.ref_err, double(std::abs(ref[i] - of[i])));
  }
  r.ok = 1;
  return r;
}

ChildReply MeasurePosenc(const std::string& scheme, std::int64_t seq, DType dtype,
                         const AttentionBenchOptions& o) {
  int fds[2];
  if (pipe(fds) != 0) throw IoError("bench attention: cannot create a pipe");
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw IoError("bench attention: cannot fork a measuring child");
  if (pid == 0) {
    close(fds[0]);
    ChildReply r;
    try {
      r = MeasureInChild(scheme, seq, dtype, o);
    } catch (const std::exception& e) {
      std::snprintf(r.error, sizeof r.error, "%s", e.what());
    }
    const ssize_t w = write(fds[1], &r, sizeof r);
    _exit(w == static_cast<ssize_t>(sizeof r) ? 0 : 1);
  }
  close(fds[1]);
  ChildReply r;
  const ssize_t got = read(fds[0], &r, sizeof r);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != static_cast<ssize_t>(sizeof r) || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !r.ok) {
    throw IoError(fmt::format("bench attention: the {} S={} {} case failed{}", scheme, seq,
                              DTypeName(dtype), r.error[0] ? std::string(": ") + r.error : ""));
  }
  return r;
}

// One fresh python process per case; returns its JSON reply.
nlohmann::json RunTorchCase(const std::string& scheme, std::int64_t seq, int threads,
                            const AttentionBenchOptions& o) {
  const nlohmann::json spec = {{"scheme", scheme}, {"seq", seq}, {"heads", kHeads},
                               {"head_dim", kHeadDim}, {"threads", threads},
                               {"reps", std::min(o.reps, 5)}, {"warmup", std::min(o.warmup, 1)}};
  std::string cmd;
  if (std::ifstream(o.jemalloc).good()) {
    cmd += "LD_PRELOAD=" + o.jemalloc + " MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 ";
  }
  cmd += "'" + o.python + "' '" + o.script + "' '" + spec.dump() + "'";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) throw IoError("bench attention: cannot run " + o.python);
  std::string text;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, pipe)) text.append(buf, n);
  const int status = pclose(pipe);
  if (status != 0) {
    throw IoError("--torch-script: the attention baseline '" + o.script + "' (next to it) run by " + o.python +
                  " failed (exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                  "); pass --no-torch to skip the baseline");
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw IoError("--torch-script: the attention baseline '" + o.script + "' did not print JSON");
  }
}

nlohmann::json OrNull(double x, bool have) { return have ? nlohmann::json(x) : nlohmann::json(); }

}  // namespace

std::vector<nlohmann::json> RunAttentionBench(const AttentionBenchOptions& o, nlohmann::json& machine) {
  std::vector<std::int64_t> seqs;
  for (const std::int64_t s : {1024, 4096, 16384}) {
    if (s <= o.max_seq) seqs.push_back(s);
  }
  if (o.max_seq < 1024) seqs.push_back(o.max_seq);
  std::vector<nlohmann::json> entries;
  for (const std::string scheme : {"alibi", "t5", "rope", "none"}) {
    for (const std::int64_t seq : seqs) {
      bool have_torch = false;
      double torch_ms = 0, torch_mib = 0;
      const double torch_bytes = 12.0 * static_cast<double>(seq) * static_cast<double>(seq) * kHeads;
      if (o.torch && torch_bytes <= kTorchLimitBytes) {
        const nlohmann::json t = RunTorchCase(scheme, seq, o.threads, o);
        torch_ms = t.at("ms").get<double>();
        torch_mib = t.at("peak_extra_mib").get<double>();
        have_torch = true;
        machine["torch"] = t.value("torch", "");
        machine["torch_threads"] = t.value("torch_threads", 0);
      }
      for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
        const ChildReply r = MeasurePosenc(scheme, seq, dtype, o);
        const double mib = static_cast<double>(r.extra_kib) / 1024.0;
        entries.push_back({{"kernel", "attention"}, {"scheme", scheme}, {"seq", seq},
                           {"heads", kHeads}, {"head_dim", kHeadDim}, {"causal", true},
                           {"threads", o.threads}, {"dtype", std::string(DTypeName(dtype))},
                           {"ms", r.ms}, {"peak_extra_mib", mib},
                           {"torch_ms", OrNull(torch_ms, have_torch)},
                           {"torch_peak_mib", OrNull(torch_mib, have_torch)},
                           {"speedup_vs_torch", OrNull(torch_ms / r.ms, have_torch)},
                           {"reference_ms", OrNull(r.ref_ms, r.ref_ms >= 0)},
                           {"reference_max_abs_err", OrNull(r.ref_err, r.ref_err >= 0)},
                           {"reps", std::min(o.reps, 5)}});
      }
    }
  }
  return entries;
}

void PrintAttentionTable(const std::vector<nlohmann::json>& entries, std::ostream& out) {
  out << fmt::format("{:<9} {:<6} {:<9} {:>7} {:>10} {:>11} {:>10} {:>10} {:>8} {:>12}\n", "attention",
                     "seq", "dtype", "threads", "ms", "extra MiB", "torch ms", "torch MiB", "speedup",
                     "reference ms");
  auto num = [](const nlohmann::json& x, const char* f) {
    return x.is_null() ? std::string("-") : fmt::format(fmt::runtime(f), x.get<double>());
  };
  for (const nlohmann::json& e : entries) {
    out << fmt::format("{:<9} {:<6} {:<9} {:>7} {:>10.1f} {:>11.1f} {:>10} {:>10} {:>8} {:>12}\n",
                       e["scheme"].get<std::string>(), e["seq"].get<std::int64_t>(),
                       e["dtype"].get<std::string>(), e["threads"].get<int>(), e["ms"].get<double>(),
                       e["peak_extra_mib"].get<double>(), num(e["torch_ms"], "{:.1f}"),
                       num(e["torch_peak_mib"], "{:.1f}"), num(e["speedup_vs_torch"], "{:.2f}x"),
                       num(e["reference_ms"], "{:.1f}"));
  }
}

}  // namespace posenc::cli
