// T5 relative buckets and bias table: HF golden buckets (all 3 cases),
// monotonicity and saturation, the tile/matrix forms, the table gradient
// against finite differences, and every bad-input case.
#include "posenc/t5.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/error.h"
#include "test_util.h"

namespace posenc {
namespace {

T5BucketParams Params(std::int64_t nb, std::int64_t md, T5Direction dir) {
  return T5BucketParams{nb, md, dir};
}

TEST(T5Buckets, GoldenAllCases) {
  const auto& cases = test::Golden("t5_buckets.json")["cases"];
  ASSERT_EQ(cases.size(), 3u);
  for (const auto& c : cases) {
    const T5BucketParams p =
        Params(c["num_buckets"].get<std::int64_t>(), c["max_distance"].get<std::int64_t>(),
               c["bidirectional"].get<bool>() ? T5Direction::kBidirectional : T5Direction::kCausal);
    const std::int64_t first = c["relative_position_first"].get<std::int64_t>();
    const std::int64_t last = c["relative_position_last"].get<std::int64_t>();
    const auto& expected = c["buckets"];
    ASSERT_EQ(static_cast<std::int64_t>(expected.size()), last - first + 1);
    const std::vector<std::int64_t> got = T5Buckets(p, first, last - first + 1);
    const T5Bucketer bucketer(p);
    for (std::size_t r = 0; r < got.size(); ++r) {
      const std::int64_t rel = first + static_cast<std::int64_t>(r);
      ASSERT_EQ(got[r], expected[r].get<std::int64_t>())
          << T5DirectionName(p.direction) << " nb=" << p.num_buckets << " rel=" << rel;
      ASSERT_EQ(bucketer.Bucket(rel), got[r]);
    }
  }
}

TEST(T5Buckets, HandValues) {
  // Bidirectional 32/128: nb = 16, max_exact = 8; rel > 0 adds 16.
  const T5Bucketer b(Params(32, 128, T5Direction::kBidirectional));
  EXPECT_EQ(b.Bucket(0), 0);
  EXPECT_EQ(b.Bucket(-7), 7);
  EXPECT_EQ(b.Bucket(7), 23);
  // n = 8: 8 + trunc(ln(1)/ln(16) * 8) = 8.
  EXPECT_EQ(b.Bucket(-8), 8);
  // n = 16: 8 + trunc(ln 2 / ln 16 * 8) = 8 + 2 = 10.
  EXPECT_EQ(b.Bucket(-16), 10);
  EXPECT_EQ(b.Bucket(16), 26);
  // Causal: future keys (rel > 0) all share bucket 0.
  const T5Bucketer c(Params(32, 128, T5Direction::kCausal));
  EXPECT_EQ(c.Bucket(5), 0);
  EXPECT_EQ(c.Bucket(-15), 15);
  EXPECT_EQ(c.BucketOf(/*query_pos=*/20, /*key_pos=*/4), c.Bucket(-16));
}

TEST(T5Buckets, MonotoneAndSaturating) {
  for (const T5Direction dir : {T5Direction::kBidirectional, T5Direction::kCausal}) {
    for (const auto& [nb, md] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {32, 128}, {64, 256}, {8, 20}, {4, 3}}) {
      if (dir == T5Direction::kBidirectional && nb < 4) continue;
      const T5BucketParams p = Params(nb, md, dir);
      const T5Bucketer b(p);
      const std::int64_t half = b.half_buckets();
      std::int64_t prev_past = -1, prev_future = -1;
      for (std::int64_t n = 0; n <= 4 * md; ++n) {
        const std::int64_t past = b.Bucket(-n);
        EXPECT_GE(past, prev_past) << "n=" << n;  // monotone in distance
        prev_past = past;
        if (n >= md) {
          EXPECT_EQ(past, half - 1) << "saturates at nb - 1, n=" << n;
        }
        if (n < md) {
          EXPECT_LT(past, half) << n;
        }
        if (dir == T5Direction::kBidirectional) {
          const std::int64_t fut = b.Bucket(n);
          EXPECT_GE(fut, prev_future);
          prev_future = fut;
          EXPECT_EQ(fut, n == 0 ? 0 : past + half) << "future = past + nb, n=" << n;
          if (n >= md) {
            EXPECT_EQ(fut, p.num_buckets - 1);
          }
        } else {
          EXPECT_EQ(b.Bucket(n), 0);
        }
      }
    }
  }
}

// The bucketer's table and saturation shortcut against HF's float32
// formula evaluated directly, at every distance up to past the saturation
// point and at samples up to 2^24, for bucket counts and max distances
// whose logarithmic range spans a few distances, ~1024 (table) and more
// (formula, no table), both directions.
TEST(T5Buckets, FastPathsEqualTheFormula) {
  const auto formula = [](const T5BucketParams& p, std::int64_t rel) {
    const bool bidir = p.direction == T5Direction::kBidirectional;
    const std::int64_t nb = bidir ? p.num_buckets / 2 : p.num_buckets, max_exact = nb / 2;
    std::int64_t bucket = bidir && rel > 0 ? nb : 0;
    const std::int64_t n = bidir ? std::llabs(rel) : (rel < 0 ? -rel : 0);
    if (n < max_exact) return bucket + n;
    const auto denom = static_cast<float>(
        std::log(static_cast<double>(p.max_distance) / static_cast<double>(max_exact)));
    const float scaled = std::log(static_cast<float>(n) / static_cast<float>(max_exact)) / denom *
                         static_cast<float>(nb - max_exact);
    return bucket + std::min(nb - 1, max_exact + static_cast<std::int64_t>(scaled));
  };
  for (const T5Direction dir : {T5Direction::kBidirectional, T5Direction::kCausal}) {
    for (const auto& [nb, md] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {32, 128}, {8, 9}, {64, 1000}, {32, 1100}, {128, 5000}, {32, 1 << 24}}) {
      const T5BucketParams p = Params(nb, md, dir);
      const T5Bucketer b(p);
      for (std::int64_t n = 0; n <= 2 * md + 2 && n <= 20000; ++n) {
        ASSERT_EQ(b.Bucket(-n), formula(p, -n)) << nb << ", " << md << ", " << -n;
        ASSERT_EQ(b.Bucket(n), formula(p, n)) << nb << ", " << md << ", " << n;
      }
      for (std::int64_t n = 20000; n < (std::int64_t{1} << 24); n = n * 5 / 4 + 7) {
        ASSERT_EQ(b.Bucket(-n), formula(p, -n)) << nb << ", " << md << ", " << -n;
        ASSERT_EQ(b.Bucket(n), formula(p, n)) << nb << ", " << md << ", " << n;
      }
    }
  }
}

