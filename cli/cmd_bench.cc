// `posenc bench [rope|tables|bias|all] [--threads N] [--json]`: times posenc's
// memory-bound kernels against the machine's bandwidth (STREAM-like kernels
// of posenc/bandwidth.h over the same bytes, same threads) and against the
// PyTorch-eager / numpy baselines (bench/torch_baseline.py run by
// /usr/bin/python3 with jemalloc preloaded). Methodology: docs/PERFORMANCE.md;
// options: the --help text. Buffers are allocated and touched once
// (pre-faulted), then reused; each measurement is warm-up calls, then --reps
// timed calls, the median. Cases, bytes and ceilings: above BenchRope,
// ResultJson and Run.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_attention.h"
#include "bench_common.h"
#include "commands.h"
#include "posenc/bandwidth.h"
#include "posenc/error.h"
#include "posenc/rope.h"
#include "posenc/sinusoidal.h"

namespace posenc::cli {
namespace {

// RoPE on q and k, in place (read-modify-write ceiling) and out of place
// (copy ceiling). The headline case is DRAM-sized: besides S = 4096 and
// 16384, the smallest power-of-two S whose q + k bytes are >= 4x the LLC (no
// torch baseline there: its temporaries would need several times the
// buffers).
void BenchRope(const BenchOptions& o, const Context& ctx, std::vector<Result>& out) {
  const std::int64_t heads = 32, hd = 128;
  RopeParams params;
  params.head_dim = hd;
  for (const DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    std::vector<std::int64_t> seqs;
    for (const std::int64_t s : {1, 4096, 16384}) {
      if (s <= o.max_seq) seqs.push_back(s);
    }
    if (o.max_seq > 1 && o.max_seq < 4096) seqs.push_back(o.max_seq);  // --max-seq smoke runs
    // The DRAM-sized headline case: q + k >= 4x the LLC (full runs only).
    const std::int64_t qk_bytes_per_token =
        2 * heads * hd * static_cast<std::int64_t>(DTypeSize(dtype));
    std::int64_t dram = 16384;
    while (o.max_seq >= 16384 && dram * qk_bytes_per_token < 4 * o.llc_bytes && dram < (1 << 20)) {
      dram *= 2;
    }
    if (dram > 16384) seqs.push_back(dram);
    for (const std::int64_t seq : seqs) {
      const std::int64_t elems = heads * seq * hd;
      const std::int64_t tensor_bytes = elems * static_cast<std::int64_t>(DTypeSize(dtype));
      // q and k back to back in one buffer (the ceiling kernels run over it whole).
      BenchVector<float> qk = Buffer(2 * tensor_bytes, 1), outs = Buffer(2 * tensor_bytes, 2);
      auto* base = reinterpret_cast<unsigned char*>(qk.data());
      auto* obase = reinterpret_cast<unsigned char*>(outs.data());
      const TensorView q = TensorView::Contiguous(base, dtype, {1, heads, seq, hd});
      const TensorView k = TensorView::Contiguous(base + tensor_bytes, dtype, {1, heads, seq, hd});
      const TensorView qo = TensorView::Contiguous(obase, dtype, {1, heads, seq, hd});
      const TensorView ko =
          TensorView::Contiguous(obase + tensor_bytes, dtype, {1, heads, seq, hd});
      const std::int64_t nf = 2 * tensor_bytes / 4;
      const Positions pos = Positions::Offset(seq == 1 ? 4095 : 0);
      for (const bool inplace : {true, false}) {
        Result r;
        r.kernel = "rope";
        r.dtype = std::string(DTypeName(dtype));
        r.shape = {1, heads, seq, hd};
        r.inplace = inplace;
        r.bytes = 2.0 * 2.0 * static_cast<double>(tensor_bytes);
        r.footprint = (inplace ? 2.0 : 4.0) * static_cast<double>(tensor_bytes);
        r.skip_torch = seq > 16384;
        // Alternate forward/inverse so values stay bounded over many calls.
        bool fwd = true;
        if (inplace) {
          r.ceiling = "rmw";
          std::tie(r.ms, r.ceiling_ms) = MedianMsAlternating(
              [&] {
                ApplyRopeQK(params, q, k, AttentionLayout::kBHSD, pos,
                            fwd ? RopeDirection::kForward : RopeDirection::kInverse, ctx);
                fwd = !fwd;
              },
              [&] {
                RunStreamKernel(StreamKernel::kReadModifyWrite, qk.data(), nullptr, nf, 1.0f, ctx);
              },
              o.reps, o.warmup);
        } else {
          r.ceiling = "copy";
          std::tie(r.ms, r.ceiling_ms) = MedianMsAlternating(
              [&] {
                ApplyRopeQK(params, q, k, AttentionLayout::kBHSD, pos, RopeDirection::kForward, &qo,
                            &ko, ctx);
              },
              [&] { RunStreamKernel(StreamKernel::kCopy, outs.data(), qk.data(), nf, 1.0f, ctx); },
              o.reps, o.warmup);
        }
        out.push_back(r);
      }
    }
  }
}

void BenchTables(const BenchOptions& o, const Context& ctx, std::vector<Result>& out) {
  // 32768 rows by default; --max-seq below 16384 shrinks the tables too.
  const std::int64_t rows = o.max_seq >= 16384 ? 32768 : o.max_seq, dim = 1024;
  for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    const std::int64_t bytes = rows * dim * static_cast<std::int64_t>(DTypeSize(dtype));
    BenchVector<float> a = Buffer(2 * bytes, 3);
    auto* base = reinterpret_cast<unsigned char*>(a.data());
    {
      Result r;
      r.kernel = "sinusoidal";
      r.dtype = std::string(DTypeName(dtype));
      r.shape = {rows, dim};
      r.bytes = static_cast<double>(bytes);
      r.footprint = r.bytes;
      const SinusoidalParams params{dim, 10000.0, SinusoidalLayout::kInterleaved};
      const TensorView t = TensorView::Contiguous(base, dtype, {rows, dim});
      r.ms = MedianMs([&] { SinusoidalTable(params, 0, rows, t, ctx); }, o.reps, o.warmup);
      r.ceiling = "write";
      r.ceiling_ms = MedianMs(
          [&] { RunStreamKernel(StreamKernel::kWrite, a.data(), nullptr, bytes / 4, 0.5f, ctx); },
          o.reps, o.warmup);
      out.push_back(r);
    }
    {
      Result r;
      r.kernel = "rope_cos_sin";
      r.dtype = std::string(DTypeName(dtype));
      r.shape = {rows, dim};
      r.bytes = 2.0 * static_cast<double>(bytes);
      r.footprint = r.bytes;
      RopeParams params;
      params.head_dim = dim;
      const TensorView c = TensorView::Contiguous(base, dtype, {rows, dim});
      const TensorView s = TensorView::Contiguous(base + bytes, dtype, {rows, dim});
      r.ms = MedianMs([&] { RopeCosSin(params, Positions::Offset(0), rows, c, s, ctx); }, o.reps,
                      o.warmup);
      r.ceiling = "write";
      r.ceiling_ms = MedianMs(
          [&] {
            RunStreamKernel(StreamKernel::kWrite, a.data(), nullptr, 2 * bytes / 4, 0.5f, ctx);
          },
          o.reps, o.warmup);
      out.push_back(r);
    }
  }
}

// Runs bench/torch_baseline.py once for every result; fills torch_ms.
nlohmann::json RunTorch(const BenchOptions& o, int threads, std::vector<Result>& results) {
  nlohmann::json spec = {{"threads", threads}, {"reps", o.reps}, {"warmup", o.warmup}};
  spec["cases"] = nlohmann::json::array();
  std::map<std::string, int> ids;  // one torch case per (kernel, dtype, shape)
  for (const Result& r : results) {
    if (r.skip_torch) continue;
    const std::string key = r.TorchCase(0).dump();
    if (!ids.count(key)) {
      const int id = static_cast<int>(ids.size());
      ids[key] = id;
      spec["cases"].push_back(r.TorchCase(id));
    }
  }
  char tmpl[] = "/tmp/posenc-bench-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) throw IoError("bench: cannot create a temporary file in /tmp");
  close(fd);
  const std::string spec_path = tmpl;
  std::ofstream(spec_path) << spec.dump();
  std::string cmd;
  if (std::ifstream(o.jemalloc).good()) {
    cmd += "LD_PRELOAD=" + o.jemalloc + " MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 ";
  }
  cmd += "'" + o.python + "' '" + o.script + "' '" + spec_path + "'";
  std::string text;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) throw IoError("bench: cannot run " + o.python);
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, pipe)) text.append(buf, n);
  const int status = pclose(pipe);
  std::remove(spec_path.c_str());
  if (status != 0) {
    throw IoError("--torch-script: '" + o.script + "' run by " + o.python +
                  " failed (exit status " +
                  std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                  "); pass --no-torch to skip the baseline");
  }
  nlohmann::json reply;
  try {
    reply = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw IoError("--torch-script: '" + o.script + "' did not print JSON");
  }
  // "ms": null when torch cannot run the case (e.g. an op without a CPU
  // kernel for the dtype): the row reports no baseline, never a made-up one.
  std::map<int, std::pair<std::optional<double>, std::string>> by_id;
  for (const auto& r : reply.at("results")) {
    const auto& ms = r.at("ms");
    by_id[r.at("id").get<int>()] = {
        ms.is_null() ? std::nullopt : std::optional<double>(ms.get<double>()),
        r.at("variant").get<std::string>()};
  }
  for (Result& r : results) {
    if (r.skip_torch) {
      r.torch_variant = "skipped: DRAM-sized case";
      continue;
    }
    const auto& [ms, variant] = by_id.at(ids.at(r.TorchCase(0).dump()));
    r.torch_ms = ms;
    r.torch_variant = variant;
  }
  return {{"torch", reply.value("torch", "")},
          {"numpy", reply.value("numpy", "")},
          {"torch_threads", reply.value("torch_threads", 0)}};
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

