// Micro benchmarks of posenc's memory-bound kernels (Google Benchmark).
// Bytes processed count reads + writes once, like `posenc bench`:
//   bench/posenc_benchmark --benchmark_filter=Rope
// Args: threads; buffers are allocated and touched once per benchmark.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "posenc/bandwidth.h"
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

}  // namespace

BENCHMARK_MAIN();
