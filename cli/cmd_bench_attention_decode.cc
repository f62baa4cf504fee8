// `posenc bench attention --decode`: one decode step (FlashAttentionDecode)
// against PyTorch eager (bench/torch_attention.py, mode "decode") and the
// read-bandwidth ceiling. Methodology (docs/PERFORMANCE.md):
//  - Cases: schemes none, alibi, rope (keys pre-rotated in the cache, as a
//    RoPE KV cache holds them), t5 (causal); q [1, 1, 32, 128] bfloat16 at
//    position Sk - 1 against a bfloat16 KV cache [1, Sk, 8, 128] (GQA 32/8),
//    bshd; Sk = 32768 (the case) and the smallest power of two
//    >= 32768 whose K + V bytes are >= 4x the last-level cache (DRAM-sized;
//    at most 2^20); --max-seq below 16384 runs the single Sk = --max-seq
//    (smoke runs).
//  - posenc, in a forked child, on page-aligned buffers (bench_buffers.h):
//    --reps decode calls alternating with --reps runs of the read ceiling,
//    RunStreamKernel(kRead) over the same K and V buffers (the same bytes,
//    read as float32), after the warm-up; the median of each.
//    "bandwidth_gbps" = bytes of K + V / time; "fraction_of_bandwidth" =
//    that over the ceiling's GB/s ("read_ceiling_gbps");
//    "cache_resident": K + V < 4x the last-level cache (so repeated calls
//    may be served from cache; the ceiling then is the cache's too).
//  - torch: HF's eager decode formula in bfloat16 with grouped matmuls (q
//    viewed as [1, 8, 4, 128] per kv head: HF's repeat_kv would first copy
//    the cache 4x, so this baseline is faster than HF), bias materialised
//    as [1, 32, 1, Sk] before timing; rope rotates q inside the call.
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "bench_attention.h"
#include "bench_attention_util.h"
#include "bench_common.h"
#include "posenc/bandwidth.h"
#include "posenc/flash_attention.h"

namespace posenc::cli {
namespace {

using bench_attention::Filled;
using bench_attention::Median;
using bench_attention::OrNull;

constexpr std::int64_t kHeads = 32, kKvHeads = 8, kHeadDim = 128;

struct DecodeReply {
  double ms = 0, ceiling_ms = 0;
  int ok = 0;
  char error[240] = {};
};

DecodeReply MeasureInChild(const std::string& scheme, std::int64_t seq,
                           const AttentionBenchOptions& o) {
  DecodeReply r;
  const DType dtype = DType::kBFloat16;
  const auto n = static_cast<std::size_t>(seq * kKvHeads * kHeadDim);
  BenchVector<unsigned char> qb = Filled(dtype, kHeads * kHeadDim, 1), kb = Filled(dtype, n, 2),
                             vb = Filled(dtype, n, 3), ob = Filled(dtype, kHeads * kHeadDim, 4);
  AttentionParams params;
  params.mask = AttentionMask::kCausal;
  FlashAttentionOptions options;
  const bench_attention::BenchScheme bs =
      bench_attention::MakeBenchScheme(scheme, kHeads, kHeadDim);
  params.scheme = bs.scheme;
  if (scheme == "rope") options.rope_keys = FlashRopeKeys::kPreRotated;
  const TensorView q = TensorView::Contiguous(qb.data(), dtype, {1, 1, kHeads, kHeadDim});
  const TensorView k = TensorView::Contiguous(kb.data(), dtype, {1, seq, kKvHeads, kHeadDim});
  const TensorView v = TensorView::Contiguous(vb.data(), dtype, {1, seq, kKvHeads, kHeadDim});
  const TensorView out = TensorView::Contiguous(ob.data(), dtype, {1, 1, kHeads, kHeadDim});
  const Context ctx(o.threads);
  const auto decode = [&] {
    FlashAttentionDecode(params, q, k, v, out, TensorView{}, options, ctx);
  };
  const auto floats = static_cast<std::int64_t>(kb.size() / 4);
  const auto ceiling = [&] {
    RunStreamKernel(StreamKernel::kRead, reinterpret_cast<float*>(kb.data()), nullptr, floats, 1.0f,
                    ctx);
    RunStreamKernel(StreamKernel::kRead, reinterpret_cast<float*>(vb.data()), nullptr, floats, 1.0f,
                    ctx);
  };
  // Alternating, so that both medians see the same minutes of a memory
  // system shared with other tenants (back to back, the ceiling of one
  // case moved between 27 and 59 GB/s).
  std::tie(r.ms, r.ceiling_ms) =
      MedianMsAlternating(decode, ceiling, o.reps, std::max(o.warmup, 1));
  return r;
}

}  // namespace

std::vector<nlohmann::json> RunAttentionDecodeBench(const AttentionBenchOptions& o,
                                                    nlohmann::json& machine) {
  const double bytes_per_key = 2.0 * kKvHeads * kHeadDim * 2.0;  // K + V, bfloat16
  std::vector<std::int64_t> seqs;
  if (o.max_seq < 16384) {
    seqs.push_back(o.max_seq);
  } else {
    seqs.push_back(32768);
    std::int64_t dram = 32768;
    while (dram < (std::int64_t{1} << 20) &&
           bytes_per_key * static_cast<double>(dram) < 4.0 * static_cast<double>(o.llc_bytes)) {
      dram *= 2;
    }
    if (dram != 32768) seqs.push_back(dram);
  }
  std::vector<nlohmann::json> entries;
  for (const std::string scheme : {"none", "alibi", "rope", "t5"}) {
    for (const std::int64_t seq : seqs) {
      bool have_torch = false;
      double torch_ms = 0;
      if (o.torch) {
        const nlohmann::json spec = {
            {"mode", "decode"},     {"scheme", scheme},     {"seq", seq},
            {"heads", kHeads},      {"kv_heads", kKvHeads}, {"head_dim", kHeadDim},
            {"threads", o.threads}, {"reps", o.reps},       {"warmup", std::max(o.warmup, 1)}};
        const nlohmann::json t = bench_attention::RunTorchCase(spec, o);
        torch_ms = t.at("ms").get<double>();
        have_torch = true;
        machine["torch"] = t.value("torch", "");
      }
      const DecodeReply r =
          bench_attention::RunInChild<DecodeReply>([&] { return MeasureInChild(scheme, seq, o); },
                                                   fmt::format("decode {} Sk={}", scheme, seq));
      const double bytes = bytes_per_key * static_cast<double>(seq);
      const double gbps = bytes / (r.ms * 1e6), ceiling = bytes / (r.ceiling_ms * 1e6);
      entries.push_back({{"kernel", "attention_decode"},
                         {"scheme", scheme},
                         {"seq", seq},
                         {"dtype", "bfloat16"},
                         {"queries", 1},
                         {"heads", kHeads},
                         {"kv_heads", kKvHeads},
                         {"head_dim", kHeadDim},
                         {"threads", o.threads},
                         {"ms", r.ms},
                         {"bytes", bytes},
                         {"bandwidth_gbps", gbps},
                         {"read_ceiling_gbps", ceiling},
                         {"fraction_of_bandwidth", gbps / ceiling},
                         {"cache_resident", bytes < 4.0 * static_cast<double>(o.llc_bytes)},
                         {"torch_ms", OrNull(torch_ms, have_torch)},
                         {"speedup_vs_torch", OrNull(torch_ms / r.ms, have_torch)},
                         {"reps", o.reps}});
    }
  }
  return entries;
}

}  // namespace posenc::cli
