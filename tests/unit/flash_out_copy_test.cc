// FlashAttentionWithLse's second output of O (out_copy): written in out_copy's
// dtype from the same float32 values as out, bit for bit what converting out
// gives (FloatToBF16, FloatToF16, or out itself), with out and lse unchanged
// by its presence; in both layouts, on the SIMD and the scalar backend, for
// a bias scheme and for RoPE; and one test per bad out_copy (shape, overlap
// with out and with lse, a zero stride).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "flash_test_util.h"
#include "posenc/alibi.h"
#include "posenc/context.h"
#include "posenc/dtype.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"

namespace posenc::flash_test {
namespace {

constexpr Index kB = 2, kS = 37, kH = 4, kD = 24;

std::vector<std::uint16_t> RandomBf16(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint16_t> x(n);
  std::uint32_t s = seed;
  for (auto& v : x) {
    s = s * 1664525u + 1013904223u;
    v = FloatToBF16(static_cast<float>(s >> 8) / 16777216.0f * 4.0f - 2.0f).bits;
  }
  return x;
}

// A contiguous [B, S, H, D] or [B, H, S, D] view.
TensorView View(AttentionLayout layout, const void* data, DType dtype) {
  return layout == AttentionLayout::kBSHD ? TensorView::Contiguous(data, dtype, {kB, kS, kH, kD})
                                          : TensorView::Contiguous(data, dtype, {kB, kH, kS, kD});
}

// The bits of element i of a float32, bfloat16 or float16 buffer as
// converting the float32 value f gives them.
bool SameAsConverted(DType dtype, const void* copy, std::size_t i, float f) {
  if (dtype == DType::kFloat32) {
    return std::memcmp(static_cast<const float*>(copy) + i, &f, sizeof f) == 0;
  }
  const std::uint16_t got = static_cast<const std::uint16_t*>(copy)[i];
  return got == (dtype == DType::kBFloat16 ? FloatToBF16(f).bits : FloatToF16(f).bits);
}

TEST(FlashAttentionOutCopy, EqualsTheConvertedOutput) {
  const std::size_t n = static_cast<std::size_t>(kB * kS * kH * kD);
  const std::vector<std::uint16_t> q = RandomBf16(n, 1), k = RandomBf16(n, 2), v = RandomBf16(n, 3);
  AlibiParams ap;
  ap.num_heads = kH;
  RopeParams rope;
  rope.pairing = RopePairing::kHalfSplit;
  rope.head_dim = kD;
  for (const AttentionLayout layout : {AttentionLayout::kBSHD, AttentionLayout::kBHSD})
    for (const bool alibi : {true, false})
      for (const Backend backend : {Backend::kAuto, Backend::kScalar})
        for (const DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
          SCOPED_TRACE(::testing::Message()
                       << "layout " << static_cast<int>(layout) << " alibi " << alibi << " backend "
                       << BackendName(backend) << " dtype " << DTypeName(dtype));
          AttentionParams p;
          p.layout = layout;
          p.scheme = alibi ? AlibiScheme(AlibiSlopes(ap)) : RopeScheme(rope);
          FlashAttentionOptions o;
          o.precision = FlashPrecision::kBFloat16;
          o.query_tile = 16;  // several query and key tiles, diagonal ones included
          o.key_tile = 16;
          const Context ctx(2, backend);
          const auto view = [&](const void* d, DType t) { return View(layout, d, t); };
          std::vector<float> out(n), plain(n), lse(kB * kH * kS), plain_lse(lse.size());
          std::vector<unsigned char> copy(n * DTypeSize(dtype), 0xab);
          const auto lse_view = [&](std::vector<float>& l) {
            return TensorView::Contiguous(l.data(), DType::kFloat32, {kB, kH, kS});
          };
          FlashAttentionWithLse(p, view(q.data(), DType::kBFloat16),
                                view(k.data(), DType::kBFloat16), view(v.data(), DType::kBFloat16),
                                view(out.data(), DType::kFloat32), lse_view(lse),
                                view(copy.data(), dtype), o, ctx);
          FlashAttentionWithLse(p, view(q.data(), DType::kBFloat16),
                                view(k.data(), DType::kBFloat16), view(v.data(), DType::kBFloat16),
                                view(plain.data(), DType::kFloat32), lse_view(plain_lse), o, ctx);
          ASSERT_EQ(std::memcmp(out.data(), plain.data(), n * sizeof(float)), 0);
          ASSERT_EQ(std::memcmp(lse.data(), plain_lse.data(), lse.size() * sizeof(float)), 0);
          for (std::size_t i = 0; i < n; ++i) {
            ASSERT_TRUE(SameAsConverted(dtype, copy.data(), i, out[i])) << i << ": " << out[i];
          }
        }
}

// Small float32 inputs for the bad-input tests.
struct Small {
  std::vector<float> q = std::vector<float>(2 * 3 * 2 * 4, 0.5f), k = q, v = q, out = q;
  std::vector<float> lse = std::vector<float>(2 * 2 * 3, 0.0f);
  std::vector<std::uint16_t> copy = std::vector<std::uint16_t>(2 * 3 * 2 * 4 + 8, 0);
  TensorView View(std::vector<float>& x) {
    return TensorView::Contiguous(x.data(), DType::kFloat32, {2, 3, 2, 4});
  }
  void Run(const TensorView& out_copy) {
    FlashAttentionWithLse({}, View(q), View(k), View(v), View(out),
                          TensorView::Contiguous(lse.data(), DType::kFloat32, {2, 2, 3}), out_copy);
  }
};

TEST(FlashAttentionOutCopyBadInput, Shape) {
  Small s;
  ExpectInvalid(
      [&] {
        s.Run(TensorView::Contiguous(s.copy.data(), DType::kBFloat16, {2, 3, 2, 5}));
      },
      "out_copy");
}

TEST(FlashAttentionOutCopyBadInput, OverlapsOut) {
  Small s;
  ExpectInvalid(
      [&] {
        s.Run(TensorView::Contiguous(s.out.data(), DType::kBFloat16, {2, 3, 2, 4}));
      },
      "out_copy");
}

TEST(FlashAttentionOutCopyBadInput, OverlapsLse) {
  Small s;
  s.lse.resize(2 * 3 * 2 * 4);
  ExpectInvalid(
      [&] {
        FlashAttentionWithLse({}, s.View(s.q), s.View(s.k), s.View(s.v), s.View(s.out),
                              TensorView::Contiguous(s.lse.data(), DType::kFloat32, {2, 2, 3}),
                              TensorView::Contiguous(s.lse.data(), DType::kBFloat16, {2, 3, 2, 4}));
      },
      "out_copy");
}

TEST(FlashAttentionOutCopyBadInput, TwoElementsAtOneAddress) {
  Small s;  // a zero stride on the sequence: rows would overwrite each other
  ExpectInvalid(
      [&] {
        s.Run(TensorView::Strided(s.copy.data(), DType::kBFloat16, {2, 3, 2, 4}, {24, 0, 4, 1}));
      },
      "out_copy");
}

}  // namespace
}  // namespace posenc::flash_test