// Checks the options' ranges and combinations before anything runs; throws
// on the first bad flag.
void ValidateOptions(const BenchOptions& o) {
  Require(o.threads >= 0 && o.threads <= 1024, "--threads", o.threads,
          "0 (all hardware threads) to 1024");
  Require(o.reps >= 1 && o.reps <= 10000, "--reps", o.reps, "1 to 10000");
  Require(o.warmup >= 0 && o.warmup <= 1000, "--warmup", o.warmup, "0 to 1000");
  Require(o.max_seq >= 1 && o.max_seq <= 16384, "--max-seq", o.max_seq, "1 to 16384");
  Require(o.what == "attention" || (!o.backward && !o.decode),
          o.backward ? "--backward" : "--decode", o.what, "only with `posenc bench attention`");
  ParseFlashPrecision(o.precision, "--precision");  // validated before anything runs
  Require(o.what == "attention" || o.precision == "float32", "--precision", o.precision,
          "float32 except with `posenc bench attention`");
}

// The "machine" object before any measurement: CPU, SIMD target, version and last-level cache.
nlohmann::json MachineJson(const CacheInfo& llc) {
  return {{"cpu", CpuModel()},
          {"hardware_threads", std::thread::hardware_concurrency()},
          {"simd_target", std::string(SimdTargetName())},
          {"posenc", "0.1.0"},
          {"llc_bytes", llc.bytes},
          {"llc_level", llc.level},
          {"llc_source", llc.source}};
}

