// Fused (flash) attention against the float64 reference (AttentionReference)
// for every supported positional scheme and option: causal, bidirectional,
// sliding windows, GQA/MQA, decode at an offset, explicit (unsorted)
// positions, both layouts, odd sizes (1, 7, 217, 1031), odd tile sizes,
// RoPE keys rotated in the kernel or pre-rotated by the caller, bfloat16
// inputs, threads. Tolerance (FlashAttention's test rule): the flash error
// against the float64 oracle must be at most 2x the error of a plain float32
// attention written here (same inputs, same float32 position terms) plus
// twice the float32 rounding of the oracle's values. Bad inputs: one test
// each.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <hwy/highway.h>
#include <hwy/targets.h>

#include "flash_forward_fixture.h"
#include "flash_test_util.h"
#include "kernels/simd/targets.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"
#include "simd_target_fixture.h"
#include "test_util.h"

namespace posenc::flash_test {
namespace {

TEST(FlashAttention, NoneCausalMatchesReference) {
  CheckCase(Forward("none causal", Kind::kNone, kCausal));
}

TEST(FlashAttention, NoneBidirectionalFewQueriesBhsdD80) {
  Case c = Forward("none bidir", Kind::kNone, kBidir);
  c.Sq = 7;
  c.D = c.Dv = 80;
  c.layout = AttentionLayout::kBHSD;
  CheckCase(c);
}

TEST(FlashAttention, AbsoluteValueDimDiffers) {
  Case c = Forward("absolute dv 48", Kind::kAbsolute, kCausal);
  c.Dv = 48;
  c.Sq = c.Sk = 7;
  c.query_tile = 3;
  c.key_tile = 2;
  CheckCase(c);
}

TEST(FlashAttention, SingleQuerySingleKey) {
  Case c = Forward("1x1", Kind::kAlibi, kCausal);
  c.Sq = c.Sk = 1;
  CheckCase(c);
}

TEST(FlashAttention, AlibiCausalGqaOddTiles) {
  Case c = Forward("alibi gqa", Kind::kAlibi, kCausal);
  c.H = 4;
  c.Hkv = 2;
  c.query_tile = 32;
  c.key_tile = 48;
  CheckCase(c);
}

TEST(FlashAttention, AlibiCausalSlidingWindowSkipsTiles) {
  Case c = Forward("alibi window", Kind::kAlibi, kCausal);
  c.window = 50;  // 50 - 1 = 16 * 4 - 15: a hidden-looking tile pair holds one visible pair
  c.query_tile = c.key_tile = 16;
  CheckCase(c);
  c.window = 31;  // 31 = 16 + 15: a visible-looking tile pair holds one hidden pair
  CheckCase(c);
}

TEST(FlashAttention, AlibiBidirectionalWindowBhsd) {
  Case c = Forward("alibi bidir window", Kind::kAlibi, kBidir);
  c.window = 31;  // adjacent 16-row tiles span exactly 31 positions: one hidden pair
  c.layout = AttentionLayout::kBHSD;
  c.B = 2;
  c.query_tile = c.key_tile = 16;
  CheckCase(c);
}

TEST(FlashAttention, T5Bidirectional) { CheckCase(Forward("t5 bidir", Kind::kT5, kBidir)); }

TEST(FlashAttention, T5CausalDecodeMqaD128) {
  Case c = Forward("t5 decode", Kind::kT5, kCausal);
  c.Sq = 7;
  c.Sk = 1031;
  c.Hkv = 1;
  c.D = c.Dv = 128;
  CheckCase(c);
}

TEST(FlashAttention, ShawCausal) { CheckCase(Forward("shaw causal", Kind::kShaw, kCausal)); }

TEST(FlashAttention, ShawBidirectionalOneQueryBhsdD80) {
  Case c = Forward("shaw bidir", Kind::kShaw, kBidir);
  c.Sq = 1;
  c.D = c.Dv = 80;
  c.layout = AttentionLayout::kBHSD;
  CheckCase(c);
}

TEST(FlashAttention, RopeRotatedInKernelD128) {
  Case c = Forward("rope rotate", Kind::kRope, kCausal);
  c.D = c.Dv = 128;
  c.H = 1;
  c.Hkv = 1;
  CheckCase(c);
}

TEST(FlashAttention, RopePreRotatedKeyCacheDecode) {
  Case c = Forward("rope pre-rotated", Kind::kRope, kCausal);
  c.Sq = 7;
  c.Sk = 1031;
  c.H = 4;
  c.Hkv = 1;
  c.rope_keys = FlashRopeKeys::kPreRotated;
  CheckCase(c);
}

TEST(FlashAttention, ExplicitUnsortedPositionsWithEmptyRows) {
  // More queries than keys, shuffled positions: some queries see no key
  // (their output must be zeros) and tile skipping must use min/max.
  const Case c = WithExplicitPositions(Forward("explicit positions", Kind::kAlibi, kCausal), 31);
  Fixture f(c);
  const std::vector<double> flash = CheckCase(c);
  bool any_empty = false;
  for (std::int64_t b = 0; b < c.B; ++b)
    for (std::int64_t i = 0; i < c.Sq; ++i) {
      const std::int64_t p = f.qids[static_cast<std::size_t>(b * c.Sq + i)];
      bool sees = false;
      for (std::int64_t j = 0; j < c.Sk; ++j) {
        sees = sees || f.Visible(p, f.kids[static_cast<std::size_t>(b * c.Sk + j)]);
      }
      if (sees) continue;
      any_empty = true;
      for (std::int64_t h = 0; h < c.H; ++h)
        for (std::int64_t x = 0; x < c.Dv; ++x)
          EXPECT_EQ(flash[static_cast<std::size_t>(((b * c.H + h) * c.Sq + i) * c.Dv + x)], 0.0);
    }
  EXPECT_TRUE(any_empty) << "the case must contain a query that sees no key";
}

TEST(FlashAttention, BFloat16Inputs) {
  Case c = Forward("bf16", Kind::kT5, kCausal);
  c.dtype = DType::kBFloat16;
  c.H = c.Hkv = 1;
  CheckCase(c);
}

TEST(FlashAttention, ThreadsGiveTheSameBits) {
  Case c = Forward("threads", Kind::kShaw, kCausal);
  c.B = 2;
  c.Sq = 100;
  c.query_tile = 16;
  const std::vector<double> one = CheckCase(c);
  c.threads = 3;
  const std::vector<double> three = CheckCase(c);
  EXPECT_EQ(one, three);
}

TEST(FlashAttention, UnitTasksGiveThePhasedBits) {
  // 8 units (B 4 x Hkv 2): one thread runs one task per unit
  // (kUnitsPerThread in flash_forward_engine.cc), two threads the two
  // phases; the last key tile is short (217 = 3 x 64 + 25).
  for (Kind kind : {Kind::kNone, Kind::kRope, Kind::kAlibi, Kind::kT5, Kind::kShaw}) {
    Case c = Forward(std::string("units ") + std::string(KindName(kind)), kind, kCausal);
    c.B = 4;
    c.H = 4;
    const std::vector<double> one = CheckCase(c);
    c.threads = 2;
    EXPECT_EQ(one, CheckCase(c)) << c.name;
  }
}

TEST(FlashAttention, TileSizesOnlyReorderFloat32Sums) {
  Case c = Forward("tiles", Kind::kAlibi, kBidir);
  c.Sq = 217;  // bottom-right: queries at 814..1030
  c.Sk = 1031;
  c.H = c.Hkv = 1;
  c.window = 50;  // most tiles skipped: keeps the float64 reference cheap
  c.query_tile = 128;
  c.key_tile = 17;
  CheckCase(c);
}

TEST(FlashAttention, ScalarBackendMatchesReference) {
  for (Kind kind : {Kind::kNone, Kind::kAlibi, Kind::kT5, Kind::kShaw, Kind::kRope}) {
    Case c = Forward(std::string("scalar ") + std::string(KindName(kind)), kind, kCausal);
    c.backend = Backend::kScalar;
    c.Sq = 7;
    c.Sk = 217;
    c.D = c.Dv = 80;
    CheckCase(c);
  }
}

// Runs once per compiled Highway target (tests/unit/simd_target_fixture.h).
class FlashSimdTarget : public test::PerSimdTarget {};

TEST_P(FlashSimdTarget, MatchesReferenceAndScalarBackend) {
  for (Kind kind : {Kind::kAlibi, Kind::kShaw}) {
    Case c = Forward(std::string("simd ") + std::string(KindName(kind)), kind, kBidir);
    c.backend = Backend::kSimd;
    c.Sq = 33;
    c.Sk = 217;
    c.Dv = c.D = 80;  // 80 = 5 * 16: the single-vector loops run on AVX3
    c.key_tile = 37;  // a short, padded last tile
    const std::vector<double> simd = CheckCase(c);
    c.backend = Backend::kScalar;
    const std::vector<double> scalar = CheckCase(c);
    // Same formulas, sums reordered: float32 rounding only.
    EXPECT_LT(MaxErr(simd, scalar), 2e-6);
  }
}

POSENC_INSTANTIATE_PER_SIMD_TARGET(FlashSimdTarget);

// ---- KV-cache re-rotation ----

struct ShiftCase {
  DType dtype;
  RopePairing pairing;
  std::int64_t rotary_dim;
  std::int64_t from, delta;
  double tol;  // vs rotating from scratch, relative to max |k| (~4)
};

void CheckShift(const ShiftCase& sc) {
  const std::int64_t B = 2, S = 37, H = 3, D = 64;
  RopeParams r;
  r.head_dim = D;
  r.rotary_dim = sc.rotary_dim;
  r.pairing = sc.pairing;
  const std::vector<float> raw = RandomFloats(static_cast<std::size_t>(B * S * H * D), 21);
  auto make = [&](std::vector<double>& store) {
    store.assign(raw.begin(), raw.end());
    return TensorView::Contiguous(store.data(), DType::kFloat64, {B, S, H, D});
  };
  std::vector<double> cache_d, scratch_d;
  make(cache_d);
  const TensorView scratch64 = make(scratch_d);
  // The cache in its storage dtype, rotated at from + s.
  std::vector<double> cache_store(cache_d.size() * 2);  // room for any dtype
  const TensorView cache = TensorView::Contiguous(cache_store.data(), sc.dtype, {B, S, H, D});
  for (std::int64_t i = 0; i < cache.NumElements(); ++i)
    StoreFromDouble(cache.data, sc.dtype, i, cache_d[static_cast<std::size_t>(i)]);
  ApplyRope(r, cache, AttentionLayout::kBSHD, Positions::Offset(sc.from));
  ShiftRopeKeys(r, cache, AttentionLayout::kBSHD, sc.delta);
  ApplyRope(r, scratch64, AttentionLayout::kBSHD, Positions::Offset(sc.from + sc.delta));
  double err = 0.0;
  for (std::int64_t i = 0; i < cache.NumElements(); ++i) {
    err = std::max(err, std::abs(LoadAsDouble(cache.data, sc.dtype, i) -
                                 scratch_d[static_cast<std::size_t>(i)]));
  }
  EXPECT_LT(err, sc.tol) << DTypeName(sc.dtype) << " from " << sc.from << " delta " << sc.delta;
}

TEST(ShiftRopeKeys, EqualsRotatingFromScratch) {
  // float64: rounding only; float32: a few ulp of |k| <= ~5; bf16: the
  // storage rounding of three stores (2^-8 relative each).
  CheckShift({DType::kFloat64, RopePairing::kHalfSplit, 0, 100, -60, 1e-12});
  CheckShift({DType::kFloat64, RopePairing::kInterleaved, 32, 5, 1000, 1e-12});
  CheckShift({DType::kFloat32, RopePairing::kHalfSplit, 0, 4096, -4000, 5e-6});
  CheckShift({DType::kFloat32, RopePairing::kInterleaved, 48, 0, 123456, 5e-6});
  CheckShift({DType::kBFloat16, RopePairing::kHalfSplit, 0, 300, -299, 0.1});
}

TEST(ShiftRopeKeys, ZeroDeltaLeavesKeysUntouched) {
  RopeParams r;
  r.head_dim = 8;
  std::vector<float> k = RandomFloats(2 * 3 * 1 * 8, 4);
  const std::vector<float> before = k;
  ShiftRopeKeys(r, TensorView::Contiguous(k.data(), DType::kFloat32, {1, 2, 3, 8}),
                AttentionLayout::kBHSD, 0);
  EXPECT_EQ(k, before);
}

TEST(ShiftRopeKeys, ShiftedCacheFeedsFlashAttention) {
  // A cache rotated at 50 + j, shifted by -50, is the cache of keys at j:
  // pre-rotated flash attention equals the reference with RoPE at j.
  const std::int64_t Sk = 45, Sq = 5, H = 2, D = 64;
  RopeParams r;
  r.head_dim = D;
  std::vector<float> q = RandomFloats(static_cast<std::size_t>(Sq * H * D), 1),
                     k = RandomFloats(static_cast<std::size_t>(Sk * H * D), 2),
                     v = RandomFloats(static_cast<std::size_t>(Sk * H * D), 3);
  AttentionParams params;
  params.scheme = RopeScheme(r);
  std::vector<double> ref(static_cast<std::size_t>(Sq * H * D));
  AttentionReference(params, TensorView::Contiguous(q.data(), DType::kFloat32, {1, Sq, H, D}),
                     TensorView::Contiguous(k.data(), DType::kFloat32, {1, Sk, H, D}),
                     TensorView::Contiguous(v.data(), DType::kFloat32, {1, Sk, H, D}),
                     TensorView::Contiguous(ref.data(), DType::kFloat64, {1, Sq, H, D}));
  const TensorView kv = TensorView::Contiguous(k.data(), DType::kFloat32, {1, Sk, H, D});
  ApplyRope(r, kv, AttentionLayout::kBSHD, Positions::Offset(50));
  ShiftRopeKeys(r, kv, AttentionLayout::kBSHD, -50);
  std::vector<float> out(ref.size());
  FlashAttentionOptions opt;
  opt.rope_keys = FlashRopeKeys::kPreRotated;
  FlashAttention(params, TensorView::Contiguous(q.data(), DType::kFloat32, {1, Sq, H, D}), kv,
                 TensorView::Contiguous(v.data(), DType::kFloat32, {1, Sk, H, D}),
                 TensorView::Contiguous(out.data(), DType::kFloat32, {1, Sq, H, D}), opt);
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], ref[i], 2e-5) << i;
}

