// `posenc bench attention`: the fused CPU attention (posenc::FlashAttention)
// against PyTorch eager with the bias materialised and against the reference
// attention (posenc::AttentionReference). Methodology: docs/PERFORMANCE.md;
// the cases, the measurement and the JSON fields are described above
// RunAttentionBench, MeasureInChild, RunTorchCase and kTorchLimitBytes.
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

#include "bench_attention_util.h"
#include "posenc/bandwidth.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"

namespace posenc::cli {
namespace {

using bench_attention::CausalPairs;
using bench_attention::CeilingFor;
using bench_attention::Filled;
using bench_attention::MaxRssKiB;
using bench_attention::Median;
using bench_attention::OrNull;

constexpr std::int64_t kHeads = 8, kHeadDim = 64;
// torch is skipped (null) when its [H, S, S] buffers would exceed this
// (~12 bytes per score: bf16 bias, bf16 scores, float32 softmax, bf16
// probabilities), i.e. at S = 16384.
constexpr double kTorchLimitBytes = 16.0 * (1u << 30);

struct ChildReply {
  double ms = 0, ref_ms = -1, ref_err = -1;
  long extra_kib = 0;
  int ok = 0;
  char error[240] = {};
};

// Runs in the forked child (MeasurePosenc): q, k, v, out are allocated and
// filled (every page touched) and the thread pool is started, then ru_maxrss
// (the high-water resident set) is read before and after the warm-up and
// timed calls: the difference is the peak extra memory of the call (packed
// K/V tiles, scratch, thread stacks touched), measured, not estimated. Time:
// median of min(--reps, 5) calls after min(--warmup, 1) warm-up calls (an
// S = 16384 call takes seconds). For S <= 1024 the float32 child also times
// one AttentionReference call (float64 scalar loops, same threads) and
// reports the max |flash - reference| of the outputs: the benchmark checks
// what it times.
ChildReply MeasureInChild(const std::string& scheme, std::int64_t seq, DType dtype,
                          const AttentionBenchOptions& o) {
  ChildReply r;
  const auto n = static_cast<std::size_t>(seq * kHeads * kHeadDim);
  BenchVector<unsigned char> qb = Filled(dtype, n, 1), kb = Filled(dtype, n, 2),
                             vb = Filled(dtype, n, 3), ob = Filled(dtype, n, 4);
  auto view = [&](BenchVector<unsigned char>& b) {
    return TensorView::Contiguous(b.data(), dtype, {1, seq, kHeads, kHeadDim});
  };
  const TensorView q = view(qb), k = view(kb), v = view(vb), out = view(ob);
  AttentionParams params;
  params.mask = AttentionMask::kCausal;
  const bench_attention::BenchScheme bs =
      bench_attention::MakeBenchScheme(scheme, kHeads, kHeadDim);
  params.scheme = bs.scheme;
  const Context ctx(o.threads);
  const long before = MaxRssKiB();
  const FlashAttentionOptions options = bench_attention::CaseOptions(o, dtype);
  auto call = [&] { FlashAttention(params, q, k, v, out, options, ctx); };
  for (int i = 0; i < std::min(o.warmup, 1); ++i) call();
  std::vector<double> times;
  for (int i = 0; i < std::min(o.reps, 5); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  r.extra_kib = MaxRssKiB() - before;
  r.ms = Median(times);
  if (seq <= 1024 && dtype == DType::kFloat32) {
    std::vector<float> ref(n);
    const auto t0 = std::chrono::steady_clock::now();
    AttentionReference(
        params, q, k, v,
        TensorView::Contiguous(ref.data(), DType::kFloat32, {1, seq, kHeads, kHeadDim}), nullptr,
        ctx);
    r.ref_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    r.ref_err = 0.0;
    const auto* of = reinterpret_cast<const float*>(ob.data());
    for (std::size_t i = 0; i < n; ++i)
      r.ref_err = std::max(r.ref_err, double(std::abs(ref[i] - of[i])));
  }
  return r;
}

ChildReply MeasurePosenc(const std::string& scheme, std::int64_t seq, DType dtype,
                         const AttentionBenchOptions& o) {
  return bench_attention::RunInChild<ChildReply>(
      [&] { return MeasureInChild(scheme, seq, dtype, o); },
      fmt::format("{} S={} {}", scheme, seq, DTypeName(dtype)));
}

// bench/torch_attention.py, one fresh /usr/bin/python3 process per (scheme,
// S) with jemalloc preloaded and torch.set_num_threads(N); bfloat16 eager,
// bias + causal mask materialised; its own ru_maxrss delta.
nlohmann::json RunTorchCase(const std::string& scheme, std::int64_t seq, int threads,
                            const AttentionBenchOptions& o) {
  const nlohmann::json spec = {{"mode", "forward"},
                               {"scheme", scheme},
                               {"seq", seq},
                               {"heads", kHeads},
                               {"head_dim", kHeadDim},
                               {"threads", threads},
                               {"reps", std::min(o.reps, 5)},
                               {"warmup", std::min(o.warmup, 1)}};
  return bench_attention::RunTorchCase(spec, o);
}

}  // namespace

ComputeCeilings MeasureComputeCeilings(int threads, int /*reps*/, nlohmann::json& machine) {
  ComputeCeilings c;
  const Context ctx(threads);
  nlohmann::json list = nlohmann::json::array(), missing = nlohmann::json::object();
  for (const ComputeKernel kernel :
       {ComputeKernel::kFloat32Fma, ComputeKernel::kBFloat16Dot, ComputeKernel::kAmxBFloat16}) {
    const std::string name(ComputeKernelName(kernel));
    if (!ComputeKernelAvailable(kernel)) {
      missing[name] = ComputeKernelStatus(kernel);
      continue;
    }
    // ~0.1 s per measurement on one core at the float32 FMA rate.
    const std::int64_t iterations = kernel == ComputeKernel::kAmxBFloat16 ? 200000 : 4000000;
    RunComputeKernel(kernel, iterations / 4, ctx);  // warm-up (clocks, pool)
    // The best of 5 runs: a ceiling is what the machine can do, and a run
    // that a neighbour's job interrupts only lowers it.
    double gflops = 0.0;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const double flops = RunComputeKernel(kernel, iterations, ctx);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      gflops = std::max(gflops, flops / s / 1e9);
    }
    (kernel == ComputeKernel::kFloat32Fma    ? c.f32_fma
     : kernel == ComputeKernel::kBFloat16Dot ? c.bf16_dot
                                             : c.amx_bf16) = gflops;
    list.push_back({{"kernel", name},
                    {"dtype", std::string(ComputeKernelDType(kernel))},
                    {"gflops", gflops},
                    {"threads", threads}});
  }
  machine["compute_ceilings"] = list;
  machine["compute_unavailable"] = missing;
  return c;
}

// Cases: schemes alibi, t5, rope, none; causal; batch 1, 8 heads, head_dim
// 64, bshd; S = 1024, 4096, 16384 (up to --max-seq; below 1024 the single
// S = --max-seq, for smoke runs); posenc with float32 inputs and output, then
// with bfloat16 inputs and output; default tiles.
// Compute: "gflops" counts the unmasked work only (2 (D + Dv) flops per
// visible (query, key) pair and head: S (S + 1) / 2 pairs under the causal
// mask); "fraction_of_compute" divides it by the compute ceiling of the
// inputs' dtype measured in the same run with the same threads
// (MeasureComputeCeilings: float32 FMA for float32 inputs; for bfloat16
// inputs the highest of float32 FMA, AVX512_BF16 dot products and AMX:
// CeilingFor), named in "compute_kernel".
std::vector<nlohmann::json> RunAttentionBench(const AttentionBenchOptions& o,
                                              const ComputeCeilings& ceilings,
                                              nlohmann::json& machine) {
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
      const double torch_bytes =
          12.0 * static_cast<double>(seq) * static_cast<double>(seq) * kHeads;
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
        const double gflops = 2.0 * 2.0 * kHeadDim * kHeads * CausalPairs(seq) / (r.ms * 1e6);
        const auto [ceiling_name, ceiling] = CeilingFor(ceilings, dtype);
        entries.push_back({{"kernel", "attention"},
                           {"scheme", scheme},
                           {"seq", seq},
                           {"heads", kHeads},
                           {"head_dim", kHeadDim},
                           {"causal", true},
                           {"threads", o.threads},
                           {"dtype", std::string(DTypeName(dtype))},
                           {"precision", bench_attention::CasePrecision(o, dtype)},
                           {"ms", r.ms},
                           {"peak_extra_mib", mib},
                           {"gflops", gflops},
                           {"fraction_of_compute", OrNull(gflops / ceiling, ceiling > 0)},
                           {"compute_kernel", ceiling_name},
                           {"torch_ms", OrNull(torch_ms, have_torch)},
                           {"torch_peak_mib", OrNull(torch_mib, have_torch)},
                           {"speedup_vs_torch", OrNull(torch_ms / r.ms, have_torch)},
                           {"reference_ms", OrNull(r.ref_ms, r.ref_ms >= 0)},
                           {"reference_max_abs_err", OrNull(r.ref_err, r.ref_err >= 0)},
                           {"reps", std::min(o.reps, 5)}});
      }
    }
  }
  if (o.backward) {
    for (auto& e : RunAttentionBackwardBench(o, ceilings, machine)) entries.push_back(std::move(e));
  }
  if (o.decode) {
    for (auto& e : RunAttentionDecodeBench(o, machine)) entries.push_back(std::move(e));
    for (auto& e : RunAttentionDecodeCBench(o)) entries.push_back(std::move(e));
  }
  return entries;
}

