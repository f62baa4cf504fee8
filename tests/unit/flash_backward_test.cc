// Backward of the fused attention (FlashAttentionBackward) against the
// float64 oracle AttentionReferenceBackward for every supported scheme and
// option: causal, bidirectional, sliding windows, GQA/MQA, decode at an
// offset (bottom-right), explicit unsorted positions with queries that see
// no key, both layouts, odd sizes (1, 7, 217, 1031; head_dim 64, 80, value
// dim 48), odd tiles, RoPE keys rotated in the kernel or pre-rotated,
// float32 / bfloat16 / float16 / float64 inputs, threads, the scalar backend
// and every compiled Highway target. Tolerance: the 2x rule of
// flash_backward_fixture.h, for dq, dk, dv and the T5 / Shaw table
// gradients. Finite differences, lse and bad inputs:
// flash_backward_checks_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "flash_backward_fixture.h"
#include "posenc/flash_attention.h"
#include "simd_target_fixture.h"

namespace posenc::flash_test {
namespace {

TEST(FlashBackward, NoneCausal217) {
  Case c = Make("none causal", Kind::kNone, kCausal);
  c.Sq = c.Sk = 217;
  c.query_tile = c.key_tile = 64;
  CheckCase(c);
}

TEST(FlashBackward, NoneBidirectionalDecodeBhsdD80) {
  Case c = Make("none bidir decode", Kind::kNone, kBidir);
  c.Sq = 7;
  c.Sk = 217;
  c.D = c.Dv = 80;
  c.layout = AttentionLayout::kBHSD;
  CheckCase(c);
}

TEST(FlashBackward, AbsoluteValueDimDiffersOddTiles) {
  Case c = Make("absolute dv 48", Kind::kAbsolute, kCausal);
  c.Dv = 48;
  c.Sq = c.Sk = 7;
  c.query_tile = 3;
  c.key_tile = 2;
  CheckCase(c);
}

TEST(FlashBackward, SingleQuerySingleKey) {
  Case c = Make("1x1", Kind::kAlibi, kCausal);
  c.Sq = c.Sk = 1;
  const Grads g = CheckCase(c);
  // One visible key: P = 1, so dS = P (dP - D) = 0 up to the float32
  // rounding of dP = dO . v against D = dO . out: dq and dk vanish.
  for (double x : g.dq) EXPECT_LT(std::abs(x), 1e-6);
  for (double x : g.dk) EXPECT_LT(std::abs(x), 1e-6);
}

TEST(FlashBackward, AlibiCausalGqaOddTiles) {
  Case c = Make("alibi gqa", Kind::kAlibi, kCausal);
  c.H = 4;
  c.Hkv = 2;
  c.Sq = c.Sk = 100;
  c.query_tile = 32;
  c.key_tile = 48;
  CheckCase(c);
}

TEST(FlashBackward, AlibiCausalSlidingWindowSkipsTiles) {
  Case c = Make("alibi window", Kind::kAlibi, kCausal);
  c.Sq = c.Sk = 100;
  c.window = 50;  // 50 - 1 = 16 * 4 - 15: a hidden-looking tile pair holds one visible pair
  CheckCase(c);
  c.window = 31;  // 31 = 16 + 15: a visible-looking tile pair holds one hidden pair
  CheckCase(c);
}

TEST(FlashBackward, AlibiBidirectionalWindowBhsdBatch2) {
  Case c = Make("alibi bidir window", Kind::kAlibi, kBidir);
  c.window = 31;
  c.layout = AttentionLayout::kBHSD;
  c.B = 2;
  c.Sq = c.Sk = 64;
  CheckCase(c);
}

TEST(FlashBackward, T5BidirectionalWithTableGrad) {
  Case c = Make("t5 bidir", Kind::kT5, kBidir);
  c.Sq = c.Sk = 100;
  CheckCase(c);
}

TEST(FlashBackward, T5CausalDecodeMqa) {
  Case c = Make("t5 decode mqa", Kind::kT5, kCausal);
  c.Sq = 7;
  c.Sk = 217;
  c.H = 3;
  c.Hkv = 1;
  CheckCase(c);
}

TEST(FlashBackward, ShawCausalWithTableGrads) {
  Case c = Make("shaw causal", Kind::kShaw, kCausal);
  c.Sq = c.Sk = 100;
  CheckCase(c);
}

TEST(FlashBackward, ShawBidirectionalOneQueryBhsdD80) {
  Case c = Make("shaw bidir one query", Kind::kShaw, kBidir);
  c.Sq = 1;
  c.Sk = 217;
  c.D = c.Dv = 80;
  c.layout = AttentionLayout::kBHSD;
  CheckCase(c);
}

TEST(FlashBackward, RopeRotatedInKernel217) {
  Case c = Make("rope rotate", Kind::kRope, kCausal);
  c.Sq = c.Sk = 217;
  c.H = c.Hkv = 1;
  c.query_tile = c.key_tile = 64;
  CheckCase(c);
}

TEST(FlashBackward, RopePreRotatedKeyCacheDecodeGqa) {
  Case c = Make("rope pre-rotated", Kind::kRope, kCausal);
  c.Sq = 7;
  c.Sk = 217;
  c.H = 4;
  c.Hkv = 1;
  c.rope_keys = FlashRopeKeys::kPreRotated;
  CheckCase(c);
}

TEST(FlashBackward, ExplicitPositionsGiveZeroGradsToUnseenRows) {
  // More queries than keys, shuffled positions: some queries see no key and
  // some keys are seen by no query; both get exactly zero gradients.
  const Case c = WithExplicitPositions(Make("explicit positions", Kind::kShaw, kCausal), 9);
  Fixture f(c);
  const Grads g = CheckCase(c);
  bool any_query = false, any_key = false;
  for (Index b = 0; b < c.B; ++b) {
    for (Index i = 0; i < c.Sq; ++i) {
      bool sees = false;
      for (Index j = 0; j < c.Sk; ++j)
        sees = sees || f.Visible(f.qids[Z(b * c.Sq + i)], f.kids[Z(b * c.Sk + j)]);
      if (sees) continue;
      any_query = true;
      for (Index h = 0; h < c.H; ++h)
        for (Index x = 0; x < c.D; ++x)
          EXPECT_EQ(g.dq[Z(((b * c.H + h) * c.Sq + i) * c.D + x)], 0.0);
    }
    for (Index j = 0; j < c.Sk; ++j) {
      bool seen = false;
      for (Index i = 0; i < c.Sq; ++i)
        seen = seen || f.Visible(f.qids[Z(b * c.Sq + i)], f.kids[Z(b * c.Sk + j)]);
      if (seen) continue;
      any_key = true;
      for (Index h = 0; h < c.Hkv; ++h)
        for (Index x = 0; x < c.D; ++x)
          EXPECT_EQ(g.dk[Z(((b * c.Hkv + h) * c.Sk + j) * c.D + x)], 0.0);
    }
  }
  EXPECT_TRUE(any_query) << "the case must contain a query that sees no key";
  EXPECT_TRUE(any_key) << "the case must contain a key that no query sees";
}

TEST(FlashBackward, SixteenBitAndFloat64Inputs) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat64}) {
    Case c = Make(std::string("dtype ") + std::string(DTypeName(dtype)), Kind::kT5, kCausal);
    c.dtype = dtype;
    c.Sq = c.Sk = 64;
    CheckCase(c);
  }
  Case c = Make("rope float64", Kind::kRope, kBidir);
  c.dtype = DType::kFloat64;
  c.D = c.Dv = 80;
  CheckCase(c);
}