// ---- bad input: one test per case ----

struct BadFixture {
  std::vector<float> q = std::vector<float>(1 * 4 * 2 * 8, 0.5f), k = q, v = q, out = q;
  TensorView Q() { return TensorView::Contiguous(q.data(), DType::kFloat32, {1, 4, 2, 8}); }
  TensorView K() { return TensorView::Contiguous(k.data(), DType::kFloat32, {1, 4, 2, 8}); }
  TensorView V() { return TensorView::Contiguous(v.data(), DType::kFloat32, {1, 4, 2, 8}); }
  TensorView Out() { return TensorView::Contiguous(out.data(), DType::kFloat32, {1, 4, 2, 8}); }
};

TEST(FlashAttentionBadInput, QueryTileZero) {
  BadFixture f;
  FlashAttentionOptions o;
  o.query_tile = 0;
  ExpectInvalid([&] { FlashAttention({}, f.Q(), f.K(), f.V(), f.Out(), o); }, "query_tile");
}

TEST(FlashAttentionBadInput, KeyTileTooLarge) {
  BadFixture f;
  FlashAttentionOptions o;
  o.key_tile = 5000;
  ExpectInvalid([&] { FlashAttention({}, f.Q(), f.K(), f.V(), f.Out(), o); }, "key_tile");
}

