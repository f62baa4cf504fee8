// Learned absolute tables: portable N(0, 0.02^2) initialisation, lookup and
// add, scatter-add backward, SGD, .npy round trips, resizing against torch
// F.interpolate fixtures (tests/golden/npy/), and bad input.
#include "posenc/learned.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/npy.h"
#include "test_util.h"

namespace posenc::test {
namespace {

LearnedTable Random(std::int64_t n, std::int64_t d, std::uint64_t seed = 1) {
  LearnedInitParams p;
  p.max_positions = n;
  p.dim = d;
  p.seed = seed;
  return LearnedTable::RandomNormal(p);
}

template <typename Fn>
void ExpectInvalid(Fn fn, std::initializer_list<const char*> fragments) {
  try {
    fn();
    ADD_FAILURE() << "no InvalidArgument";
  } catch (const InvalidArgument& e) {
    for (const char* f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
  }
}

// --- initialisation ------------------------------------------------------------

TEST(LearnedInit, FollowsTheDocumentedBoxMullerRecipe) {
  // Independent re-statement of learned.h: mt19937_64(seed); u = (x >> 11) * 2^-53;
  // z0 = sqrt(-2 ln(1 - u1)) cos(2 pi u2), z1 = ... sin(2 pi u2); value = 0.02 z.
  std::mt19937_64 rng(42);
  std::vector<float> want;
  for (int k = 0; k < 3; ++k) {
    const double u1 = 1.0 - std::ldexp(static_cast<double>(rng() >> 11), -53);
    const double u2 = std::ldexp(static_cast<double>(rng() >> 11), -53);
    const double r = std::sqrt(-2.0 * std::log(u1));
    want.push_back(static_cast<float>(0.02 * r * std::cos(2 * std::numbers::pi * u2)));
    want.push_back(static_cast<float>(0.02 * r * std::sin(2 * std::numbers::pi * u2)));
  }
  const LearnedTable t = Random(2, 3, 42);
  EXPECT_EQ(t.values(), want);
}

TEST(LearnedInit, StandardMersenneTwisterStream) {
  // The C++ standard fixes mt19937_64's 10000th output for the default seed;
  // this is what makes the initialisation portable across standard libraries.
  std::mt19937_64 rng;
  rng.discard(9999);
  EXPECT_EQ(rng(), 9981545732273789042ull);
}

TEST(LearnedInit, DeterministicPerSeedAndPrefixStable) {
  const LearnedTable a = Random(8, 16, 7), b = Random(8, 16, 7), c = Random(8, 16, 8);
  EXPECT_EQ(a.values(), b.values());
  EXPECT_NE(a.values(), c.values());
  const LearnedTable longer = Random(20, 16, 7);
  EXPECT_TRUE(std::equal(a.values().begin(), a.values().end(), longer.values().begin()));
}

TEST(LearnedInit, StatisticsOfABertSizedTable) {
  const LearnedTable t = Random(512, 768, 3);
  const auto& v = t.values();
  double sum = 0, sq = 0;
  std::size_t within1 = 0, within2 = 0;
  for (float x : v) {
    sum += x;
    sq += static_cast<double>(x) * x;
    within1 += std::fabs(x) <= 0.02f;
    within2 += std::fabs(x) <= 0.04f;
  }
  const double n = static_cast<double>(v.size());
  const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_LE(std::fabs(mean), 5 * 0.02 / std::sqrt(n));
  EXPECT_NEAR(sd, 0.02, 0.02 * 0.01);
  EXPECT_NEAR(within1 / n, 0.682689, 0.005);
  EXPECT_NEAR(within2 / n, 0.954500, 0.005);
}

TEST(LearnedInit, StddevScales) {
  LearnedInitParams p{4, 4, 0.5, 9};
  const LearnedTable big = LearnedTable::RandomNormal(p);
  const LearnedTable small = Random(4, 4, 9);
  for (std::size_t i = 0; i < 16; ++i)
    EXPECT_NEAR(big.values()[i], small.values()[i] * 25.0f, 1e-6f);
}

// --- forward -------------------------------------------------------------------

TEST(LearnedLookup, GathersRowsByIdsAndOffset) {
  const LearnedTable t = Random(10, 5);
  const std::vector<std::int64_t> ids = {9, 0, 9, 4};
  std::vector<double> out(4 * 5);
  t.Lookup(Positions::Ids(ids.data(), 4), 4,
           TensorView::Contiguous(out.data(), DType::kFloat64, {4, 5}));
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 5; ++c) EXPECT_EQ(out[r * 5 + c], static_cast<double>(t.At(ids[r], c)));
  }
  std::vector<float> off(3 * 5);
  t.Lookup(Positions::Offset(7), 3, TensorView::Contiguous(off.data(), DType::kFloat32, {3, 5}));
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 5; ++c) EXPECT_EQ(off[r * 5 + c], t.At(7 + r, c));
  }
}