// Runs `posenc bench attention` (cli/cmd_bench_attention.cc; its torch script
// is torch_attention.py next to --torch-script) and returns its entries.
std::vector<nlohmann::json> RunAttention(const BenchOptions& o, int threads,
                                         const ComputeCeilings& ceilings, nlohmann::json& machine) {
  const std::string dir = o.script.substr(0, o.script.find_last_of('/') + 1);
  AttentionBenchOptions ao{
      threads,   o.reps, o.warmup, o.max_seq, o.torch, o.python, dir + "torch_attention.py",
      o.jemalloc};
  ao.backward = o.backward;
  ao.decode = o.decode;
  ao.precision = ParseFlashPrecision(o.precision, "--precision");
  ao.step_script = dir + "posenc_torch_attention.py";
  ao.posenc_python = o.posenc_python.empty() ? DefaultPosencPython() : o.posenc_python;
  ao.llc_bytes = o.llc_bytes;
  return RunAttentionBench(ao, ceilings, machine);
}

// The JSON entry of one kernel result. GB/s counts bytes read + written
// once: RoPE in place or out of place 2 x bytes(q + k); tables and bias
// matrices (cmd_bench_bias.cc): bytes written. fraction_of_bandwidth: GB/s
// over the matching ceiling measured in the same run: read-modify-write
// (RoPE in place), copy (out of place), write (tables). cache_resident: the
// bytes the entry touches are < 4x the LLC.
nlohmann::json ResultJson(const Result& r, int threads, std::int64_t llc_bytes) {
  const double gbps = r.bytes / (r.ms * 1e6), bw = r.bytes / (r.ceiling_ms * 1e6);
  return {{"kernel", r.kernel},
          {"dtype", r.dtype},
          {"shape", r.shape},
          {"threads", threads},
          {"inplace", r.inplace},
          {"ms", r.ms},
          {"bytes", r.bytes},
          {"gbps", gbps},
          {"bandwidth_kernel", r.ceiling},
          {"bandwidth_gbps", bw},
          {"fraction_of_bandwidth", gbps / bw},
          {"cache_resident", r.footprint < 4.0 * static_cast<double>(llc_bytes)},
          {"torch_ms", r.torch_ms ? nlohmann::json(*r.torch_ms) : nlohmann::json()},
          {"torch_variant", r.torch_variant},
          {"speedup_vs_torch", r.torch_ms ? nlohmann::json(*r.torch_ms / r.ms) : nlohmann::json()}};
}

