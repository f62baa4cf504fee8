// The AVX512-BF16 rotation of bfloat16 RoPE rows
// (src/kernels/simd/rope_bf16_avx512.*) against the portable AVX3 rounding it
// replaces: bit for bit, on ordinary values, denormal results (which the
// instruction would flush to zero), NaN, infinities and huge values, for
// every vector tail (masked loads/stores), both pairings, partial rotary,
// both layouts, in place and out of place, forward and inverse, 1 and 2
// threads. Skipped on CPUs without AVX512-BF16.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/simd/rope_bf16_avx512.h"
#include "kernels/simd/targets.h"
#include "posenc/context.h"
#include "posenc/rope.h"

namespace posenc {
namespace {

std::vector<BFloat16> Values(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<BFloat16> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    float x = u(rng);
    switch (i % 23) {
      case 3:
        x *= 1e-38f;
        break;  // near/below the smallest normal
      case 7:
        x *= 3e-39f;
        break;  // denormal input
      case 11:
        x *= 1e38f;
        break;  // huge: products overflow to inf
      case 13:
        x = std::numeric_limits<float>::infinity();
        break;
      case 17:
        x = std::numeric_limits<float>::quiet_NaN();
        break;
      default:
        break;
    }
    v[static_cast<std::size_t>(i)] = FloatToBF16(x);
  }
  // A signalling NaN (quieted by both paths the same way).
  if (n > 5) std::memcpy(&v[5], "\x01\x7f", 2);  // bits 0x7f01
  return v;
}

struct Bf16HwOff {
  Bf16HwOff() { kernels::simd::SetRopeBf16HardwareEnabled(false); }
  ~Bf16HwOff() { kernels::simd::SetRopeBf16HardwareEnabled(true); }
};

TEST(SimdRopeBf16Hardware, BitIdenticalToPortableRounding) {
  if (!kernels::simd::RopeBf16HardwareAvailable()) GTEST_SKIP() << "CPU without AVX512-BF16";
  ASSERT_EQ(kernels::simd::DispatchedTargetName(), "AVX3");
  std::uint32_t seed = 7;
  struct Dims {
    std::int64_t head_dim, rotary_dim;
  };
  for (const Dims dims : {Dims{10, 8}, Dims{64, 0}, Dims{80, 0}, Dims{96, 64}, Dims{128, 0},
                          Dims{256, 0}, Dims{70, 66}}) {
    for (const RopePairing pairing : {RopePairing::kHalfSplit, RopePairing::kInterleaved}) {
      for (const AttentionLayout layout : {AttentionLayout::kBSHD, AttentionLayout::kBHSD}) {
        const std::int64_t batch = 2, seq = 37, heads = 3;
        const std::int64_t n = batch * seq * heads * dims.head_dim;
        RopeParams params;
        params.head_dim = dims.head_dim;
        params.rotary_dim = dims.rotary_dim;
        params.pairing = pairing;
        const bool bshd = layout == AttentionLayout::kBSHD;
        const auto input = Values(n, seed++);
        const RopeDirection dir = seed % 2 ? RopeDirection::kForward : RopeDirection::kInverse;
        const Positions pos = Positions::Offset((std::int64_t{1} << 24) - 64);
        for (const int threads : {1, 2}) {
          const Context ctx(threads, Backend::kSimd);
          auto hw = input, sw = input;
          std::vector<BFloat16> hw_out(input.size()), sw_out(input.size());
          const auto view = [&](std::vector<BFloat16>& v) {
            return bshd ? TensorView::Contiguous(v.data(), DType::kBFloat16,
                                                 {batch, seq, heads, dims.head_dim})
                        : TensorView::Contiguous(v.data(), DType::kBFloat16,
                                                 {batch, heads, seq, dims.head_dim});
          };
          const TensorView hw_o = view(hw_out), sw_o = view(sw_out);
          ApplyRope(params, view(hw), layout, pos, dir, nullptr, ctx);
          ApplyRope(params, view(hw), layout, pos, dir, &hw_o, ctx);  // out of place, from hw
          {
            const Bf16HwOff off;
            ASSERT_FALSE(kernels::simd::RopeBf16HardwareAvailable());
            ApplyRope(params, view(sw), layout, pos, dir, nullptr, ctx);
            ApplyRope(params, view(sw), layout, pos, dir, &sw_o, ctx);
          }
          const std::string what =
              "head_dim " + std::to_string(dims.head_dim) + " rotary_dim " +
              std::to_string(dims.rotary_dim) + " " + std::string(RopePairingName(pairing)) + " " +
              std::string(LayoutName(layout)) + " threads " + std::to_string(threads);
          ASSERT_EQ(0, std::memcmp(hw.data(), sw.data(), hw.size() * 2)) << what << " in place";
          ASSERT_EQ(0, std::memcmp(hw_out.data(), sw_out.data(), hw_out.size() * 2))
              << what << " out of place";
        }
      }
    }
  }
}

TEST(SimdRopeBf16Hardware, DenormalResultsAreNotFlushed) {
  if (!kernels::simd::RopeBf16HardwareAvailable()) GTEST_SKIP() << "CPU without AVX512-BF16";
  // Position 0: cos = 1, sin = 0, so the rotation returns its input, which
  // here is a bfloat16 denormal in every lane or in some lanes of each 32
  // (the instruction alone would write zeros there). Head dims 64 and 128
  // take the 32-lane conversion, 40 the 16-lane and masked ones.
  for (const std::int64_t head_dim : {40, 64, 128}) {
    for (const RopePairing pairing : {RopePairing::kHalfSplit, RopePairing::kInterleaved}) {
      for (const int every : {1, 7}) {
        RopeParams params;
        params.head_dim = head_dim;
        params.pairing = pairing;
        std::vector<BFloat16> v(static_cast<std::size_t>(head_dim));
        for (std::size_t i = 0; i < v.size(); ++i) {
          v[i] = FloatToBF16(static_cast<float>(i + 1) * (i % every == 0 ? 1e-40f : 0.25f));
        }
        const auto before = v;
        ApplyRope(params, TensorView::Contiguous(v.data(), DType::kBFloat16, {1, 1, 1, head_dim}),
                  AttentionLayout::kBSHD, Positions::Offset(0), RopeDirection::kForward, nullptr,
                  Context(1, Backend::kSimd));
        for (std::size_t i = 0; i < v.size(); ++i) {
          SCOPED_TRACE("head_dim " + std::to_string(head_dim) + " every " + std::to_string(every) +
                       " lane " + std::to_string(i));
          EXPECT_EQ(BF16ToFloat(v[i]), BF16ToFloat(before[i]));
          EXPECT_NE(BF16ToFloat(v[i]), 0.0f);
        }
      }
    }
  }
}

}  // namespace
}  // namespace posenc