TEST(LearnedLookup, StridedOutputAndThreads) {
  const LearnedTable t = Random(300, 8);
  std::vector<std::int64_t> ids(200);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>((i * 37) % 300);
  std::vector<float> one(200 * 8), four(200 * 16, -1.0f);
  t.Lookup(Positions::Ids(ids.data(), 200), 200,
           TensorView::Contiguous(one.data(), DType::kFloat32, {200, 8}), Context(1));
  t.Lookup(Positions::Ids(ids.data(), 200), 200,
           TensorView::Strided(four.data(), DType::kFloat32, {200, 8}, {16, 2}), Context(4));
  for (int r = 0; r < 200; ++r) {
    for (int c = 0; c < 8; ++c) {
      EXPECT_EQ(four[r * 16 + 2 * c], one[r * 8 + c]);
      EXPECT_EQ(four[r * 16 + 2 * c + 1], -1.0f);
    }
  }
}

TEST(LearnedAdd, AddsRowsPerBatchRow) {
  const LearnedTable t = Random(6, 3);
  const std::vector<std::int64_t> ids = {0, 5, 2, 2};  // [batch 2, seq 2]
  std::vector<float> x(2 * 2 * 3);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  const std::vector<float> before = x;
  t.AddTo(TensorView::Contiguous(x.data(), DType::kFloat32, {2, 2, 3}),
          Positions::Ids(ids.data(), 4));
  for (int k = 0; k < 4; ++k) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(x[k * 3 + c], before[k * 3 + c] + t.At(ids[k], c));
  }
  t.AddTo(TensorView::Contiguous(x.data(), DType::kFloat32, {2, 2, 3}), Positions::Offset(4));
  EXPECT_EQ(x[3 + 1], before[3 + 1] + t.At(5, 1) + t.At(5, 1));  // b0 s1: ids 5, then offset 4+1
  EXPECT_EQ(x[6 + 2], before[6 + 2] + t.At(2, 2) + t.At(4, 2));  // b1 s0
}

// --- backward and SGD ----------------------------------------------------------------

TEST(LearnedBackward, ScatterAddMatchesANaiveSum) {
  const LearnedTable t = Random(7, 70);  // 70 columns: two column tiles
  const std::int64_t batch = 2, seq = 5, d = 70;
  const std::vector<std::int64_t> ids = {1, 3, 3, 6, 1, 0, 3, 3, 3, 2};
  std::vector<float> d_out(static_cast<std::size_t>(batch * seq * d));
  for (std::size_t i = 0; i < d_out.size(); ++i) d_out[i] = std::sin(0.1f * static_cast<float>(i));
  std::vector<double> want(7 * 70, 0.5);
  for (std::int64_t k = 0; k < batch * seq; ++k) {
    for (std::int64_t c = 0; c < d; ++c)
      want[static_cast<std::size_t>(ids[static_cast<std::size_t>(k)] * d + c)] +=
          d_out[static_cast<std::size_t>(k * d + c)];
  }
  std::vector<double> grad(7 * 70, 0.5);  // accumulates into what is there
  t.Backward(TensorView::Contiguous(d_out.data(), DType::kFloat32, {batch, seq, d}),
             Positions::Ids(ids.data(), batch * seq),
             TensorView::Contiguous(grad.data(), DType::kFloat64, {7, 70}), Context(3));
  EXPECT_LE(MaxAbsDiff(grad, want), 1e-12);
  // Untouched rows (4, 5) keep their value.
  EXPECT_EQ(grad[4 * 70 + 9], 0.5);
}