// Prints {machine, results} to stdout: the kernel results, then the attention entries.
void PrintJson(const nlohmann::json& machine, const std::vector<Result>& results,
               const std::vector<nlohmann::json>& attention, int threads, std::int64_t llc_bytes) {
  nlohmann::json j = {{"machine", machine}, {"results", nlohmann::json::array()}};
  for (const Result& r : results) j["results"].push_back(ResultJson(r, threads, llc_bytes));
  for (const nlohmann::json& e : attention) j["results"].push_back(e);
  std::cout << j.dump(2) << '\n';
}

// Prints the text header: CPU, last-level cache and compute ceilings.
void PrintMachine(nlohmann::json& machine, const CacheInfo& llc, int threads) {
  std::cout << fmt::format("posenc bench: {} ({} threads, SIMD target {})\n", CpuModel(), threads,
                           SimdTargetName());
  std::cout << fmt::format("last-level cache: L{} {:.1f} MiB ({}); DRAM-sized = >= 4x that\n",
                           llc.level, static_cast<double>(llc.bytes) / (1 << 20), llc.source);
  for (const auto& c : machine["compute_ceilings"]) {
    std::cout << fmt::format("compute ceiling {}: {:.1f} GFLOP/s ({} threads)\n",
                             c["kernel"].get<std::string>(), c["gflops"].get<double>(), threads);
  }
}

// Prints the kernel results as a text table, one row per result.
void PrintResults(const std::vector<Result>& results, std::int64_t llc_bytes) {
  std::cout << fmt::format(
      "{:<13} {:<9} {:<22} {:<8} {:>9} {:>8} {:>13} {:>6} {:>10} {:>8} "
      "{:>7}\n",
      "kernel", "dtype", "shape", "inplace", "ms", "GB/s", "ceiling GB/s", "frac", "torch ms",
      "speedup", "in LLC");
  for (const Result& r : results) {
    std::string shape;  // "AxBxC"
    for (std::size_t i = 0; i < r.shape.size(); ++i) {
      if (i) shape += "x";
      shape += std::to_string(r.shape[i]);
    }
    const double gbps = r.bytes / (r.ms * 1e6), bw = r.bytes / (r.ceiling_ms * 1e6);
    std::cout << fmt::format(
        "{:<13} {:<9} {:<22} {:<8} {:>9.4f} {:>8.1f} {:>8.1f} {:<4} {:>6.2f} "
        "{:>10} {:>8} {:>7}\n",
        r.kernel, r.dtype, shape, r.inplace ? "yes" : "no", r.ms, gbps, bw, r.ceiling, gbps / bw,
        r.torch_ms ? fmt::format("{:.3f}", *r.torch_ms) : "-",
        r.torch_ms ? fmt::format("{:.1f}x", *r.torch_ms / r.ms) : "-",
        r.footprint < 4.0 * static_cast<double>(llc_bytes) ? "yes" : "no");
  }
}