TEST(FlashAttentionBadInput, UnsupportedScheme) {
  BadFixture f;
  AttentionParams p;
  p.scheme = PositionScheme::Registered("transformer_xl");
  ExpectInvalid([&] { FlashAttention(p, f.Q(), f.K(), f.V(), f.Out()); }, "scheme.name");
}

TEST(FlashAttentionBadInput, OutputShape) {
  BadFixture f;
  const TensorView out = TensorView::Contiguous(f.out.data(), DType::kFloat32, {1, 4, 2, 4});
  ExpectInvalid([&] { FlashAttention({}, f.Q(), f.K(), f.V(), out); }, "out");
}

TEST(FlashAttentionBadInput, OutputOverlapsQuery) {
  BadFixture f;
  ExpectInvalid([&] { FlashAttention({}, f.Q(), f.K(), f.V(), f.Q()); }, "out");
}

TEST(FlashAttentionBadInput, KvHeadsNotADivisor) {
  BadFixture f;
  const TensorView q = TensorView::Contiguous(f.q.data(), DType::kFloat32, {1, 2, 3, 8});
  const TensorView out = TensorView::Contiguous(f.out.data(), DType::kFloat32, {1, 2, 3, 8});
  ExpectInvalid([&] { FlashAttention({}, q, f.K(), f.V(), out); }, "k heads");
}

