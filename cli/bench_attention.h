// `posenc bench attention` (cli/cmd_bench_attention.cc): the fused attention
// (posenc::FlashAttention) against PyTorch's bfloat16 eager attention with
// the bias materialised (bench/torch_attention.py) and the reference
// attention. Called from cli/cmd_bench.cc; methodology in docs/PERFORMANCE.md.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace posenc::cli {

struct AttentionBenchOptions {
  int threads = 1;
  int reps = 10;    // timed calls per case are min(reps, 5): an S = 16384 call takes seconds
  int warmup = 3;   // untimed calls per case are min(warmup, 1)
  std::int64_t max_seq = 16384;
  bool torch = true;
  std::string python;
  std::string script;    // bench/torch_attention.py
  std::string jemalloc;  // preloaded into the torch process when it exists
};

// Runs every case (schemes alibi, t5, rope, none; S = 1024, 4096, 16384 up
// to max_seq, or max_seq alone below 1024; float32 and bfloat16 inputs;
// causal, 8 heads, head_dim 64), each posenc case in a forked child and
// each torch case in a fresh python process. Returns the result entries
// ({"kernel": "attention", ...}) and adds the torch version to `machine`.
// Throws IoError when a child or the torch script fails.
std::vector<nlohmann::json> RunAttentionBench(const AttentionBenchOptions& options,
                                              nlohmann::json& machine);

// The entries as a text table.
void PrintAttentionTable(const std::vector<nlohmann::json>& entries, std::ostream& out);

}  // namespace posenc::cli