// Honest ceilings: the last-level cache size (LastLevelCache: sysfs, else
// sysconf) is printed and put under "machine"; the compute ceilings
// (posenc/bandwidth.h RunComputeKernel, same threads) are measured in every
// run and listed under "machine" too.
void Run(BenchOptions o) {
  ValidateOptions(o);
  const int threads =
      o.threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : o.threads;
  const CacheInfo llc = LastLevelCache();
  o.llc_bytes = llc.bytes;
  nlohmann::json machine = MachineJson(llc);
  // Compute ceilings first, with a pool that is gone before `attention`
  // forks its measuring children.
  const ComputeCeilings ceilings = MeasureComputeCeilings(threads, o.reps, machine);
  // `attention` forks its measuring children (cli/cmd_bench_attention.cc):
  // the parent must not hold pool threads at fork time (a thread inside
  // the allocator would leave its lock held in the child), so it gets none.
  const Context ctx(o.what == "attention" ? 1 : threads, Backend::kAuto);
  std::vector<Result> results;
  if (o.what == "rope" || o.what == "all") BenchRope(o, ctx, results);
  if (o.what == "tables" || o.what == "all") BenchTables(o, ctx, results);
  if (o.what == "bias" || o.what == "all") BenchBias(o, ctx, results);
  if (o.torch && !results.empty()) machine.update(RunTorch(o, threads, results));
  // `attention` is not part of `all`: its S = 16384 cases take minutes.
  std::vector<nlohmann::json> attention;
  if (o.what == "attention") attention = RunAttention(o, threads, ceilings, machine);
  if (o.json) {
    PrintJson(machine, results, attention, threads, o.llc_bytes);
    return;
  }
  PrintMachine(machine, llc, threads);
  if (!attention.empty()) PrintAttentionTable(attention, std::cout);
  if (results.empty()) return;
  PrintResults(results, o.llc_bytes);
}

}  // namespace

void RegisterBenchCommand(CLI::App& app) {
  auto opts = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Time posenc's kernels against memory bandwidth and the PyTorch-eager baseline");
  cmd->add_option("what", opts->what,
                  "rope, tables, bias, all (= rope + tables + bias) or attention (fused attention "
                  "vs torch; not in all)")
      ->check(CLI::IsMember({"rope", "tables", "bias", "all", "attention"}));
  cmd->add_option("--threads", opts->threads,
                  "Threads for posenc and torch (0: all hardware threads)");
  cmd->add_flag("--json", opts->json, "Print JSON ({machine, results}) instead of a table");
  cmd->add_option("--reps", opts->reps, "Timed calls per measurement (median reported)");
  cmd->add_option("--warmup", opts->warmup, "Untimed calls before each measurement");
  cmd->add_option(
      "--max-seq", opts->max_seq,
      "Longest sequence / table rows to run (default 16384; small values for smoke tests)");
  cmd->add_flag("!--no-torch", opts->torch, "Skip the PyTorch/numpy baseline");
  cmd->add_flag("--backward", opts->backward,
                "attention: also time forward + backward against torch eager autograd");
  cmd->add_flag("--decode", opts->decode,
                "attention: also time decode against KV caches (torch eager, read bandwidth)");
  cmd->add_option("--precision", opts->precision,
                  "attention: precision of P and dS in the bfloat16 cases, float32 (default) or "
                  "bfloat16 (FlashAttention-2's bfloat16 products)");
  cmd->add_option("--posenc-python", opts->posenc_python,
                  "attention --backward: directory holding the posenc Python module (default: "
                  "the build tree's python/ next to this executable's cli/)");
  cmd->add_option("--python", opts->python,
                  "Python with torch and numpy (default /usr/bin/python3)");
  cmd->add_option("--torch-script", opts->script, "Path of bench/torch_baseline.py");
  cmd->callback([opts] { Run(*opts); });
}

}  // namespace posenc::cli