namespace {

// A nullable number formatted with `f`, or "-" for null.
std::string NumCell(const nlohmann::json& x, const char* f) {
  return x.is_null() ? std::string("-") : fmt::format(fmt::runtime(f), x.get<double>());
}

// "dtype" column: the inputs' dtype, "+bf16P" under bfloat16 precision.
std::string DtypeCell(const nlohmann::json& e) {
  return e["dtype"].get<std::string>() + (e.value("precision", "") == "bfloat16" ? "+bf16P" : "");
}

// Whether any entry's "kernel" is `kind`.
bool AnyKernel(const std::vector<nlohmann::json>& entries, const char* kind) {
  return std::any_of(entries.begin(), entries.end(),
                     [&](const nlohmann::json& e) { return e["kernel"] == kind; });
}

// Prints the forward ("attention") rows under their header, if there are any.
void PrintForwardRows(const std::vector<nlohmann::json>& entries, std::ostream& out) {
  if (AnyKernel(entries, "attention")) {
    out << fmt::format(
        "{:<9} {:<6} {:<14} {:>7} {:>10} {:>8} {:>6} {:>11} {:>10} {:>10} {:>8} "
        "{:>12}\n",
        "attention", "seq", "dtype", "threads", "ms", "GFLOP/s", "frac", "extra MiB", "torch ms",
        "torch MiB", "speedup", "reference ms");
  }
  for (const nlohmann::json& e : entries) {
    if (e["kernel"] != "attention") continue;
    out << fmt::format(
        "{:<9} {:<6} {:<14} {:>7} {:>10.1f} {:>8.1f} {:>6} {:>11.1f} {:>10} {:>10} "
        "{:>8} {:>12}\n",
        e["scheme"].get<std::string>(), e["seq"].get<std::int64_t>(), DtypeCell(e),
        e["threads"].get<int>(), e["ms"].get<double>(), e["gflops"].get<double>(),
        NumCell(e["fraction_of_compute"], "{:.2f}"), e["peak_extra_mib"].get<double>(),
        NumCell(e["torch_ms"], "{:.1f}"), NumCell(e["torch_peak_mib"], "{:.1f}"),
        NumCell(e["speedup_vs_torch"], "{:.2f}x"), NumCell(e["reference_ms"], "{:.1f}"));
  }
}

// Prints the "attention_backward" rows under their header, if there are any.
void PrintBackwardRows(const std::vector<nlohmann::json>& entries, std::ostream& out) {
  if (AnyKernel(entries, "attention_backward")) {
    out << fmt::format(
        "{:<9} {:<6} {:<14} {:>9} {:>9} {:>6} {:>8} {:>6} {:>9} {:>9} {:>10} {:>8}\n", "backward",
        "seq", "dtype", "fwd ms", "bwd ms", "b/f", "GFLOP/s", "frac", "extra MiB", "torch ms",
        "torch MiB", "speedup");
  }
  for (const nlohmann::json& e : entries) {
    if (e["kernel"] != "attention_backward") continue;
    out << fmt::format(
        "{:<9} {:<6} {:<14} {:>9.1f} {:>9.1f} {:>6.2f} {:>8.1f} {:>6} {:>9.1f} {:>9} "
        "{:>10} {:>8}\n",
        e["scheme"].get<std::string>(), e["seq"].get<std::int64_t>(), DtypeCell(e),
        e["forward_ms"].get<double>(), e["ms"].get<double>(),
        e["ms"].get<double>() / e["forward_ms"].get<double>(), e["gflops"].get<double>(),
        NumCell(e["fraction_of_compute"], "{:.2f}"), e["peak_extra_mib"].get<double>(),
        NumCell(e["torch_ms"], "{:.1f}"), NumCell(e["torch_peak_mib"], "{:.1f}"),
        NumCell(e["speedup_vs_torch"], "{:.2f}x"));
  }
}

// Prints the "attention_train_step" rows under their header, if there are any.
void PrintTrainStepRows(const std::vector<nlohmann::json>& entries, std::ostream& out) {
  if (AnyKernel(entries, "attention_train_step")) {
    out << fmt::format("{:<11} {:<18} {:<10} {:>10} {:>10} {:>8} {:>11} {:>11}\n", "train step",
                       "B x S x H x D", "precision", "posenc ms", "torch ms", "speedup",
                       "posenc fwd", "torch fwd");
  }
  for (const nlohmann::json& e : entries) {
    if (e["kernel"] != "attention_train_step") continue;
    const nlohmann::json& c = e["case"];
    out << fmt::format("{:<11} {:<18} {:<10} {:>10.1f} {:>10.1f} {:>7.2f}x {:>11.1f} {:>11.1f}\n",
                       c["scheme"].get<std::string>(),
                       fmt::format("{}x{}x{}x{}", c["batch"].get<int>(), c["seq"].get<int>(),
                                   c["heads"].get<int>(), c["head_dim"].get<int>()),
                       e["precision"].get<std::string>(), e["posenc_ms"].get<double>(),
                       e["torch_ms"].get<double>(), e["speedup_vs_torch"].get<double>(),
                       e["posenc_forward_ms"].get<double>(), e["torch_forward_ms"].get<double>());
  }
}

// Prints the "attention_decode" rows under their header, if there are any.
void PrintDecodeRows(const std::vector<nlohmann::json>& entries, std::ostream& out) {
  if (AnyKernel(entries, "attention_decode")) {
    out << fmt::format("{:<9} {:<8} {:<9} {:>9} {:>8} {:>13} {:>6} {:>8} {:>9} {:>8}\n", "decode",
                       "keys", "dtype", "ms", "GB/s", "ceiling GB/s", "frac", "in LLC", "torch ms",
                       "speedup");
  }
  for (const nlohmann::json& e : entries) {
    if (e["kernel"] != "attention_decode") continue;
    out << fmt::format("{:<9} {:<8} {:<9} {:>9.3f} {:>8.1f} {:>13.1f} {:>6.2f} {:>8} {:>9} {:>8}\n",
                       e["scheme"].get<std::string>(), e["seq"].get<std::int64_t>(),
                       e["dtype"].get<std::string>(), e["ms"].get<double>(),
                       e["bandwidth_gbps"].get<double>(), e["read_ceiling_gbps"].get<double>(),
                       e["fraction_of_bandwidth"].get<double>(),
                       e["cache_resident"].get<bool>() ? "yes" : "no",
                       NumCell(e["torch_ms"], "{:.3f}"), NumCell(e["speedup_vs_torch"], "{:.2f}x"));
  }
}

// Prints the "attention_decode_c" rows under their header, if there are any.
void PrintDecodeCRows(const std::vector<nlohmann::json>& entries, std::ostream& out) {
  if (AnyKernel(entries, "attention_decode_c")) {
    out << fmt::format(
        "{:<9} {:<7} {:<9} {:>9} {:>9} {:>7} {:>11} {:>9} {:>12} {:>8} {:>10} {:>10}\n", "decode C",
        "keys", "dtype", "plan ms", "C++ ms", "C/C++", "no-plan ms", "/C++", "prefill C ms",
        "speedup", "paged16/d", "paged64/d");
  }
  for (const nlohmann::json& e : entries) {
    if (e["kernel"] != "attention_decode_c") continue;
    out << fmt::format(
        "{:<9} {:<7} {:<9} {:>9.3f} {:>9.3f} {:>7.3f} {:>11.3f} {:>9.3f} {:>12.3f} {:>7.1f}x "
        "{:>10.3f} {:>10.3f}\n",
        e["scheme"].get<std::string>(), e["seq"].get<std::int64_t>(), e["dtype"].get<std::string>(),
        e["ms"].get<double>(), e["cpp_ms"].get<double>(), e["c_over_cpp"].get<double>(),
        e["unplanned_ms"].get<double>(), e["unplanned_over_cpp"].get<double>(),
        e["prefill_c_ms"].get<double>(), e["speedup_vs_prefill_c"].get<double>(),
        e["paged16_over_dense"].get<double>(), e["paged64_over_dense"].get<double>());
  }
}

}  // namespace

void PrintAttentionTable(const std::vector<nlohmann::json>& entries, std::ostream& out) {
  PrintForwardRows(entries, out);
  PrintBackwardRows(entries, out);
  PrintTrainStepRows(entries, out);
  PrintDecodeRows(entries, out);
  PrintDecodeCRows(entries, out);
}

}  // namespace posenc::cli