TEST(T5Buckets, LargeDistancesStayInRange) {
  const T5Bucketer b(Params(32, 128, T5Direction::kBidirectional));
  EXPECT_EQ(b.Bucket(-kMaxPosition), 15);
  EXPECT_EQ(b.Bucket(kMaxPosition), 31);
}

TEST(T5Buckets, RejectsTooFewBucketsForMode) {
  EXPECT_THROW(T5Bucketer(Params(3, 128, T5Direction::kBidirectional)), InvalidArgument);
  EXPECT_THROW(T5Bucketer(Params(1, 128, T5Direction::kCausal)), InvalidArgument);
  EXPECT_THROW(T5Bucketer(Params(0, 128, T5Direction::kCausal)), InvalidArgument);
  // Smallest valid: 4 bidirectional (nb=2, max_exact=1), 2 causal.
  EXPECT_NO_THROW(T5Bucketer(Params(4, 2, T5Direction::kBidirectional)));
  EXPECT_NO_THROW(T5Bucketer(Params(2, 2, T5Direction::kCausal)));
  try {
    T5Bucketer(Params(3, 128, T5Direction::kBidirectional));
    FAIL();
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("num_buckets: got 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bidirectional"), std::string::npos) << msg;
  }
}

TEST(T5Buckets, RejectsMaxDistanceNotAboveExactRange) {
  // 32 bidirectional: max_exact = 8, so max_distance must be > 8.
  EXPECT_THROW(T5Bucketer(Params(32, 8, T5Direction::kBidirectional)), InvalidArgument);
  EXPECT_NO_THROW(T5Bucketer(Params(32, 9, T5Direction::kBidirectional)));
  // 32 causal: max_exact = 16.
  EXPECT_THROW(T5Bucketer(Params(32, 16, T5Direction::kCausal)), InvalidArgument);
  try {
    T5Bucketer(Params(32, 16, T5Direction::kCausal));
    FAIL();
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("max_distance: got 16"), std::string::npos) << msg;
    EXPECT_NE(msg.find("max_exact = 16"), std::string::npos) << msg;
  }
}

