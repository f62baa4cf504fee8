// Peak extra memory of the fused attention: S = 16384 causal ALiBi, head_dim
// 64, must stay under 64 MiB beyond its inputs and output (an [S, S] float32
// score matrix alone would be 1 GiB per head). Measured in a forked child:
// the inputs are allocated and pre-faulted first, then the ru_maxrss
// (high-water resident set) delta across the call is the peak extra memory.
//
// 8 heads, head_dim 64, 2 threads (the configuration: ~2.2e11 flops,
// ~8 CPU-seconds in release with the Highway kernels). It runs in optimised
// (NDEBUG) builds only: unoptimised Highway code would take minutes. Under
// AddressSanitizer the RSS includes shadow memory and quarantined frees, so
// the test is skipped there too, with a message saying why.
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "flash_test_util.h"
#include "posenc/flash_attention.h"

namespace posenc::flash_test {
namespace {

// Runs in the forked child: returns the peak extra KiB, or -1 on a wrong result.
long MeasureChild(std::int64_t seq, std::int64_t heads) {
  const std::int64_t d = 64;
  const auto n = static_cast<std::size_t>(seq * heads * d);
  std::vector<float> q(n), k(n), v(n), out(n);
  for (std::size_t i = 0; i < n; ++i) {  // pre-faults every page
    q[i] = std::sin(0.001f * static_cast<float>(i));
    k[i] = std::cos(0.002f * static_cast<float>(i));
    v[i] = std::sin(0.003f * static_cast<float>(i) + 1.0f);
    out[i] = -1.0f;
  }
  AttentionParams params;
  params.mask = AttentionMask::kCausal;
  params.scheme = AlibiScheme(AlibiSlopes(heads));
  const Context ctx(2);
  const long before = MaxRssKiB();
  FlashAttention(params, TensorView::Contiguous(q.data(), DType::kFloat32, {1, seq, heads, d}),
                 TensorView::Contiguous(k.data(), DType::kFloat32, {1, seq, heads, d}),
                 TensorView::Contiguous(v.data(), DType::kFloat32, {1, seq, heads, d}),
                 TensorView::Contiguous(out.data(), DType::kFloat32, {1, seq, heads, d}),
                 FlashAttentionOptions{}, ctx);
  const long after = MaxRssKiB();
  // The output is a convex combination of v rows: |out| <= max |v| = 1.
  for (float x : out) {
    if (!(std::abs(x) <= 1.0f + 1e-5f)) return -1;
  }
  // Query 0 sees only key 0: its output is exactly v_0.
  for (std::int64_t x = 0; x < heads * d; ++x) {
    if (out[static_cast<std::size_t>(x)] != v[static_cast<std::size_t>(x)]) return -1;
  }
  return after - before;
}

TEST(FlashAttentionMemory, S16384AlibiPeakExtraUnder64MiB) {
  ExpectPeakExtraMemoryBelow([] { return MeasureChild(16384, 8); }, 64 * 1024,
                             "S = 16384 x 8 heads", "-1: wrong output");
}

}  // namespace
}  // namespace posenc::flash_test
