// The SIMD RoPE kernels (src/kernels/simd/rope.*) against the scalar
// reference, on every Highway target compiled in and supported by this CPU
// (each test is instantiated once per target; the target is forced with
// hwy::SetSupportedTargetsForTest and checked through DispatchedTargetName).
// Coverage: head_dim 64/80/96/128/256, seq 1/7/217 (and sampled 4099),
// positions up to 2^24 - 1 (offsets, shared and per-row ids), both pairings,
// both layouts, partial rotary (incl. head_dim 10 / rotary_dim 8 with explicit
// frequencies and attention_factor 1.25), float32/bfloat16/float16, in place and out of
// place, forward and inverse, q and k in one pass, threads.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include "kernels/simd/targets.h"
#include "posenc/context.h"
#include "posenc/rope.h"
#include "simd_rope_test_util.h"
#include "simd_target_fixture.h"
#include "test_util.h"

namespace posenc {
namespace {

// Runs once per compiled Highway target (tests/unit/simd_target_fixture.h).
class SimdRope : public test::PerSimdTarget {};

using test::Buffer;
using test::ExpectClose;

double Tol(DType dtype, double factor = 1.0) { return test::RopeTol(dtype, factor); }

struct Case {
  std::int64_t head_dim, rotary_dim, batch, seq, heads;
  RopePairing pairing;
  DType dtype;
  AttentionLayout layout;
};

enum class PosKind { kOffset, kSharedIds, kRowIds };

std::string Describe(const Case& c, PosKind pk, RopeDirection dir) {
  return "hd=" + std::to_string(c.head_dim) + " rd=" + std::to_string(c.rotary_dim) +
         " b=" + std::to_string(c.batch) + " s=" + std::to_string(c.seq) +
         " h=" + std::to_string(c.heads) + " " + std::string(RopePairingName(c.pairing)) + " " +
         std::string(DTypeName(c.dtype)) + " " + std::string(LayoutName(c.layout)) +
         " pos=" + std::to_string(static_cast<int>(pk)) + " " + std::string(RopeDirectionName(dir));
}

// Runs one case through the scalar reference and the fast path (in place and
// out of place) and compares.
void CheckApply(const Case& c, PosKind pk, RopeDirection dir, std::uint32_t seed) {
  RopeParams params;
  params.head_dim = c.head_dim;
  params.rotary_dim = c.rotary_dim;
  params.pairing = c.pairing;
  const std::int64_t n = c.batch * c.seq * c.heads * c.head_dim;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> any_pos(0, kMaxPosition);
  std::vector<std::int64_t> ids;
  Positions positions = Positions::Offset(kMaxPosition + 1 - c.seq);  // the largest offset
  if (pk != PosKind::kOffset) {
    ids.resize(static_cast<std::size_t>(pk == PosKind::kRowIds ? c.batch * c.seq : c.seq));
    for (auto& p : ids) p = any_pos(rng);
    ids[0] = kMaxPosition;
    positions = Positions::Ids(ids.data(), static_cast<std::int64_t>(ids.size()));
  }
  const std::string what = Describe(c, pk, dir);
  Buffer ref(c.dtype, n, seed), fast(c.dtype, n, seed), src(c.dtype, n, seed),
      dst(c.dtype, n, seed + 1);
  const Context scalar(1, Backend::kScalar), simd(1, Backend::kSimd);
  ApplyRope(params, ref.View(c.layout, c.batch, c.seq, c.heads, c.head_dim), c.layout, positions,
            dir, nullptr, scalar);
  ApplyRope(params, fast.View(c.layout, c.batch, c.seq, c.heads, c.head_dim), c.layout, positions,
            dir, nullptr, simd);
  ExpectClose(fast.Values(), ref.Values(), Tol(c.dtype), what + " in place");
  // Out of place: same values, input untouched.
  const TensorView out = dst.View(c.layout, c.batch, c.seq, c.heads, c.head_dim);
  ApplyRope(params, src.View(c.layout, c.batch, c.seq, c.heads, c.head_dim), c.layout, positions,
            dir, &out, simd);
  ASSERT_EQ(dst.bytes, fast.bytes) << what << " out of place differs from in place";
  ASSERT_EQ(src.bytes, Buffer(c.dtype, n, seed).bytes) << what << " input modified";
}

TEST_P(SimdRope, MatchesScalarAcrossHeadDims) {
  std::uint32_t seed = 1;
  for (const std::int64_t hd : {64, 80, 96, 128, 256}) {
    for (const RopePairing pairing : {RopePairing::kHalfSplit, RopePairing::kInterleaved}) {
      for (const DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
        // A sample, not the cross product (fast under ASan): seq, layout,
        // position kind and direction rotate with the seed.
        const std::int64_t seq = std::vector<std::int64_t>{1, 7, 217}[seed % 3];
        const AttentionLayout layout = seed % 2 ? AttentionLayout::kBSHD : AttentionLayout::kBHSD;
        const PosKind pk = static_cast<PosKind>(seed / 3 % 3);
        const RopeDirection dir = seed % 5 == 0 ? RopeDirection::kInverse : RopeDirection::kForward;
        CheckApply({hd, 0, 2, seq, 2, pairing, dtype, layout}, pk, dir, seed++);
      }
    }
  }
}

TEST_P(SimdRope, PartialRotaryAndOddTails) {
  // rotary_dim/2 of 1, 3, 12, 20, 36 exercise every vector-width tail.
  std::uint32_t seed = 100;
  for (const auto& [hd, rd] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {64, 2}, {64, 6}, {96, 24}, {80, 40}, {128, 72}}) {
    for (const RopePairing pairing : {RopePairing::kHalfSplit, RopePairing::kInterleaved}) {
      for (const DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
        for (const AttentionLayout layout : {AttentionLayout::kBSHD, AttentionLayout::kBHSD}) {
          CheckApply({hd, rd, 1, 7, 3, pairing, dtype, layout}, PosKind::kSharedIds,
                     RopeDirection::kForward, seed++);
        }
      }
    }
  }
}

TEST_P(SimdRope, PartialRotaryWithFrequenciesAndAttentionFactor) {
  // Reported case: head_dim 10, rotary_dim 8, explicit frequencies with
  // attention_factor 1.25; the 2 pass-through dims must be untouched.
  RopeParams params;
  params.head_dim = 10;
  params.rotary_dim = 8;
  params.frequencies = RopeDefaultFrequencies(8, 10000.0, RopeNumerics::kAccurate);
  params.frequencies.attention_factor = 1.25;
  for (const AttentionLayout layout : {AttentionLayout::kBSHD, AttentionLayout::kBHSD}) {
    for (const RopePairing pairing : {RopePairing::kHalfSplit, RopePairing::kInterleaved}) {
      params.pairing = pairing;
      Buffer x(DType::kFloat32, 2 * 6 * 3 * 10, 21), y = x;
      const std::vector<double> orig = x.Values();
      ApplyRope(params, x.View(layout, 2, 6, 3, 10), layout, Positions::Offset(40),
                RopeDirection::kForward, nullptr, Context(1, Backend::kScalar));
      ApplyRope(params, y.View(layout, 2, 6, 3, 10), layout, Positions::Offset(40),
                RopeDirection::kForward, nullptr, Context(1, Backend::kSimd));
      const std::string what =
          std::string(LayoutName(layout)) + " " + std::string(RopePairingName(pairing));
      ExpectClose(y.Values(), x.Values(), Tol(DType::kFloat32, 1.25), what);
      const std::vector<double> got = y.Values();
      for (std::size_t i = 0; i < got.size(); ++i) {
        if (i % 10 >= 8) {
          ASSERT_EQ(got[i], orig[i]) << what << " pass-through dim " << i;
        }
      }
    }
  }
}

TEST_P(SimdRope, HFNumericsBitIdenticalToScalar) {
  // The hf fast path rounds like the scalar hf reference (float32 angle,
  // cos/sin rounded to float32 then to the dtype, every product and sum
  // rounded): the results must be the same bytes. A sample of shapes,
  // pairings, dtypes, layouts, positions (up to 2^24 - 1) and directions.
  std::uint32_t seed = 300;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> any_pos(0, kMaxPosition);
  for (const auto& [hd, rd] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{64, 0}, {80, 40}, {128, 0}, {10, 8}}) {
    for (const RopePairing pairing : {RopePairing::kHalfSplit, RopePairing::kInterleaved}) {
      for (const DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
        RopeParams params;
        params.head_dim = hd;
        params.rotary_dim = rd;
        params.pairing = pairing;
        params.numerics = RopeNumerics::kHF;
        if (seed % 2 == 0) params.frequencies.attention_factor = 1.25;
        if (seed % 3 == 0) params.theta = 500000.0;
        const AttentionLayout layout = seed % 2 ? AttentionLayout::kBSHD : AttentionLayout::kBHSD;
        const RopeDirection dir = seed % 4 == 1 ? RopeDirection::kInverse : RopeDirection::kForward;
        const std::int64_t b = 2, sq = 37, h = 2, n = b * sq * h * hd;
        std::vector<std::int64_t> ids(static_cast<std::size_t>(b * sq));
        for (auto& p : ids) p = any_pos(rng);
        const Positions pos = seed % 3 == 1 ? Positions::Ids(ids.data(), b * sq)
                                            : Positions::Offset(kMaxPosition + 1 - sq);
        Buffer ref(dtype, n, seed), fast(dtype, n, seed);
        ApplyRope(params, ref.View(layout, b, sq, h, hd), layout, pos, dir, nullptr,
                  Context(1, Backend::kScalar));
        ApplyRope(params, fast.View(layout, b, sq, h, hd), layout, pos, dir, nullptr,
                  Context(2, Backend::kSimd));
        ASSERT_EQ(fast.bytes, ref.bytes)
            << "hd=" << hd << " rd=" << rd << " " << RopePairingName(pairing) << " "
            << DTypeName(dtype) << " " << LayoutName(layout) << " seed " << seed;
        ++seed;
      }
    }
  }
}