TEST(FlashAttentionBadInput, WindowZero) {
  BadFixture f;
  AttentionParams p;
  p.sliding_window = 0;
  ExpectInvalid([&] { FlashAttention(p, f.Q(), f.K(), f.V(), f.Out()); }, "sliding_window");
}

TEST(FlashAttentionBadInput, AlibiSlopeCount) {
  BadFixture f;
  AttentionParams p;
  p.scheme = AlibiScheme({0.5});
  ExpectInvalid([&] { FlashAttention(p, f.Q(), f.K(), f.V(), f.Out()); }, "scheme.alibi.slopes");
}

TEST(FlashAttentionBadInput, RopeKeysName) {
  ExpectInvalid([] { ParseFlashRopeKeys("sideways"); }, "rope_keys");
  EXPECT_EQ(ParseFlashRopeKeys(FlashRopeKeysName(FlashRopeKeys::kPreRotated)),
            FlashRopeKeys::kPreRotated);
}

TEST(ShiftRopeKeysBadInput, DeltaTooLarge) {
  RopeParams r;
  r.head_dim = 8;
  BadFixture f;
  ExpectInvalid([&] { ShiftRopeKeys(r, f.K(), AttentionLayout::kBSHD, std::int64_t{1} << 24); },
                "delta");
}

TEST(ShiftRopeKeysBadInput, AttentionFactorNotOne) {
  RopeParams r;
  r.head_dim = 8;
  r.frequencies.inv_freq = {1.0, 0.1, 0.01, 0.001};
  r.frequencies.attention_factor = 1.5;
  BadFixture f;
  ExpectInvalid([&] { ShiftRopeKeys(r, f.K(), AttentionLayout::kBSHD, 3); },
                "params.frequencies.attention_factor");
}

TEST(ShiftRopeKeysBadInput, HeadDimMismatch) {
  RopeParams r;
  r.head_dim = 16;
  BadFixture f;
  ExpectInvalid([&] { ShiftRopeKeys(r, f.K(), AttentionLayout::kBSHD, 3); }, "k head_dim");
}

}  // namespace
}  // namespace posenc::flash_test