TEST(T5Buckets, RejectsBadRangeAndDirectionName) {
  const T5BucketParams p;
  EXPECT_THROW(T5Buckets(p, 0, 0), InvalidArgument);
  EXPECT_THROW(T5Buckets(p, kMaxPosition, 2), InvalidArgument);
  EXPECT_THROW(ParseT5Direction("encoder"), InvalidArgument);
  EXPECT_EQ(ParseT5Direction("causal"), T5Direction::kCausal);
  EXPECT_EQ(T5DirectionName(T5Direction::kBidirectional), "bidirectional");
}

TEST(T5BiasTable, InitIsDeterministicAndScaled) {
  T5BiasTable a(T5BucketParams{}, 4), b(T5BucketParams{}, 4), c(T5BucketParams{}, 4);
  a.InitNormal(7, 0.5);
  b.InitNormal(7, 0.5);
  c.InitNormal(8, 0.5);
  double sum2 = 0.0;
  for (std::int64_t e = 0; e < 32 * 4; ++e) {
    EXPECT_EQ(a.data()[e], b.data()[e]);
    sum2 += static_cast<double>(a.data()[e]) * a.data()[e];
  }
  EXPECT_NE(a.data()[0], c.data()[0]);
  const double sd = std::sqrt(sum2 / 128.0);
  EXPECT_GT(sd, 0.35);  // 128 samples of N(0, 0.25): sd within ~0.5 +- 0.1
  EXPECT_LT(sd, 0.65);
  EXPECT_THROW(a.InitNormal(1, -1.0), InvalidArgument);
  EXPECT_THROW(a.InitNormal(1, NAN), InvalidArgument);
  EXPECT_THROW(T5BiasTable(T5BucketParams{}, 0), InvalidArgument);
}

TEST(T5BiasTable, TileMatchesFillBiasAndLookup) {
  T5BiasTable t(T5BucketParams{16, 40, T5Direction::kBidirectional}, 3);
  t.InitNormal(42, 1.0);
  const std::int64_t sq = 5, sk = 37, past = 30;
  std::vector<double> full(static_cast<std::size_t>(3 * sq * sk));
  t.FillBias(Positions::Offset(past), sq, sk,
             TensorView::Contiguous(full.data(), DType::kFloat64, {3, sq, sk}));
  std::vector<std::int64_t> qp(sq), kp(sk);
  for (std::int64_t i = 0; i < sq; ++i) qp[i] = past + i;
  for (std::int64_t j = 0; j < sk; ++j) kp[j] = j;
  for (std::int64_t h = 0; h < 3; ++h) {
    std::vector<float> tile(static_cast<std::size_t>(sq * (sk + 3)), 1.0f);
    t.BiasTile(h, qp.data(), sq, kp.data(), sk, tile.data(), sk + 3, BiasWrite::kAdd);
    for (std::int64_t i = 0; i < sq; ++i) {
      for (std::int64_t j = 0; j < sk; ++j) {
        const float expected = t.data()[t.bucketer().Bucket(j - (past + i)) * 3 + h];
        EXPECT_EQ(full[static_cast<std::size_t>((h * sq + i) * sk + j)], expected);
        EXPECT_EQ(t.Bias(h, past + i, j), expected);
        EXPECT_EQ(tile[static_cast<std::size_t>(i * (sk + 3) + j)], 1.0f + expected);
      }
      EXPECT_EQ(tile[static_cast<std::size_t>(i * (sk + 3) + sk)], 1.0f);  // padding untouched
    }
  }
}