TEST_P(SimdRope, LongSequenceSampled) {
  // seq 4099 (not a multiple of any tile), a sample of configurations.
  CheckApply({128, 0, 1, 4099, 1, RopePairing::kHalfSplit, DType::kFloat32, AttentionLayout::kBHSD},
             PosKind::kOffset, RopeDirection::kForward, 7);
  CheckApply(
      {64, 0, 1, 4099, 1, RopePairing::kInterleaved, DType::kBFloat16, AttentionLayout::kBSHD},
      PosKind::kSharedIds, RopeDirection::kInverse, 8);
  CheckApply({80, 64, 1, 4099, 1, RopePairing::kHalfSplit, DType::kFloat16, AttentionLayout::kBSHD},
             PosKind::kOffset, RopeDirection::kForward, 9);
}

TEST_P(SimdRope, QKOnePassMatchesSeparateCalls) {
  // GQA-style: 4 q heads, 2 k heads; k in bfloat16, q in float32; out of place.
  RopeParams params;
  params.head_dim = 96;
  params.frequencies.attention_factor = 1.25;
  const std::int64_t b = 2, s = 33;
  const AttentionLayout layout = AttentionLayout::kBHSD;
  Buffer q(DType::kFloat32, b * 4 * s * 96, 1), k(DType::kBFloat16, b * 2 * s * 96, 2);
  Buffer q_ref = q, k_ref = k, q_out(DType::kFloat32, q.size(), 3),
         k_out(DType::kBFloat16, k.size(), 4);
  const Positions pos = Positions::Offset(12345);
  const Context scalar(1, Backend::kScalar), simd(3, Backend::kSimd);
  ApplyRope(params, q_ref.View(layout, b, s, 4, 96), layout, pos, RopeDirection::kForward, nullptr,
            scalar);
  ApplyRope(params, k_ref.View(layout, b, s, 2, 96), layout, pos, RopeDirection::kForward, nullptr,
            scalar);
  const TensorView qo = q_out.View(layout, b, s, 4, 96), ko = k_out.View(layout, b, s, 2, 96);
  ApplyRopeQK(params, q.View(layout, b, s, 4, 96), k.View(layout, b, s, 2, 96), layout, pos,
              RopeDirection::kForward, &qo, &ko, simd);
  ExpectClose(q_out.Values(), q_ref.Values(), Tol(DType::kFloat32, 1.25), "q");
  ExpectClose(k_out.Values(), k_ref.Values(), Tol(DType::kBFloat16, 1.25), "k");
  // In place, one dtype, q and k in one pass.
  Buffer q2(DType::kFloat32, q.size(), 1), k2(DType::kFloat32, b * 2 * s * 96, 2);
  Buffer k2_ref = k2;
  ApplyRope(params, k2_ref.View(layout, b, s, 2, 96), layout, pos, RopeDirection::kForward, nullptr,
            scalar);
  ApplyRopeQK(params, q2.View(layout, b, s, 4, 96), k2.View(layout, b, s, 2, 96), layout, pos,
              RopeDirection::kForward, simd);
  ExpectClose(q2.Values(), q_ref.Values(), Tol(DType::kFloat32, 1.25), "q2 in place");
  ExpectClose(k2.Values(), k2_ref.Values(), Tol(DType::kFloat32, 1.25), "k2 in place");
}

