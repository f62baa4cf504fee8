// `posenc bench attention --decode`: one decode step (FlashAttentionDecode)
// against PyTorch eager (bench/torch_attention.py, mode "decode") and the
// read-bandwidth ceiling (RunAttentionDecodeBench), and the C entry points of
// posenc/c.h against the C++ call (RunAttentionDecodeCBench). Methodology:
// docs/PERFORMANCE.md; the cases and the JSON fields are described above the
// functions that measure and report them.
#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench_attention.h"
#include "bench_attention_util.h"
#include "bench_common.h"
#include "posenc/bandwidth.h"
#include "posenc/c.h"
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

// posenc, in a forked child, on page-aligned buffers (bench_buffers.h): --reps
// decode calls alternating with --reps runs of the read ceiling,
// RunStreamKernel(kRead) over the same K and V buffers (the same bytes, read
// as float32), after the warm-up; the median of each. For scheme rope the
// keys are pre-rotated in the cache, as a RoPE KV cache holds them.
DecodeReply MeasureInChild(const std::string& scheme, std::int64_t seq,
                           const AttentionBenchOptions& o) {
  DecodeReply r;
  const DType dtype = DType::kBFloat16;
  const auto n = static_cast<std::size_t>(seq * kKvHeads * kHeadDim);
  BenchVector<unsigned char> qb = Filled(dtype, kHeads * kHeadDim, 1), kb = Filled(dtype, n, 2),
                             vb = Filled(dtype, n, 3), ob = Filled(dtype, kHeads * kHeadDim, 4);
  AttentionParams params;
  params.mask = AttentionMask::kCausal;
  FlashAttentionOptions options = bench_attention::CaseOptions(o, dtype);
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
  // system shared with other tenants (cli/bench_common.h,
  // MedianMsAlternating).
  std::tie(r.ms, r.ceiling_ms) =
      MedianMsAlternating(decode, ceiling, o.reps, std::max(o.warmup, 1));
  return r;
}

struct DecodeCReply {
  double c_ms = 0, cpp_ms = 0, unplanned_ms = 0, cpp_ms2 = 0, c_ms2 = 0, prefill_c_ms = 0;
  double paged16_ms = 0, dense16_ms = 0, paged64_ms = 0, dense64_ms = 0;
  int ok = 0;
  char error[240] = {};
};

// Throws the C API's last error unless `status` is POSENC_OK.
void CheckC(posenc_status status) {
  if (status != POSENC_OK) throw Error(posenc_last_error());
}

// A C tensor view of bfloat16 `data` shaped [b, s, h, kHeadDim].
posenc_tensor CTensor(void* data, std::int64_t b, std::int64_t s, std::int64_t h) {
  posenc_tensor t;
  const std::int64_t shape[4] = {b, s, h, kHeadDim};
  CheckC(posenc_tensor_contiguous(data, POSENC_BFLOAT16, 4, shape, &t));
  return t;
}

// Fills `cs` with the typed C scheme for `scheme` (none, alibi or rope); `rope`
// and `slopes` (kHeads entries) hold what it points to and must outlive it.
void InitCScheme(const std::string& scheme, posenc_rope_params& rope, std::vector<double>& slopes,
                 posenc_scheme& cs) {
  posenc_rope_params_init(&rope);
  rope.head_dim = kHeadDim;
  rope.pairing = POSENC_PAIRING_HALF_SPLIT;
  posenc_scheme_init(&cs);
  if (scheme == "rope") {
    cs.kind = POSENC_SCHEME_ROPE;
    cs.rope = &rope;
    cs.rope_keys = POSENC_ROPE_KEYS_PRE_ROTATED;
  } else if (scheme == "alibi") {
    CheckC(posenc_alibi_slopes(kHeads, 8.0, POSENC_ALIBI_REFERENCE, slopes.data(), kHeads));
    cs.kind = POSENC_SCHEME_ALIBI;
    cs.alibi_slopes = slopes.data();
    cs.num_alibi_slopes = kHeads;
  } else {
    Require(scheme == "none", "scheme", scheme, "none, alibi or rope for the C decode bench");
  }
}