TEST(LearnedBackward, Rank2IsTheLookupGradient) {
  // L = sum(w * Lookup(ids)); dL/dE[p] = sum of w rows whose id is p. Checked
  // by finite differences (L is linear in E, so the difference is exact up
  // to rounding).
  LearnedTable t = Random(4, 3);
  const std::vector<std::int64_t> ids = {2, 0, 2};
  const std::vector<float> w = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> grad(12, 0.0f);
  t.Backward(TensorView::Contiguous(w.data(), DType::kFloat32, {3, 3}),
             Positions::Ids(ids.data(), 3),
             TensorView::Contiguous(grad.data(), DType::kFloat32, {4, 3}));
  auto loss = [&](const LearnedTable& e) {
    std::vector<double> out(9);
    e.Lookup(Positions::Ids(ids.data(), 3), 3,
             TensorView::Contiguous(out.data(), DType::kFloat64, {3, 3}));
    double l = 0;
    for (int i = 0; i < 9; ++i)
      l += w[static_cast<std::size_t>(i)] * out[static_cast<std::size_t>(i)];
    return l;
  };
  const double base = loss(t);
  for (int p = 0; p < 4; ++p) {
    for (int c = 0; c < 3; ++c) {
      LearnedTable bumped = t;
      bumped.MutableView().As<float>()[p * 3 + c] += 0.25f;
      EXPECT_NEAR((loss(bumped) - base) / 0.25, grad[static_cast<std::size_t>(p * 3 + c)], 1e-4)
          << p << "," << c;
    }
  }
  EXPECT_EQ(grad[0], 4.0f);                 // id 0 once: w row 1
  EXPECT_EQ(grad[2 * 3 + 1], 2.0f + 8.0f);  // id 2 twice: w rows 0 and 2
  EXPECT_EQ(grad[3 * 3], 0.0f);             // id 3 unused
}

TEST(LearnedSgd, StepAndTrainingReducesTheLoss) {
  LearnedTable t = Random(5, 4);
  const std::vector<float> before = t.values();
  std::vector<float> g(20);
  for (int i = 0; i < 20; ++i) g[static_cast<std::size_t>(i)] = static_cast<float>(i) - 10.0f;
  t.SgdStep(TensorView::Contiguous(g.data(), DType::kFloat32, {5, 4}), 0.01);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(t.values()[static_cast<std::size_t>(i)],
              static_cast<float>(static_cast<double>(before[static_cast<std::size_t>(i)]) -
                                 0.01 * g[static_cast<std::size_t>(i)]));
  }
  // Fit rows 1..3 to targets: loss = 0.5 |Lookup - T|^2, gradient = Backward(out - T).
  const std::vector<std::int64_t> ids = {1, 2, 3};
  std::vector<float> target(12);
  for (int i = 0; i < 12; ++i)
    target[static_cast<std::size_t>(i)] = 0.1f * static_cast<float>(i % 5);
  auto step = [&]() {
    std::vector<float> out(12), grad(20, 0.0f);
    t.Lookup(Positions::Ids(ids.data(), 3), 3,
             TensorView::Contiguous(out.data(), DType::kFloat32, {3, 4}));
    double l = 0;
    for (int i = 0; i < 12; ++i) {
      out[static_cast<std::size_t>(i)] -= target[static_cast<std::size_t>(i)];
      l += 0.5 * out[static_cast<std::size_t>(i)] * out[static_cast<std::size_t>(i)];
    }
    t.Backward(TensorView::Contiguous(out.data(), DType::kFloat32, {3, 4}),
               Positions::Ids(ids.data(), 3),
               TensorView::Contiguous(grad.data(), DType::kFloat32, {5, 4}));
    t.SgdStep(TensorView::Contiguous(grad.data(), DType::kFloat32, {5, 4}), 0.5);
    return l;
  };
  const double l0 = step();
  double l = l0;
  for (int i = 0; i < 10; ++i) l = step();
  EXPECT_GT(l0, 0.01);
  EXPECT_LT(l, l0 * 1e-5);  // each step halves the residual
}