TEST(FlashBackward, RecomputedLseMatchesTheForwardLse) {
  // The forward's lse and the backward's own recomputation differ by float32
  // rounding only (the forward engine may sum in another order).
  for (Kind kind : {Kind::kNone, Kind::kT5, Kind::kShaw, Kind::kRope}) {
    Case c = Make(std::string("lse ") + std::string(KindName(kind)), kind, kCausal);
    c.window = 20;
    const Grads given = CheckCase(c);
    c.pass_lse = false;
    const Grads recomputed = CheckCase(c);
    EXPECT_LT(MaxErr(given.dq, recomputed.dq), 1e-6 * std::max(1.0, MaxAbs(given.dq)));
    EXPECT_LT(MaxErr(given.dk, recomputed.dk), 1e-6 * std::max(1.0, MaxAbs(given.dk)));
    EXPECT_LT(MaxErr(given.dv, recomputed.dv), 1e-6 * std::max(1.0, MaxAbs(given.dv)));
  }
}

TEST(FlashBackward, ThreadsGiveTheSameGradients) {
  Case c = Make("threads", Kind::kShaw, kBidir);
  c.B = 2;
  c.H = 4;
  c.Hkv = 2;
  const Grads one = CheckCase(c);
  c.threads = 3;
  const Grads three = CheckCase(c);
  EXPECT_EQ(one.dq, three.dq);  // each row is written by one task
  EXPECT_EQ(one.dk, three.dk);
  EXPECT_EQ(one.dv, three.dv);
  // Table gradients: float64 per-worker sums, reduced in another order.
  EXPECT_LT(MaxErr(one.a_key, three.a_key), 1e-6 * std::max(1.0, MaxAbs(one.a_key)));
  EXPECT_LT(MaxErr(one.a_value, three.a_value), 1e-6 * std::max(1.0, MaxAbs(one.a_value)));
}

