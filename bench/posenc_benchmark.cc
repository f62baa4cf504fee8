// Micro benchmarks of posenc's memory-bound kernels (Google Benchmark).
// Bytes processed count reads + writes once, like `posenc bench`:
//   bench/posenc_benchmark --benchmark_filter=Rope
// Args: threads; buffers are allocated and touched once per benchmark.
// The pool benchmarks (BM_ParallelForRoundTrip, BM_DecodeShortCache) run
// each case with the pool's workers sleeping at once (spin 0, the pool
// before docs/PERFORMANCE.md's "posenc's pool: a bounded spin before
// sleeping") and with the default spin, in the same run:
//   bench/posenc_benchmark --benchmark_filter='RoundTrip|ShortCache'
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "posenc/bandwidth.h"
#include "posenc/dtype.h"
#include "posenc/flash_attention.h"
#include "posenc/rope.h"
#include "posenc/sinusoidal.h"

namespace {

using posenc::DType;

// q and k [1, 32, seq, 128] in place, bhsd.
void BM_RopeQK(benchmark::State& state, DType dtype) {
  const std::int64_t seq = state.range(0);
  const posenc::Context ctx(static_cast<int>(state.range(1)));
  const std::int64_t n = 32 * seq * 128;
  std::vector<unsigned char> q(n * posenc::DTypeSize(dtype), 0), k(q.size(), 0);
  posenc::RopeParams params;
  params.head_dim = 128;
  const auto qv = posenc::TensorView::Contiguous(q.data(), dtype, {1, 32, seq, 128});
  const auto kv = posenc::TensorView::Contiguous(k.data(), dtype, {1, 32, seq, 128});
  for (auto _ : state) {
    posenc::ApplyRopeQK(params, qv, kv, posenc::AttentionLayout::kBHSD,
                        posenc::Positions::Offset(0), posenc::RopeDirection::kForward, ctx);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 4 * static_cast<std::int64_t>(q.size()));
}
BENCHMARK_CAPTURE(BM_RopeQK, f32, DType::kFloat32)
    ->Args({1, 1})
    ->Args({4096, 1})
    ->Args({4096, 2})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_RopeQK, bf16, DType::kBFloat16)
    ->Args({1, 1})
    ->Args({4096, 1})
    ->Args({4096, 2})
    ->UseRealTime();

void BM_StreamRmw(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const posenc::Context ctx(static_cast<int>(state.range(1)));
  std::vector<float> a(static_cast<std::size_t>(n), 1.0f);
  for (auto _ : state) {
    posenc::RunStreamKernel(posenc::StreamKernel::kReadModifyWrite, a.data(), nullptr, n, 1.0f,
                            ctx);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 8 * n);
}
// Same bytes as q + k float32 [1, 32, 4096, 128].
BENCHMARK(BM_StreamRmw)
    ->Args({2 * 32 * 4096 * 128, 1})
    ->Args({2 * 32 * 4096 * 128, 2})
    ->UseRealTime();

void BM_Sinusoidal(benchmark::State& state) {
  const std::int64_t rows = state.range(0), dim = 1024;
  const posenc::Context ctx(static_cast<int>(state.range(1)));
  std::vector<float> t(static_cast<std::size_t>(rows * dim), 0.0f);
  const posenc::SinusoidalParams params{dim, 10000.0, posenc::SinusoidalLayout::kInterleaved};
  const auto view = posenc::TensorView::Contiguous(t.data(), DType::kFloat32, {rows, dim});
  for (auto _ : state) {
    posenc::SinusoidalTable(params, 0, rows, view, ctx);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 4 * rows * dim);
}
BENCHMARK(BM_Sinusoidal)->Args({32768, 1})->Args({32768, 2})->UseRealTime();

// A Context of `threads` pool workers made with POSENC_POOL_SPIN_US =
// spin_us, or with the default spin when spin_us < 0 (the variable is
// restored afterwards).
posenc::Context PoolContext(int threads, std::int64_t spin_us) {
  const char* env = std::getenv("POSENC_POOL_SPIN_US");
  const std::string saved = env != nullptr ? env : "";
  if (spin_us >= 0) {
    ::setenv("POSENC_POOL_SPIN_US", std::to_string(spin_us).c_str(), 1);
  } else {
    ::unsetenv("POSENC_POOL_SPIN_US");
  }
  posenc::Context ctx(threads);
  if (env != nullptr) {
    ::setenv("POSENC_POOL_SPIN_US", saved.c_str(), 1);
  } else {
    ::unsetenv("POSENC_POOL_SPIN_US");
  }
  return ctx;
}

// One ParallelFor of two empty tasks on 2 pool threads, back to back: what a
// call pays to hand its workers a job and wait for them. Arg: spin (us; -1:
// the default).
void BM_ParallelForRoundTrip(benchmark::State& state) {
  const posenc::Context ctx = PoolContext(2, state.range(0));
  for (auto _ : state) {
    ctx.ParallelFor(2, [](std::int64_t t, int) { benchmark::DoNotOptimize(t); });
  }
}
BENCHMARK(BM_ParallelForRoundTrip)->Arg(0)->Arg(-1)->UseRealTime();

// Decode of one token, bfloat16, 32 query heads over 8 kv heads, head dim
// 128, against a short cache (an engine's per-layer call early in a
// conversation), 2 pool threads. Args: cache length, spin (us; -1: the
// default).
void BM_DecodeShortCache(benchmark::State& state) {
  const std::int64_t seq = state.range(0), heads = 32, kv_heads = 8, dim = 128;
  const posenc::Context ctx = PoolContext(2, state.range(1));
  std::vector<posenc::BFloat16> q(static_cast<std::size_t>(heads * dim)),
      kv(static_cast<std::size_t>(seq * kv_heads * dim)), out(q.size());
  for (std::size_t i = 0; i < kv.size(); ++i) {
    kv[i] = posenc::FloatToBF16(static_cast<float>(i % 61) * 0.03f - 0.9f);
  }
  for (std::size_t i = 0; i < q.size(); ++i) {
    q[i] = posenc::FloatToBF16(static_cast<float>(i % 37) * 0.05f - 0.9f);
  }
  const auto view = [](void* data, std::int64_t s, std::int64_t h) {
    return posenc::TensorView::Contiguous(data, DType::kBFloat16, {1, s, h, dim});
  };
  const posenc::AttentionParams params;
  for (auto _ : state) {
    posenc::FlashAttentionDecode(params, view(q.data(), 1, heads), view(kv.data(), seq, kv_heads),
                                 view(kv.data(), seq, kv_heads), view(out.data(), 1, heads),
                                 posenc::TensorView{}, posenc::FlashAttentionOptions{}, ctx);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * 2 * seq * kv_heads * dim);
}
BENCHMARK(BM_DecodeShortCache)
    ->Args({256, 0})
    ->Args({256, -1})
    ->Args({2048, 0})
    ->Args({2048, -1})
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
