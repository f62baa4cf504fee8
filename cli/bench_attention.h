// `posenc bench attention` (cli/cmd_bench_attention.cc and its parts
// cmd_bench_attention_backward.cc, cmd_bench_attention_decode.cc): the fused
// attention (posenc::FlashAttention, FlashAttentionBackward,
// FlashAttentionDecode) against PyTorch eager (bench/torch_attention.py),
// the machine's compute ceilings and, for decode, its read bandwidth.
// Called from cli/cmd_bench.cc; methodology in docs/PERFORMANCE.md.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/flash_attention.h"

namespace posenc::cli {

struct AttentionBenchOptions {
  int threads = 1;
  int reps = 10;   // timed calls per case are min(reps, 5): an S = 16384 call takes seconds
  int warmup = 3;  // untimed calls per case are min(warmup, 1)
  std::int64_t max_seq = 16384;
  bool torch = true;
  std::string python;
  std::string script;     // bench/torch_attention.py
  std::string jemalloc;   // preloaded into the torch process when it exists
  bool backward = false;  // add "attention_backward" entries
  bool decode = false;    // add "attention_decode" entries
  // FlashPrecision of the bfloat16 cases (float32 cases always run float32).
  FlashPrecision precision = FlashPrecision::kFloat32;
  // --backward: bench/posenc_torch_attention.py (a training step through
  // posenc.torch.attention against torch eager, alternating, one process)
  // and the PYTHONPATH that holds the posenc module (empty: none found).
  std::string step_script = "", posenc_python = "";
  std::int64_t llc_bytes = 0;  // last-level cache (decode: which caches are DRAM-sized)
};

// GFLOP/s of the compute ceilings measured in this run (0: not on this CPU).
struct ComputeCeilings {
  double f32_fma = 0, bf16_dot = 0, amx_bf16 = 0;
};

// Measures every compute ceiling this CPU runs (posenc/bandwidth.h
// RunComputeKernel) with `threads` threads (a Context created and destroyed
// here, so no pool thread is alive when the attention bench forks), the
// best of 5 runs; adds {"compute_ceilings": [{"kernel", "dtype", "gflops",
// "threads"}...], "compute_unavailable": {kernel: reason}} to `machine`.
ComputeCeilings MeasureComputeCeilings(int threads, int reps, nlohmann::json& machine);

// Forward cases (schemes alibi, t5, rope, none; S = 1024, 4096, 16384 up
// to max_seq, or max_seq alone below 1024; float32 and bfloat16 inputs;
// causal, 8 heads, head_dim 64), each posenc case in a forked child and
// each torch case in a fresh python process; then the backward and decode
// cases when asked. Returns the result entries ("kernel": "attention",
// "attention_backward", "attention_decode") and adds the torch version to
// `machine`. Throws IoError when a child or the torch script fails.
std::vector<nlohmann::json> RunAttentionBench(const AttentionBenchOptions& options,
                                              const ComputeCeilings& ceilings,
                                              nlohmann::json& machine);

// `--backward`: forward + backward (cli/cmd_bench_attention_backward.cc).
std::vector<nlohmann::json> RunAttentionBackwardBench(const AttentionBenchOptions& options,
                                                      const ComputeCeilings& ceilings,
                                                      nlohmann::json& machine);

// `--decode`: decode against KV caches (cli/cmd_bench_attention_decode.cc).
std::vector<nlohmann::json> RunAttentionDecodeBench(const AttentionBenchOptions& options,
                                                    nlohmann::json& machine);
// `--decode`, the C entry point posenc_attention_decode against the C++ call
// and against the prefill C entry point on one query ("attention_decode_c").
std::vector<nlohmann::json> RunAttentionDecodeCBench(const AttentionBenchOptions& options);

// The entries as text tables (one per kernel kind present).
void PrintAttentionTable(const std::vector<nlohmann::json>& entries, std::ostream& out);

}  // namespace posenc::cli