TEST_P(SimdRope, InverseUndoesForwardAndThreadsAgree) {
  RopeParams params;
  params.head_dim = 128;
  params.pairing = RopePairing::kInterleaved;
  const AttentionLayout layout = AttentionLayout::kBSHD;
  Buffer x(DType::kFloat32, 3 * 50 * 4 * 128, 5);
  const std::vector<double> orig = x.Values();
  Buffer y = x;
  const Positions pos = Positions::Offset(kMaxPosition - 49);
  ApplyRope(params, x.View(layout, 3, 50, 4, 128), layout, pos, RopeDirection::kForward, nullptr,
            Context(1, Backend::kSimd));
  ApplyRope(params, y.View(layout, 3, 50, 4, 128), layout, pos, RopeDirection::kForward, nullptr,
            Context(4, Backend::kSimd));
  ASSERT_EQ(x.bytes, y.bytes) << "results depend on the thread count";
  ApplyRope(params, x.View(layout, 3, 50, 4, 128), layout, pos, RopeDirection::kInverse, nullptr,
            Context(2, Backend::kSimd));
  ExpectClose(x.Values(), orig, 4 * Tol(DType::kFloat32), "inverse(forward(x))");
}

TEST_P(SimdRope, UncoveredCallsFallBackToScalar) {
  // Non-unit head_dim stride, float64 data and a frequency > kMaxFastInvFreq
  // take the scalar kernel under Backend::kSimd: results are bit-identical.
  RopeParams params;
  params.head_dim = 8;
  std::vector<float> a(2 * 3 * 2 * 8 * 2), b;
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(static_cast<float>(i));
  b = a;
  const TensorView va =
      TensorView::Strided(a.data(), DType::kFloat32, {2, 3, 2, 8}, {96, 32, 16, 2});
  const TensorView vb =
      TensorView::Strided(b.data(), DType::kFloat32, {2, 3, 2, 8}, {96, 32, 16, 2});
  ApplyRope(params, va, AttentionLayout::kBSHD, Positions::Offset(9), RopeDirection::kForward,
            nullptr, Context(1, Backend::kScalar));
  ApplyRope(params, vb, AttentionLayout::kBSHD, Positions::Offset(9), RopeDirection::kForward,
            nullptr, Context(1, Backend::kSimd));
  EXPECT_EQ(a, b);
  params.frequencies.inv_freq = {5.0, 1.0, 0.1, 0.01};
  Buffer x(DType::kFloat32, 1 * 5 * 1 * 8, 3), y = x;
  ApplyRope(params, x.View(AttentionLayout::kBSHD, 1, 5, 1, 8), AttentionLayout::kBSHD,
            Positions::Offset(kMaxPosition - 4), RopeDirection::kForward, nullptr,
            Context(1, Backend::kScalar));
  ApplyRope(params, y.View(AttentionLayout::kBSHD, 1, 5, 1, 8), AttentionLayout::kBSHD,
            Positions::Offset(kMaxPosition - 4), RopeDirection::kForward, nullptr,
            Context(1, Backend::kSimd));
  EXPECT_EQ(x.bytes, y.bytes);
}

TEST_P(SimdRope, NegativePositionsInverse) {
  RopeParams params;
  params.head_dim = 64;
  std::vector<std::int64_t> ids = {-kMaxPosition, -1, 0, 77, -4096};
  const Positions pos = Positions::Ids(ids.data(), 5);
  Buffer x(DType::kFloat16, 1 * 2 * 5 * 64, 9), y = x;
  ApplyRope(params, x.View(AttentionLayout::kBHSD, 1, 5, 2, 64), AttentionLayout::kBHSD, pos,
            RopeDirection::kInverse, nullptr, Context(1, Backend::kScalar));
  ApplyRope(params, y.View(AttentionLayout::kBHSD, 1, 5, 2, 64), AttentionLayout::kBHSD, pos,
            RopeDirection::kInverse, nullptr, Context(1, Backend::kSimd));
  ExpectClose(y.Values(), x.Values(), Tol(DType::kFloat16), "negative positions");
}

POSENC_INSTANTIATE_PER_SIMD_TARGET(SimdRope);

}  // namespace
}  // namespace posenc