// Medians (paged, dense) in ms: `plan` run on the keys and values of `kb`, `vb`
// ([seq, kKvHeads, kHeadDim] bfloat16) copied into pages of `ps` tokens, the
// pages in reverse order in the pool (scattered, as in a server that has run a
// while), alternating with `dense`.
std::pair<double, double> MeasurePaged(std::int64_t ps, std::int64_t seq,
                                       const BenchVector<unsigned char>& kb,
                                       const BenchVector<unsigned char>& vb, posenc_context* cctx,
                                       posenc_decode_plan* plan, const posenc_tensor& cq,
                                       const posenc_tensor& co, const std::function<void()>& dense,
                                       int reps, int warmup) {
  const DType dtype = DType::kBFloat16;
  const std::int64_t num_pages = (seq + ps - 1) / ps;
  const auto elems = static_cast<std::size_t>(num_pages * ps * kKvHeads * kHeadDim);
  const auto token_bytes = static_cast<std::size_t>(kKvHeads * kHeadDim * 2);
  BenchVector<unsigned char> kp = Filled(dtype, elems, 5), vp = Filled(dtype, elems, 6);
  std::vector<std::int32_t> table(static_cast<std::size_t>(num_pages));
  for (std::int64_t i = 0; i < num_pages; ++i) {
    const std::int32_t page = static_cast<std::int32_t>(num_pages - 1 - i);
    table[static_cast<std::size_t>(i)] = page;
    const auto tokens = static_cast<std::size_t>(std::min(ps, seq - i * ps));
    const auto to = static_cast<std::size_t>(page * ps) * token_bytes;
    const auto from = static_cast<std::size_t>(i * ps) * token_bytes;
    std::copy_n(kb.data() + from, tokens * token_bytes, kp.data() + to);
    std::copy_n(vb.data() + from, tokens * token_bytes, vp.data() + to);
  }
  const std::int32_t lens[1] = {static_cast<std::int32_t>(seq)};
  posenc_kv_pages pages;
  posenc_kv_pages_init(&pages);
  pages.k_pages = CTensor(kp.data(), num_pages, ps, kKvHeads);
  pages.v_pages = CTensor(vp.data(), num_pages, ps, kKvHeads);
  pages.block_table = table.data();
  pages.max_pages = num_pages;
  pages.seq_lens = lens;
  const auto run = [&] {
    CheckC(posenc_decode_plan_run_paged(cctx, plan, &cq, &pages, &co, nullptr, nullptr, nullptr));
  };
  return MedianMsAlternating(run, dense, reps, warmup);
}

// The C entry points on the buffers and shapes of MeasureInChild, through
// posenc/c.h on a posenc_context with a typed scheme. Each pair alternates:
//  - a step of a decode plan made once (posenc_decode_plan_run, what an
//    engine calls per token and layer) against the C++ call (c_ms, cpp_ms);
//  - posenc_attention_decode, which resolves its scheme on every call,
//    against the C++ call (unplanned_ms, cpp_ms2);
//  - the plan against the prefill entry point posenc_flash_attention on one
//    query (c_ms2, prefill_c_ms: the only C path before the decode entry
//    points);
//  - a paged cache (posenc_decode_plan_run_paged, pages of 16 and of 64
//    tokens in reverse order in the pool) against the dense plan run
//    (MeasurePaged).
DecodeCReply MeasureCInChild(const std::string& scheme, std::int64_t seq,
                             const AttentionBenchOptions& o) {
  DecodeCReply r;
  const DType dtype = DType::kBFloat16;
  const auto n = static_cast<std::size_t>(seq * kKvHeads * kHeadDim);
  BenchVector<unsigned char> qb = Filled(dtype, kHeads * kHeadDim, 1), kb = Filled(dtype, n, 2),
                             vb = Filled(dtype, n, 3), ob = Filled(dtype, kHeads * kHeadDim, 4);
  // C++: as MeasureInChild.
  AttentionParams params;
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
  // C: the same buffers, a typed scheme (RoPE params or ALiBi slopes).
  posenc_context* cctx = nullptr;
  CheckC(posenc_context_create(o.threads, POSENC_BACKEND_AUTO, &cctx));
  const std::unique_ptr<posenc_context, void (*)(posenc_context*)> owner(cctx,
                                                                         posenc_context_destroy);
  const posenc_tensor cq = CTensor(qb.data(), 1, 1, kHeads),
                      ck = CTensor(kb.data(), 1, seq, kKvHeads),
                      cv = CTensor(vb.data(), 1, seq, kKvHeads),
                      co = CTensor(ob.data(), 1, 1, kHeads);
  posenc_rope_params rope;
  std::vector<double> slopes(static_cast<std::size_t>(kHeads));
  posenc_scheme cs;
  InitCScheme(scheme, rope, slopes, cs);
  posenc_attention_params cp;
  posenc_attention_params_init(&cp);
  cp.scheme = &cs;
  posenc_decode_plan* plan = nullptr;
  CheckC(posenc_decode_plan_create(&cp, kHeads, kHeadDim, kHeadDim, &plan));
  const std::unique_ptr<posenc_decode_plan, void (*)(posenc_decode_plan*)> plan_owner(
      plan, posenc_decode_plan_destroy);
  const auto c_decode = [&] {
    CheckC(posenc_decode_plan_run(cctx, plan, &cq, &ck, &cv, &co, nullptr, nullptr, nullptr));
  };
  const auto c_unplanned = [&] {
    CheckC(posenc_attention_decode(cctx, &cp, &cq, &ck, &cv, &co, nullptr));
  };
  const auto cpp_decode = [&] {
    FlashAttentionDecode(params, q, k, v, out, TensorView{}, options, ctx);
  };
  const auto c_prefill = [&] { CheckC(posenc_flash_attention(cctx, &cp, &cq, &ck, &cv, &co)); };
  const int warmup = std::max(o.warmup, 1);
  std::tie(r.c_ms, r.cpp_ms) = MedianMsAlternating(c_decode, cpp_decode, o.reps, warmup);
  std::tie(r.unplanned_ms, r.cpp_ms2) =
      MedianMsAlternating(c_unplanned, cpp_decode, o.reps, warmup);
  std::tie(r.c_ms2, r.prefill_c_ms) =
      MedianMsAlternating(c_decode, c_prefill, std::min(o.reps, 10), warmup);
  // Paged, alternating with the dense plan run.
  std::tie(r.paged16_ms, r.dense16_ms) =
      MeasurePaged(16, seq, kb, vb, cctx, plan, cq, co, c_decode, o.reps, warmup);
  std::tie(r.paged64_ms, r.dense64_ms) =
      MeasurePaged(64, seq, kb, vb, cctx, plan, cq, co, c_decode, o.reps, warmup);
  return r;
}

}  // namespace

