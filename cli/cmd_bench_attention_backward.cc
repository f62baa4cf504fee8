// `posenc bench attention --backward`: the fused attention's training step
// (FlashAttentionWithLse + FlashAttentionBackward) against PyTorch eager
// autograd (bench/torch_attention.py, mode "backward"), and the training step
// through posenc.torch.attention (RunTrainStepBench). Methodology:
// docs/PERFORMANCE.md; the cases, the measurement and the JSON fields are
// described above RunAttentionBackwardBench, MeasureInChild and
// kTorchLimitBytes.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench_attention.h"
#include "bench_attention_util.h"
#include "posenc/flash_attention.h"

namespace posenc::cli {
namespace {

using bench_attention::CausalPairs;
using bench_attention::Filled;
using bench_attention::MaxRssKiB;
using bench_attention::Median;
using bench_attention::OrNull;

constexpr std::int64_t kHeads = 8, kHeadDim = 64;
// torch is skipped (null) above this many bytes of [H, S, S] buffers (~32
// bytes per score).
constexpr double kTorchLimitBytes = 8.0 * (1u << 30);

struct BackwardReply {
  double forward_ms = 0, ms = 0;
  long extra_kib = 0;
  int ok = 0;
  char error[240] = {};
};

// posenc, in a forked child: q, k, v, dout are allocated and filled, then
// out, lse and the gradients are allocated inside the measured window
// (torch's forward output and .grad tensors count in its peak too);
// "forward_ms" is the median of the forward-with-lse calls, "ms" the median
// of the backward calls (given lse), after a warm-up pair; "peak_extra_mib"
// is the ru_maxrss growth over the whole window (out, lse, gradients, packed
// tiles, scratch).
BackwardReply MeasureInChild(const std::string& scheme, std::int64_t seq, DType dtype,
                             const AttentionBenchOptions& o) {
  BackwardReply r;
  const auto n = static_cast<std::size_t>(seq * kHeads * kHeadDim);
  BenchVector<unsigned char> qb = Filled(dtype, n, 1), kb = Filled(dtype, n, 2),
                             vb = Filled(dtype, n, 3), gb = Filled(dtype, n, 5);
  const auto view = [&](BenchVector<unsigned char>& b) {
    return TensorView::Contiguous(b.data(), dtype, {1, seq, kHeads, kHeadDim});
  };
  AttentionParams params;
  params.mask = AttentionMask::kCausal;
  const bench_attention::BenchScheme bs =
      bench_attention::MakeBenchScheme(scheme, kHeads, kHeadDim);
  params.scheme = bs.scheme;
  const Context ctx(o.threads);
  const long before = MaxRssKiB();
  BenchVector<unsigned char> ob(n * DTypeSize(dtype)), dqb(ob.size()), dkb(ob.size()),
      dvb(ob.size());
  std::vector<float> lse(static_cast<std::size_t>(kHeads * seq));
  const TensorView out = view(ob),
                   lse_view = TensorView::Contiguous(lse.data(), DType::kFloat32, {1, kHeads, seq});
  AttentionGrads grads;
  grads.dq = view(dqb);
  grads.dk = view(dkb);
  grads.dv = view(dvb);
  const FlashAttentionOptions options = bench_attention::CaseOptions(o, dtype);
  const auto forward = [&] {
    FlashAttentionWithLse(params, view(qb), view(kb), view(vb), out, lse_view, options, ctx);
  };
  const auto backward = [&] {
    FlashAttentionBackward(params, view(qb), view(kb), view(vb), out, view(gb), lse_view, grads,
                           options, ctx);
  };
  for (int i = 0; i < std::min(o.warmup, 1); ++i) {
    forward();
    backward();
  }
  std::vector<double> tf, tb;
  const auto ms_since = [](auto t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int i = 0; i < std::min(o.reps, 5); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    forward();
    tf.push_back(ms_since(t0));
    t0 = std::chrono::steady_clock::now();
    backward();
    tb.push_back(ms_since(t0));
  }
  r.extra_kib = MaxRssKiB() - before;
  r.forward_ms = Median(tf);
  r.ms = Median(tb);
  return r;
}

// The training step through posenc.torch.attention: causal ALiBi, bfloat16
// q, k, v [B, S, H, D] requiring grad, out = attention(q, k, v);
// out.backward(dout), posenc (o.precision) and torch eager alternating in
// one process (bench/posenc_torch_attention.py, 2 threads when o.threads
// is 2; the caller's OpenMP settings, libgomp's defaults unless set), at the model-shaped case
// B 32, S 128, H 4, D 32 and at the cases' S = 4096, H 8, D 64 (when --max-seq allows). Entries
// "attention_train_step".
std::vector<nlohmann::json> RunTrainStepBench(const AttentionBenchOptions& o) {
  struct Shape {
    std::int64_t batch, seq, heads, head_dim;
  };
  std::vector<nlohmann::json> entries;
  for (const Shape s : {Shape{32, 128, 4, 32}, Shape{1, 4096, kHeads, kHeadDim}}) {
    if (s.seq > 128 && s.seq > o.max_seq) continue;
    const int reps = s.seq <= 128 ? std::max(o.reps, 20) : std::min(o.reps, 5);
    std::string cmd;
    if (!o.posenc_python.empty()) {
      cmd += "PYTHONPATH='" + o.posenc_python + "'${PYTHONPATH:+:$PYTHONPATH} ";
    }
    if (std::ifstream(o.jemalloc).good()) {
      cmd += "LD_PRELOAD=" + o.jemalloc + " MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 ";
    }
    // No OMP_WAIT_POLICY: posenc.torch runs on torch's OpenMP team, and
    // passive waiting slowed torch's own step ~15 % (docs/PERFORMANCE.md,
    // "The training shape, sixth pass"): both sides as a torch user runs them.
    cmd += fmt::format(
        "'{}' '{}' --threads {} --reps {} --warmup {} --dtype bfloat16 --precision {} --batch {} "
        "--seq {} --heads {} --head-dim {} --scheme alibi",
        o.python, o.step_script, o.threads, reps, std::max(1, std::min(o.warmup, 3)),
        FlashPrecisionName(o.precision), s.batch, s.seq, s.heads, s.head_dim);
    nlohmann::json e = bench_attention::RunJsonCommand(
        cmd, fmt::format("the training step '{}' (S = {})", o.step_script, s.seq));
    e["kernel"] = "attention_train_step";
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace

// Cases: schemes alibi, t5, rope, none; causal; batch 1, 8 heads, head_dim
// 64, bshd; S = 1024 and 4096 (up to --max-seq; below 1024 the single
// S = --max-seq); float32, then bfloat16 inputs, outputs and gradients;
// default tiles. posenc is measured by MeasureInChild.
// "gflops" counts the backward's unmasked work: 2 (3 D + 2 Dv) flops per
// visible pair and head (S, dP, dV, dK, dQ); "fraction_of_compute" is over
// the ceiling of the inputs' dtype (bench_attention_util.h).
// torch: one fresh process per (scheme, S, dtype); HF's eager formula with
// the bias + causal mask materialised (built before timing, counted in
// memory), q, k, v requiring grad, out.backward(dout) with dout prepared
// before timing; "torch_ms" is forward + backward, its ru_maxrss growth
// "torch_peak_mib"; skipped per kTorchLimitBytes. "speedup_vs_torch" =
// torch_ms / (forward_ms + ms).
std::vector<nlohmann::json> RunAttentionBackwardBench(const AttentionBenchOptions& o,
                                                      const ComputeCeilings& ceilings,
                                                      nlohmann::json& machine) {
  std::vector<std::int64_t> seqs;
  for (const std::int64_t s : {1024, 4096}) {
    if (s <= o.max_seq) seqs.push_back(s);
  }
  if (o.max_seq < 1024) seqs.push_back(o.max_seq);
  std::vector<nlohmann::json> entries;
  for (const std::string scheme : {"alibi", "t5", "rope", "none"}) {
    for (const std::int64_t seq : seqs) {
      for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
        const std::string dname(DTypeName(dtype));
        bool have_torch = false;
        double torch_ms = 0, torch_mib = 0;
        const double torch_bytes =
            32.0 * static_cast<double>(seq) * static_cast<double>(seq) * kHeads;
        if (o.torch && torch_bytes <= kTorchLimitBytes) {
          const nlohmann::json spec = {{"mode", "backward"},
                                       {"scheme", scheme},
                                       {"seq", seq},
                                       {"heads", kHeads},
                                       {"head_dim", kHeadDim},
                                       {"threads", o.threads},
                                       {"reps", std::min(o.reps, 5)},
                                       {"warmup", std::min(o.warmup, 1)},
                                       {"dtype", dname}};
          const nlohmann::json t = bench_attention::RunTorchCase(spec, o);
          torch_ms = t.at("ms").get<double>();
          torch_mib = t.at("peak_extra_mib").get<double>();
          have_torch = true;
          machine["torch"] = t.value("torch", "");
          machine["torch_threads"] = t.value("torch_threads", 0);
        }
        const BackwardReply r = bench_attention::RunInChild<BackwardReply>(
            [&] { return MeasureInChild(scheme, seq, dtype, o); },
            fmt::format("backward {} S={} {}", scheme, seq, dname));
        const double gflops =
            2.0 * (3.0 * kHeadDim + 2.0 * kHeadDim) * kHeads * CausalPairs(seq) / (r.ms * 1e6);
        const auto [ceiling_name, ceiling] = bench_attention::CeilingFor(ceilings, dtype);
        entries.push_back(
            {{"kernel", "attention_backward"},
             {"scheme", scheme},
             {"seq", seq},
             {"heads", kHeads},
             {"head_dim", kHeadDim},
             {"causal", true},
             {"dtype", dname},
             {"precision", bench_attention::CasePrecision(o, dtype)},
             {"threads", o.threads},
             {"ms", r.ms},
             {"forward_ms", r.forward_ms},
             {"gflops", gflops},
             {"fraction_of_compute", OrNull(gflops / ceiling, ceiling > 0)},
             {"compute_kernel", ceiling_name},
             {"peak_extra_mib", static_cast<double>(r.extra_kib) / 1024.0},
             {"torch_ms", OrNull(torch_ms, have_torch)},
             {"torch_peak_mib", OrNull(torch_mib, have_torch)},
             {"speedup_vs_torch", OrNull(torch_ms / (r.forward_ms + r.ms), have_torch)},
             {"reps", std::min(o.reps, 5)}});
      }
    }
  }
  if (o.torch) {
    for (auto& e : RunTrainStepBench(o)) entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace posenc::cli