TEST(FlashBackward, UnitTasksGiveThePhasedGradients) {
  // 8 units (B 4 x Hkv 2): one thread runs one task per unit
  // (kUnitsPerThread in flash_backward_engine.cc), two threads the three
  // phases over groups of units.
  for (Kind kind : {Kind::kNone, Kind::kRope, Kind::kAlibi, Kind::kT5, Kind::kShaw}) {
    Case c = Make(std::string("units ") + std::string(KindName(kind)), kind, kCausal);
    c.B = 4;
    c.H = 4;
    const Grads one = CheckCase(c);
    c.threads = 2;
    const Grads two = CheckCase(c);
    EXPECT_EQ(one.dq, two.dq) << c.name;
    EXPECT_EQ(one.dk, two.dk) << c.name;
    EXPECT_EQ(one.dv, two.dv) << c.name;
  }
}

TEST(FlashBackward, LongSequence1031) {
  // Sq = Sk = 1031 with a window keeps the float64 oracle cheap; full-size
  // only in optimised builds (the sanitizer build runs the window-free tail).
  Case c = Make("1031", Kind::kAlibi, kCausal);
  c.H = c.Hkv = 1;
  c.D = c.Dv = 64;
  c.query_tile = 64;
  c.key_tile = 48;
#ifdef NDEBUG
  c.Sq = c.Sk = 1031;
  c.window = 100;
#else
  c.Sq = 7;
  c.Sk = 1031;
#endif
  CheckCase(c);
}

TEST(FlashBackward, ScalarBackendEveryScheme) {
  for (Kind kind : {Kind::kNone, Kind::kAlibi, Kind::kT5, Kind::kShaw, Kind::kRope}) {
    Case c = Make(std::string("scalar ") + std::string(KindName(kind)), kind, kCausal);
    c.backend = Backend::kScalar;
    c.Sq = 7;
    c.Sk = 50;
    c.D = c.Dv = 80;
    CheckCase(c);
  }
}

// Runs once per compiled Highway target (tests/unit/simd_target_fixture.h).
class FlashBackwardSimdTarget : public test::PerSimdTarget {};

TEST_P(FlashBackwardSimdTarget, MatchesReferenceAndScalarBackend) {
  for (Kind kind : {Kind::kAlibi, Kind::kShaw, Kind::kRope}) {
    Case c = Make(std::string("simd ") + std::string(KindName(kind)), kind, kBidir);
    c.backend = Backend::kSimd;
    c.Sq = 19;
    c.Sk = 45;
    c.D = c.Dv = 80;  // 80 = 5 * 16: the single-vector loops run on AVX3
    c.query_tile = 7;
    c.key_tile = 37;  // a short, padded last tile
    const Grads simd = CheckCase(c);
    c.backend = Backend::kScalar;
    const Grads scalar = CheckCase(c);
    // Same formulas, sums reordered: float32 rounding only.
    EXPECT_LT(MaxErr(simd.dq, scalar.dq), 1e-5);
    EXPECT_LT(MaxErr(simd.dk, scalar.dk), 1e-5);
    EXPECT_LT(MaxErr(simd.dv, scalar.dv), 1e-5);
  }
}

POSENC_INSTANTIATE_PER_SIMD_TARGET(FlashBackwardSimdTarget);

}  // namespace
}  // namespace posenc::flash_test