// "attention_decode_c" entries: schemes none, alibi and rope, Sk = 1000,
// 4000 and 32768 (or --max-seq alone below 16384), measured by
// MeasureCInChild. "ms" is the planned step; "c_over_cpp" = C ms / C++ ms;
// "unplanned_over_cpp" the same for posenc_attention_decode;
// "speedup_vs_prefill_c" = prefill_c_ms / planned ms; "paged16_over_dense",
// "paged64_over_dense" = paged ms / dense plan ms.
std::vector<nlohmann::json> RunAttentionDecodeCBench(const AttentionBenchOptions& o) {
  const std::vector<std::int64_t> seqs = o.max_seq < 16384
                                             ? std::vector<std::int64_t>{o.max_seq}
                                             : std::vector<std::int64_t>{1000, 4000, 32768};
  std::vector<nlohmann::json> entries;
  for (const std::string scheme : {"none", "alibi", "rope"}) {
    for (const std::int64_t seq : seqs) {
      const DecodeCReply r =
          bench_attention::RunInChild<DecodeCReply>([&] { return MeasureCInChild(scheme, seq, o); },
                                                    fmt::format("decode C {} Sk={}", scheme, seq));
      entries.push_back({{"kernel", "attention_decode_c"},
                         {"scheme", scheme},
                         {"seq", seq},
                         {"dtype", "bfloat16"},
                         {"queries", 1},
                         {"heads", kHeads},
                         {"kv_heads", kKvHeads},
                         {"head_dim", kHeadDim},
                         {"threads", o.threads},
                         {"ms", r.c_ms},
                         {"cpp_ms", r.cpp_ms},
                         {"c_over_cpp", r.c_ms / r.cpp_ms},
                         {"unplanned_ms", r.unplanned_ms},
                         {"unplanned_over_cpp", r.unplanned_ms / r.cpp_ms2},
                         {"ms_beside_prefill", r.c_ms2},
                         {"prefill_c_ms", r.prefill_c_ms},
                         {"speedup_vs_prefill_c", r.prefill_c_ms / r.c_ms2},
                         {"paged16_ms", r.paged16_ms},
                         {"paged16_over_dense", r.paged16_ms / r.dense16_ms},
                         {"paged64_ms", r.paged64_ms},
                         {"paged64_over_dense", r.paged64_ms / r.dense64_ms},
                         {"reps", o.reps}});
    }
  }
  return entries;
}

// "attention_decode" entries. Cases: schemes none, alibi, rope (keys
// pre-rotated in the cache), t5 (causal); q [1, 1, 32, 128] bfloat16 at
// position Sk - 1 against a bfloat16 KV cache [1, Sk, 8, 128] (GQA 32/8),
// bshd; Sk = 32768 and the smallest power of two >= 32768 whose K + V bytes
// are >= 4x the last-level cache (DRAM-sized; at most 2^20); --max-seq below
// 16384 runs the single Sk = --max-seq (smoke runs). posenc is measured by
// MeasureInChild: "bandwidth_gbps" = bytes of K + V / time;
// "fraction_of_bandwidth" = that over the ceiling's GB/s
// ("read_ceiling_gbps"); "cache_resident": K + V < 4x the last-level cache
// (so repeated calls may be served from cache; the ceiling then is the
// cache's too).
// torch: HF's eager decode formula in bfloat16 with grouped matmuls (q viewed
// as [1, 8, 4, 128] per kv head: HF's repeat_kv would first copy the cache
// 4x, so this baseline is faster than HF), bias materialised as
// [1, 32, 1, Sk] before timing; rope rotates q inside the call.
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
                         {"precision", bench_attention::CasePrecision(o, DType::kBFloat16)},
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