// --- .npy ------------------------------------------------------------------------

TEST(LearnedNpy, SaveLoadRoundTrip) {
  const LearnedTable t = Random(10, 768);
  const std::string path = TempDir("learned_rt") + "/wpe.npy";
  t.SaveNpy(path);
  const NpyArray a = ReadNpy(path);
  EXPECT_EQ(a.dtype, DType::kFloat32);
  EXPECT_EQ(a.ShapeText(), "(10, 768)");
  const LearnedTable back = LearnedTable::LoadNpy(path);
  EXPECT_EQ(back.max_positions(), 10);
  EXPECT_EQ(back.dim(), 768);
  EXPECT_EQ(back.values(), t.values());
}

TEST(LearnedNpy, LoadsNumpyFloat64) {
  const LearnedTable t = LearnedTable::LoadNpy(SourcePath("tests/golden/npy/f64_2x3_v2.npy"));
  EXPECT_EQ(t.max_positions(), 2);
  EXPECT_EQ(t.At(1, 2), static_cast<float>(5 / 3.0 - 1.0));
}

TEST(LearnedNpy, WrongRankIsIoErrorNamingTheFile) {
  const std::string path = SourcePath("tests/golden/npy/f16_5.npy");
  try {
    LearnedTable::LoadNpy(path);
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("rank-2"), std::string::npos);
  }
}

TEST(LearnedNpy, MissingFileIsIoError) {
  EXPECT_THROW(LearnedTable::LoadNpy(TempDir("learned_missing") + "/none.npy"), IoError);
}

// --- resize ------------------------------------------------------------------------

void CheckResize(const std::string& fixture, std::int64_t size, ResizeAlignment a) {
  const LearnedTable in = LearnedTable::LoadNpy(SourcePath("tests/golden/npy/resize_in_7x5.npy"));
  const NpyArray want = ReadNpy(SourcePath("tests/golden/npy/" + fixture));
  ASSERT_EQ(want.shape, (std::vector<std::int64_t>{size, 5}));
  const LearnedTable out = in.Resized(size, a);
  const std::vector<float> w = want.ToFloat32();
  EXPECT_LE(MaxAbsDiff(std::vector<double>(out.values().begin(), out.values().end()),
                       std::vector<double>(w.begin(), w.end())),
            1e-6)
      << fixture;
}

TEST(LearnedResize, MatchesTorchInterpolateHalfPixelUp) {
  CheckResize("resize_half_pixel_16.npy", 16, ResizeAlignment::kHalfPixel);
}
TEST(LearnedResize, MatchesTorchInterpolateHalfPixelDown) {
  CheckResize("resize_half_pixel_3.npy", 3, ResizeAlignment::kHalfPixel);
}
TEST(LearnedResize, MatchesTorchInterpolateAlignCorners) {
  CheckResize("resize_corners_16.npy", 16, ResizeAlignment::kCorners);
}