TEST(T5BiasTable, GradientEqualsFiniteDifferences) {
  // Loss L = sum_hij w_hij b_hij + 0.5 b_hij^2 over bias b = FillBias(table):
  // dL/db = w + b, scattered into dTable by AccumulateGrad, and by GradTile.
  const std::int64_t heads = 2, sq = 6, sk = 40;
  T5BiasTable t(T5BucketParams{8, 20, T5Direction::kCausal}, heads);
  t.InitNormal(3, 0.7);
  const Positions qpos = Positions::Offset(sk - sq);
  std::vector<double> w(static_cast<std::size_t>(heads * sq * sk));
  for (std::size_t e = 0; e < w.size(); ++e) w[e] = std::sin(0.37 * static_cast<double>(e) + 1.0);
  auto loss = [&]() {
    std::vector<double> b(w.size());
    t.FillBias(qpos, sq, sk, TensorView::Contiguous(b.data(), DType::kFloat64, {heads, sq, sk}));
    double l = 0.0;
    for (std::size_t e = 0; e < b.size(); ++e) l += w[e] * b[e] + 0.5 * b[e] * b[e];
    return l;
  };
  std::vector<double> b(w.size()), dbias(w.size());
  t.FillBias(qpos, sq, sk, TensorView::Contiguous(b.data(), DType::kFloat64, {heads, sq, sk}));
  for (std::size_t e = 0; e < b.size(); ++e) dbias[e] = w[e] + b[e];
  std::vector<double> dtable(static_cast<std::size_t>(8 * heads), 99.0);
  t.AccumulateGrad(qpos, TensorView::Contiguous(dbias.data(), DType::kFloat64, {heads, sq, sk}),
                   TensorView::Contiguous(dtable.data(), DType::kFloat64, {8, heads}),
                   BiasWrite::kOverwrite);
  // Same via the tile backward (float64 accumulator).
  std::vector<double> dtile(dtable.size(), 0.0);
  std::vector<std::int64_t> qp(sq), kp(sk);
  for (std::int64_t i = 0; i < sq; ++i) qp[i] = sk - sq + i;
  for (std::int64_t j = 0; j < sk; ++j) kp[j] = j;
  for (std::int64_t h = 0; h < heads; ++h)
    t.GradTile(h, qp.data(), sq, kp.data(), sk, dbias.data() + h * sq * sk, sk, dtile.data());
  std::int64_t used = 0;
  for (std::int64_t e = 0; e < 8 * heads; ++e) {
    const float orig = t.data()[e];
    const float hi = orig + 0.01f, lo = orig - 0.01f;
    t.data()[e] = hi;
    const double lhi = loss();
    t.data()[e] = lo;
    const double llo = loss();
    t.data()[e] = orig;
    const double fd = (lhi - llo) / (static_cast<double>(hi) - static_cast<double>(lo));
    EXPECT_NEAR(dtable[static_cast<std::size_t>(e)], fd, 1e-9 * (1.0 + std::abs(fd))) << e;
    EXPECT_NEAR(dtile[static_cast<std::size_t>(e)], dtable[static_cast<std::size_t>(e)], 1e-12);
    if (dtable[static_cast<std::size_t>(e)] != 0.0) ++used;
  }
  EXPECT_GE(used, 8);  // the fixture reaches most buckets
}

TEST(T5BiasTable, RejectsBadViewsAndEmptySequences) {
  T5BiasTable t(T5BucketParams{}, 2);
  std::vector<float> buf(2 * 3 * 4);
  const TensorView ok = TensorView::Contiguous(buf.data(), DType::kFloat32, {2, 3, 4});
  EXPECT_NO_THROW(t.FillBias(Positions::Offset(0), 3, 4, ok));
  EXPECT_THROW(t.FillBias(Positions::Offset(0), 0, 4, ok), InvalidArgument);
  EXPECT_THROW(t.FillBias(Positions::Offset(0), 3, 0, ok), InvalidArgument);
  EXPECT_THROW(t.FillBias(Positions::Offset(0), 3, 5, ok), InvalidArgument);
  EXPECT_THROW(t.FillBias(Positions::Offset(-1), 3, 4, ok), InvalidArgument);
  EXPECT_THROW(t.FillBias(Positions::Offset(0), 3, 4,
                          TensorView::Contiguous(buf.data(), DType::kFloat32, {3, 2, 4})),
               InvalidArgument);
  std::vector<float> dt(32 * 2);
  std::vector<std::int32_t> bad_dt(32 * 2);
  EXPECT_THROW(t.AccumulateGrad(Positions::Offset(0), ok,
                                TensorView::Contiguous(dt.data(), DType::kFloat32, {2, 32}),
                                BiasWrite::kAdd),
               InvalidArgument);
  EXPECT_THROW(t.AccumulateGrad(Positions::Offset(0), ok,
                                TensorView::Contiguous(bad_dt.data(), DType::kBFloat16, {32, 2}),
                                BiasWrite::kAdd),
               InvalidArgument);
  EXPECT_NO_THROW(t.AccumulateGrad(Positions::Offset(0), ok,
                                   TensorView::Contiguous(dt.data(), DType::kFloat32, {32, 2}),
                                   BiasWrite::kAdd));
}

}  // namespace
}  // namespace posenc
