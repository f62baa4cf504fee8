// Decode attention (FlashAttentionDecode, split-K with a log-sum-exp merge)
// against the float64 reference with FlashAttention's 2x rule for every
// fused scheme (none, ALiBi, T5, RoPE rotated in the kernel or pre-rotated
// in the cache, Shaw), GQA, 1 to 16 queries, windows and bidirectional
// masks, bfloat16 caches, every compiled SIMD target and the scalar
// backend; against the dense kernel (FlashAttention) on a long cache; the
// same bits for any thread count; bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "flash_forward_fixture.h"
#include "flash_test_util.h"
#include "posenc/flash_attention.h"
#include "posenc/rope.h"
#include "simd_target_fixture.h"

namespace posenc::flash_test {
namespace {

// A decode case: Sq queries against a cache of Sk keys (shorter in the
// unoptimised sanitizer build, where the float64 oracle is slow).
Case Decode(std::string name, Kind kind, AttentionMask mask, Index sq) {
  Case c = Make(std::move(name), kind, mask);
  c.decode = true;
  c.Sq = sq;
#ifdef NDEBUG
  c.Sk = 3001;
#else
  c.Sk = 601;
#endif
  c.H = 8;
  c.Hkv = 2;
  c.D = c.Dv = 64;
  c.shaw_clip = 16;
  return c;
}

TEST(FlashAttentionDecode, NoneOneQueryGqa) { CheckCase(Decode("none", Kind::kNone, kCausal, 1)); }

TEST(FlashAttentionDecode, AlibiFourQueries) {
  CheckCase(Decode("alibi", Kind::kAlibi, kCausal, 4));
}

TEST(FlashAttentionDecode, T5SixteenQueries) { CheckCase(Decode("t5", Kind::kT5, kCausal, 16)); }

TEST(FlashAttentionDecode, RopeRotatedInKernelD128) {
  Case c = Decode("rope rotate", Kind::kRope, kCausal, 2);
  c.D = c.Dv = 128;
  CheckCase(c);
}

TEST(FlashAttentionDecode, RopePreRotatedCache) {
  // (A bfloat16 cache rotated by the test would round the keys away from
  // the oracle's: pre-rotation is checked in float32, bfloat16 below.)
  Case c = Decode("rope pre-rotated", Kind::kRope, kCausal, 1);
  c.rope_keys = FlashRopeKeys::kPreRotated;
  CheckCase(c);
}

TEST(FlashAttentionDecode, AlibiBf16Cache) {
  Case c = Decode("alibi bf16", Kind::kAlibi, kCausal, 1);
  c.dtype = DType::kBFloat16;
  CheckCase(c);
}

// The cache read in place (keys by the bfloat16 logits, values converted in
// registers by FlashAccumulatePVStored) with head sizes that leave a tail
// of less than one vector in every target: float16 and bfloat16 caches.
TEST(FlashAttentionDecode, CacheReadInPlaceWithTails) {
  Case c = Decode("alibi f16 tails", Kind::kAlibi, kCausal, 2);
  c.dtype = DType::kFloat16;
  c.D = 56;
  c.Dv = 36;
  CheckCase(c);
  c = Decode("none bf16 tails", Kind::kNone, kCausal, 1);
  c.dtype = DType::kBFloat16;
  c.D = 72;
  c.Dv = 40;
  CheckCase(c);
}

// The bfloat16 logits kernel (FlashDecodeLogitsBf16, where the CPU has
// AVX512_BF16) with query rows that leave 1-3 rows past a multiple of 4
// (GQA 3: R = 3 and 6), head sizes held in registers with a tail (96, 72
// above) and wider than 128 (q read per step: 160, and 200 with a tail),
// and the cache's last block ending inside a pair of keys (3001 keys).
TEST(FlashAttentionDecode, Bf16LogitsRowTailsAndWideHeads) {
  for (const auto& [sq, d] : {std::pair<Index, Index>{1, 96}, {2, 200}, {1, 160}}) {
    Case c = Decode("bf16 logits rows " + std::to_string(sq) + " dim " + std::to_string(d),
                    Kind::kAlibi, kCausal, sq);
    c.dtype = DType::kBFloat16;
    c.H = 6;
    c.Hkv = 2;
    c.D = d;
    c.Dv = 64;
    CheckCase(c);
  }
}

TEST(FlashAttentionDecode, ShawValueTermsMqaOddDims) {
  Case c = Decode("shaw mqa", Kind::kShaw, kCausal, 3);
  c.Hkv = 1;
  c.D = 40;
  c.Dv = 24;
  CheckCase(c);
}

TEST(FlashAttentionDecode, AlibiBidirectionalWindowBhsd) {
  Case c = Decode("alibi bidir window", Kind::kAlibi, kBidir, 5);
  c.window = 300;  // most chunks are hidden, one chunk straddles the window's edge
  c.layout = AttentionLayout::kBHSD;
  c.B = 2;
  CheckCase(c);
}

TEST(FlashAttentionDecode, ExplicitPositionsWithEmptyRows) {
  // Shuffled ids, a window of 3: some queries see no key (zeros, lse -inf).
  Case c = WithExplicitPositions(Decode("explicit", Kind::kT5, kCausal, 9), 9);
  c.decode = true;
  CheckCase(c);
}

TEST(FlashAttentionDecode, ThreadsGiveTheSameBits) {
  Case c = Decode("threads", Kind::kAlibi, kCausal, 2);
  c.B = 2;
  const std::vector<double> one = CheckCase(c);
  c.threads = 3;
  EXPECT_EQ(one, CheckCase(c));  // chunks depend on the cache length only
}

TEST(FlashAttentionDecode, ScalarBackendMatchesReference) {
  Case c = Decode("scalar", Kind::kT5, kCausal, 3);
  c.backend = Backend::kScalar;
  CheckCase(c);
}

class FlashDecodeSimdTarget : public test::PerSimdTarget {};

TEST_P(FlashDecodeSimdTarget, MatchesReference) {
  CheckCase(Decode("alibi gqa", Kind::kAlibi, kCausal, 4));
  Case c = Decode("rope bf16 odd dim", Kind::kRope, kCausal, 1);
  c.dtype = DType::kBFloat16;
  c.D = c.Dv = 48;
  CheckCase(c);
}
POSENC_INSTANTIATE_PER_SIMD_TARGET(FlashDecodeSimdTarget);

// A long bfloat16 cache (2^15 + 5 keys in optimised builds): decode and the
// dense kernel compute the same float32 formula with sums in another
// order, so outputs agree to float32 rounding of the O(1) values, and the
// log-sum-exp (merged from 64 chunks) agrees too.
TEST(FlashAttentionDecode, LongCacheMatchesDenseKernel) {
#ifdef NDEBUG
  const Index sk = (Index{1} << 15) + 5;
#else
  const Index sk = 4099;
#endif
  const Index B = 1, Sq = 1, H = 8, Hkv = 2, D = 128;
  Tensor q(DType::kBFloat16, AttentionLayout::kBSHD, B, Sq, H, D, 1);
  Tensor k(DType::kBFloat16, AttentionLayout::kBSHD, B, sk, Hkv, D, 2);
  Tensor v(DType::kBFloat16, AttentionLayout::kBSHD, B, sk, Hkv, D, 3);
  AttentionParams params;
  params.scheme = AlibiScheme(AlibiSlopes(H));
  std::vector<float> dense(Z(B * Sq * H * D)), decode(dense.size()), lse_dense(Z(H)),
      lse_decode(Z(H));
  const auto out = [&](std::vector<float>& x) {
    return TensorView::Contiguous(x.data(), DType::kFloat32, {B, Sq, H, D});
  };
  const auto lse = [&](std::vector<float>& x) {
    return TensorView::Contiguous(x.data(), DType::kFloat32, {B, H, Sq});
  };
  const Context ctx(2);
  FlashAttentionWithLse(params, q.view, k.view, v.view, out(dense), lse(lse_dense), {}, ctx);
  FlashAttentionDecode(params, q.view, k.view, v.view, out(decode), lse(lse_decode), {}, ctx);
  double err = 0.0, lse_err = 0.0;
  for (std::size_t i = 0; i < dense.size(); ++i) {
    ASSERT_TRUE(std::isfinite(decode[i]));
    err = std::max(err, std::abs(static_cast<double>(dense[i]) - decode[i]));
  }
  for (std::size_t i = 0; i < lse_dense.size(); ++i) {
    lse_err = std::max(lse_err, std::abs(static_cast<double>(lse_dense[i]) - lse_decode[i]));
  }
  EXPECT_LT(err, 2e-6);
  EXPECT_LT(lse_err, 1e-5 * std::max(1.0f, std::abs(lse_dense[0])));
}

// A bfloat16 cache with queries that are not bfloat16 values (RoPE rotates
// them in float32 against a pre-rotated cache; float32 queries): decode's
// logits take q as three bfloat16 parts against the cache's rows, the
// dense kernel converts the keys to float32; both are float32-accurate,
// so outputs agree to float32 rounding of the O(1) values (q rounded to
// one bfloat16 part misses by ~2e-4: checked).
TEST(FlashAttentionDecode, Bf16CacheWithFloat32AccurateQueries) {
  const Index sk = 3001, B = 1, Sq = 1, H = 8, Hkv = 2, D = 128;
  for (const bool rope : {true, false}) {
    SCOPED_TRACE(rope ? "rope, pre-rotated bfloat16 cache" : "float32 q, bfloat16 cache");
    Tensor q(rope ? DType::kBFloat16 : DType::kFloat32, AttentionLayout::kBSHD, B, Sq, H, D, 1);
    Tensor k(DType::kBFloat16, AttentionLayout::kBSHD, B, sk, Hkv, D, 2);
    Tensor v(DType::kBFloat16, AttentionLayout::kBSHD, B, sk, Hkv, D, 3);
    AttentionParams params;
    params.mask = AttentionMask::kCausal;
    params.query_positions = Positions::Offset(sk - 1);
    FlashAttentionOptions options;
    if (rope) {
      RopeParams r;
      r.head_dim = D;
      params.scheme = RopeScheme(r);
      ApplyRope(r, k.view, AttentionLayout::kBSHD, Positions::Offset(0));
      options.rope_keys = FlashRopeKeys::kPreRotated;
    }
    std::vector<float> dense(Z(B * Sq * H * D)), decode(dense.size());
    const auto out = [&](std::vector<float>& x) {
      return TensorView::Contiguous(x.data(), DType::kFloat32, {B, Sq, H, D});
    };
    const Context ctx(2);
    FlashAttention(params, q.view, k.view, v.view, out(dense), options, ctx);
    FlashAttentionDecode(params, q.view, k.view, v.view, out(decode), {}, options, ctx);
    double err = 0.0;
    for (std::size_t i = 0; i < dense.size(); ++i) {
      ASSERT_TRUE(std::isfinite(decode[i]));
      err = std::max(err, std::abs(static_cast<double>(dense[i]) - decode[i]));
    }
    EXPECT_LT(err, 2e-6);
  }
}

// The decode's buffers live per thread and keep their capacity between calls
// (a serving loop calls it once per token): a call of another shape in
// between (float32, one kv head, odd D, 16 queries, T5) must not change the
// bits of the next call, and that call must match a fresh context's.
TEST(FlashAttentionDecode, BuffersReusedAcrossShapesGiveTheSameBits) {
  const Index sk = 3001, H = 8;
  Tensor q(DType::kBFloat16, AttentionLayout::kBSHD, 1, 1, H, 128, 1);
  Tensor k(DType::kBFloat16, AttentionLayout::kBSHD, 1, sk, 2, 128, 2);
  Tensor v(DType::kBFloat16, AttentionLayout::kBSHD, 1, sk, 2, 128, 3);
  Tensor q2(DType::kFloat32, AttentionLayout::kBSHD, 2, 16, 4, 48, 4);
  Tensor k2(DType::kFloat32, AttentionLayout::kBSHD, 2, 700, 1, 48, 5);
  Tensor v2(DType::kFloat32, AttentionLayout::kBSHD, 2, 700, 1, 48, 6);
  AttentionParams alibi;
  alibi.scheme = AlibiScheme(AlibiSlopes(H));
  T5BucketParams tp;
  tp.direction = T5Direction::kCausal;
  T5BiasTable t5(tp, 4);
  t5.InitNormal(3, 1.0);
  AttentionParams t5_params;
  t5_params.scheme = T5Scheme(t5);
  const auto run = [](const AttentionParams& params, const Tensor& qt, const Tensor& kt,
                      const Tensor& vt, const Context& ctx) {
    const Index b = qt.view.shape[0], sq = qt.view.shape[1], h = qt.view.shape[2];
    const Index d = qt.view.shape[3];
    std::vector<float> out(Z(b * sq * h * d));
    FlashAttentionDecode(params, qt.view, kt.view, vt.view,
                         TensorView::Contiguous(out.data(), DType::kFloat32, {b, sq, h, d}), {}, {},
                         ctx);
    return out;
  };
  const Context ctx(2);
  const std::vector<float> first = run(alibi, q, k, v, ctx);
  const std::vector<float> other = run(t5_params, q2, k2, v2, ctx);
  EXPECT_EQ(first, run(alibi, q, k, v, ctx));
  const Context fresh(3);
  EXPECT_EQ(other, run(t5_params, q2, k2, v2, fresh));
  EXPECT_EQ(first, run(alibi, q, k, v, fresh));
}

TEST(FlashAttentionDecodeBadInput, SeventeenQueries) {
  Tensor q(DType::kFloat32, AttentionLayout::kBSHD, 1, 17, 2, 8, 1);
  Tensor k(DType::kFloat32, AttentionLayout::kBSHD, 1, 40, 2, 8, 2);
  Tensor v(DType::kFloat32, AttentionLayout::kBSHD, 1, 40, 2, 8, 3);
  Tensor o(DType::kFloat32, AttentionLayout::kBSHD, 1, 17, 2, 8, 4);
  ExpectInvalid([&] { FlashAttentionDecode({}, q.view, k.view, v.view, o.view); }, "q.shape[seq]");
}

TEST(FlashAttentionDecodeBadInput, LseShape) {
  Tensor q(DType::kFloat32, AttentionLayout::kBSHD, 1, 2, 2, 8, 1);
  Tensor k(DType::kFloat32, AttentionLayout::kBSHD, 1, 40, 2, 8, 2);
  Tensor v(DType::kFloat32, AttentionLayout::kBSHD, 1, 40, 2, 8, 3);
  Tensor o(DType::kFloat32, AttentionLayout::kBSHD, 1, 2, 2, 8, 4);
  std::vector<float> lse(3);
  ExpectInvalid(
      [&] {
        FlashAttentionDecode({}, q.view, k.view, v.view, o.view,
                             TensorView::Contiguous(lse.data(), DType::kFloat32, {1, 1, 3}));
      },
      "lse");
}

}  // namespace
}  // namespace posenc::flash_test