TEST(LearnedResize, SameLengthIsIdentityAndCornersKeepEnds) {
  const LearnedTable t = Random(9, 4);
  EXPECT_EQ(t.Resized(9).values(), t.values());
  const LearnedTable c = t.Resized(33, ResizeAlignment::kCorners);
  for (int col = 0; col < 4; ++col) {
    EXPECT_EQ(c.At(0, col), t.At(0, col));
    EXPECT_EQ(c.At(32, col), t.At(8, col));
    EXPECT_FLOAT_EQ(c.At(4, col), t.At(1, col));  // 4 * 8/32 = 1 exactly
  }
  const LearnedTable one = t.Resized(1, ResizeAlignment::kCorners);
  EXPECT_EQ(one.At(0, 2), t.At(0, 2));
}

TEST(LearnedResize, AlignmentNamesRoundTrip) {
  for (ResizeAlignment a : {ResizeAlignment::kHalfPixel, ResizeAlignment::kCorners}) {
    EXPECT_EQ(ParseResizeAlignment(ResizeAlignmentName(a)), a);
  }
}

// --- bad input: one test per case ----------------------------------------------------

TEST(LearnedErrors, PositionPastTheEndNamesPositionAndLimit) {
  const LearnedTable t = Random(512, 4);
  const std::vector<std::int64_t> ids = {0, 511, 512};
  std::vector<float> out(12);
  ExpectInvalid(
      [&] {
        t.Lookup(Positions::Ids(ids.data(), 3), 3,
                 TensorView::Contiguous(out.data(), DType::kFloat32, {3, 4}));
      },
      {"positions[2]: got 512", "[0, 511]", "max_positions = 512", "not wrapped or clamped"});
}
TEST(LearnedErrors, NegativePosition) {
  const LearnedTable t = Random(8, 4);
  const std::vector<std::int64_t> ids = {-1};
  std::vector<float> out(4);
  ExpectInvalid(
      [&] {
        t.Lookup(Positions::Ids(ids.data(), 1), 1,
                 TensorView::Contiguous(out.data(), DType::kFloat32, {1, 4}));
      },
      {"positions[0]: got -1"});
}
TEST(LearnedErrors, OffsetRunsPastTheEnd) {
  const LearnedTable t = Random(8, 4);
  std::vector<float> x(2 * 3 * 4);
  ExpectInvalid(
      [&] {
        t.AddTo(TensorView::Contiguous(x.data(), DType::kFloat32, {2, 3, 4}), Positions::Offset(6));
      },
      {"positions.offset: got 6", "seq = 3", "max_positions = 8"});
}
TEST(LearnedErrors, BackwardPositionPastTheEnd) {
  const LearnedTable t = Random(4, 2);
  const std::vector<std::int64_t> ids = {4};
  std::vector<float> d(2), g(8);
  ExpectInvalid(
      [&] {
        t.Backward(TensorView::Contiguous(d.data(), DType::kFloat32, {1, 2}),
                   Positions::Ids(ids.data(), 1),
                   TensorView::Contiguous(g.data(), DType::kFloat32, {4, 2}));
      },
      {"positions[0]: got 4"});
}
TEST(LearnedErrors, AtPastTheEnd) {
  ExpectInvalid([] { Random(3, 2).At(3, 0); }, {"position: got 3"});
}
TEST(LearnedErrors, ZeroMaxPositions) {
  ExpectInvalid([] { LearnedTable(0, 4); }, {"max_positions: got 0"});
}
TEST(LearnedErrors, ZeroDim) {
  ExpectInvalid([] { LearnedTable(4, 0); }, {"dim: got 0"});
}
TEST(LearnedErrors, TooManyElements) {
  ExpectInvalid([] { LearnedTable(1 << 24, 1 << 10); }, {"max_positions * dim", "2^31"});
}
TEST(LearnedErrors, BadStddev) {
  ExpectInvalid([] { LearnedTable::RandomNormal({4, 4, std::nan(""), 0}); }, {"stddev: got nan"});
  ExpectInvalid([] { LearnedTable::RandomNormal({4, 4, 0.0, 0}); }, {"stddev: got 0"});
}
TEST(LearnedErrors, LookupOutShapeMismatch) {
  const LearnedTable t = Random(4, 3);
  std::vector<float> out(8);
  ExpectInvalid(
      [&] {
        t.Lookup(Positions::Offset(0), 2,
                 TensorView::Contiguous(out.data(), DType::kFloat32, {2, 4}));
      },
      {"out.shape[1]: got 4", "dim (3)"});
}
TEST(LearnedErrors, LookupOutAliasesTable) {
  LearnedTable t = Random(4, 3);
  ExpectInvalid([&] { t.Lookup(Positions::Offset(0), 4, t.MutableView()); },
                {"out: overlaps table"});
}
TEST(LearnedErrors, LookupOutZeroStride) {
  const LearnedTable t = Random(4, 3);
  std::vector<float> out(3);
  ExpectInvalid(
      [&] {
        t.Lookup(Positions::Offset(0), 2,
                 TensorView::Strided(out.data(), DType::kFloat32, {2, 3}, {0, 1}));
      },
      {"may not alias"});
}
TEST(LearnedErrors, AddDimMismatch) {
  const LearnedTable t = Random(4, 3);
  std::vector<float> x(8);
  ExpectInvalid(
      [&] {
        t.AddTo(TensorView::Contiguous(x.data(), DType::kFloat32, {1, 2, 4}), Positions::Offset(0));
      },
      {"x.shape[2]: got 4"});
}
TEST(LearnedErrors, BackwardGradShapeMismatch) {
  const LearnedTable t = Random(4, 2);
  std::vector<float> d(2), g(6);
  ExpectInvalid(
      [&] {
        t.Backward(TensorView::Contiguous(d.data(), DType::kFloat32, {1, 2}), Positions::Offset(0),
                   TensorView::Contiguous(g.data(), DType::kFloat32, {3, 2}));
      },
      {"grad.shape[0]: got 3", "max_positions (4)"});
}
TEST(LearnedErrors, BackwardDOutRank1) {
  const LearnedTable t = Random(4, 2);
  std::vector<float> d(2), g(8);
  ExpectInvalid(
      [&] {
        t.Backward(TensorView::Contiguous(d.data(), DType::kFloat32, {2}), Positions::Offset(0),
                   TensorView::Contiguous(g.data(), DType::kFloat32, {4, 2}));
      },
      {"d_out.rank: got 1"});
}
TEST(LearnedErrors, SgdBadLearningRate) {
  LearnedTable t = Random(2, 2);
  std::vector<float> g(4);
  ExpectInvalid(
      [&] {
        t.SgdStep(TensorView::Contiguous(g.data(), DType::kFloat32, {2, 2}), -0.1);
      },
      {"learning_rate: got -0.1"});
  ExpectInvalid(
      [&] {
        t.SgdStep(TensorView::Contiguous(g.data(), DType::kFloat32, {2, 2}), INFINITY);
      },
      {"learning_rate: got inf"});
}
TEST(LearnedErrors, SgdGradShapeMismatch) {
  LearnedTable t = Random(2, 2);
  std::vector<float> g(6);
  ExpectInvalid(
      [&] {
        t.SgdStep(TensorView::Contiguous(g.data(), DType::kFloat32, {2, 3}), 0.1);
      },
      {"grad.shape[1]: got 3"});
}
TEST(LearnedErrors, ResizeToZero) {
  ExpectInvalid([] { Random(4, 2).Resized(0); }, {"new_max_positions: got 0"});
}
TEST(LearnedErrors, UnknownAlignment) {
  ExpectInvalid([] { ParseResizeAlignment("cubic"); }, {"alignment: got cubic", "half_pixel"});
}

}  // namespace
}  // namespace posenc::test
