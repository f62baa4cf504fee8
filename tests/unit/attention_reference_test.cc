// The reference attention: a naive float64 softmax written here, the
// position schemes against their own matrix helpers, properties (GQA, causal,
// decode offset, layouts, RoPE, ALiBi distance), gradients vs finite
// differences, and bad input.
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/alibi.h"
#include "posenc/attention.h"
#include "posenc/error.h"
#include "posenc/transformer_xl.h"
#include "test_util.h"

namespace posenc {
namespace {

struct Shape {
  std::int64_t B = 2, H = 4, Hkv = 2, Sq = 5, Sk = 7, D = 8, Dv = 6;
};

RopeParams Rope(std::int64_t head_dim, double theta,
                RopePairing pairing = RopePairing::kHalfSplit) {
  RopeParams r;
  r.head_dim = head_dim;
  r.theta = theta;
  r.pairing = pairing;
  return r;
}

std::vector<double> Random(std::size_t n, std::uint32_t seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

struct Inputs {
  Shape s;
  std::vector<double> q, k, v;  // bshd
  explicit Inputs(Shape shape, std::uint32_t seed = 1) : s(shape) {
    q = Random(static_cast<std::size_t>(s.B * s.Sq * s.H * s.D), seed);
    k = Random(static_cast<std::size_t>(s.B * s.Sk * s.Hkv * s.D), seed + 1);
    v = Random(static_cast<std::size_t>(s.B * s.Sk * s.Hkv * s.Dv), seed + 2);
  }
  TensorView Q() const {
    return TensorView::Contiguous(q.data(), DType::kFloat64, {s.B, s.Sq, s.H, s.D});
  }
  TensorView K() const {
    return TensorView::Contiguous(k.data(), DType::kFloat64, {s.B, s.Sk, s.Hkv, s.D});
  }
  TensorView V() const {
    return TensorView::Contiguous(v.data(), DType::kFloat64, {s.B, s.Sk, s.Hkv, s.Dv});
  }
};

std::vector<double> Attend(const AttentionParams& p, const Inputs& in,
                           std::vector<double>* probs = nullptr) {
  const Shape& s = in.s;
  std::vector<double> out(static_cast<std::size_t>(s.B * s.Sq * s.H * s.Dv));
  TensorView pv;
  if (probs) {
    probs->assign(static_cast<std::size_t>(s.B * s.H * s.Sq * s.Sk), -1.0);
    pv = TensorView::Contiguous(probs->data(), DType::kFloat64, {s.B, s.H, s.Sq, s.Sk});
  }
  AttentionReference(p, in.Q(), in.K(), in.V(),
                     TensorView::Contiguous(out.data(), DType::kFloat64, {s.B, s.Sq, s.H, s.Dv}),
                     probs ? &pv : nullptr, Context(2));
  return out;
}

// Naive float64 attention written independently: logits = scale*q.k + extra,
// visible(b, i, j) masks; bshd in and out; GQA by h / (H / Hkv).
using Extra = std::function<double(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j)>;
using Vis = std::function<bool(std::int64_t i, std::int64_t j)>;
std::vector<double> Naive(const Inputs& in, double scale, const Vis& visible, const Extra& extra,
                          std::vector<double>* probs_out = nullptr) {
  const Shape& s = in.s;
  std::vector<double> out(static_cast<std::size_t>(s.B * s.Sq * s.H * s.Dv), 0.0);
  if (probs_out) probs_out->assign(static_cast<std::size_t>(s.B * s.H * s.Sq * s.Sk), 0.0);
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.H; ++h) {
      const std::int64_t hk = h / (s.H / s.Hkv);
      for (std::int64_t i = 0; i < s.Sq; ++i) {
        std::vector<double> w(static_cast<std::size_t>(s.Sk), 0.0);
        double mx = -INFINITY, sum = 0;
        for (std::int64_t j = 0; j < s.Sk; ++j) {
          if (!visible(i, j)) continue;
          double dot = 0;
          for (std::int64_t x = 0; x < s.D; ++x)
            dot += in.q[((b * s.Sq + i) * s.H + h) * s.D + x] *
                   in.k[((b * s.Sk + j) * s.Hkv + hk) * s.D + x];
          w[j] = scale * dot + (extra ? extra(b, h, i, j) : 0.0);
          mx = std::max(mx, w[j]);
        }
        for (std::int64_t j = 0; j < s.Sk; ++j) {
          w[j] = visible(i, j) ? std::exp(w[j] - mx) : 0.0;
          sum += w[j];
        }
        for (std::int64_t j = 0; j < s.Sk; ++j) {
          if (sum == 0) break;
          const double pj = w[j] / sum;
          if (probs_out) (*probs_out)[((b * s.H + h) * s.Sq + i) * s.Sk + j] = pj;
          for (std::int64_t x = 0; x < s.Dv; ++x)
            out[((b * s.Sq + i) * s.H + h) * s.Dv + x] +=
                pj * in.v[((b * s.Sk + j) * s.Hkv + hk) * s.Dv + x];
        }
      }
    }
  return out;
}

Vis CausalBottomRight(const Shape& s) {
  return [s](std::int64_t i, std::int64_t j) { return j <= s.Sk - s.Sq + i; };
}

TEST(AttentionReference, NoSchemeEqualsNaiveSoftmaxAndRowsSumToOne) {
  const Inputs in(Shape{});
  AttentionParams p;
  std::vector<double> probs, naive_probs;
  const auto out = Attend(p, in, &probs);
  const auto want = Naive(in, 1 / std::sqrt(8.0), CausalBottomRight(in.s), nullptr, &naive_probs);
  EXPECT_LT(test::MaxAbsDiff(out, want), 1e-14);
  EXPECT_LT(test::MaxAbsDiff(probs, naive_probs), 1e-15);
  for (std::size_t r = 0; r < probs.size() / 7; ++r) {
    double sum = 0;
    for (int j = 0; j < 7; ++j) sum += probs[r * 7 + j];
    EXPECT_NEAR(sum, 1.0, 1e-15);
  }
  p.mask = AttentionMask::kBidirectional;
  p.scale = 0.3;
  EXPECT_LT(test::MaxAbsDiff(Attend(p, in), Naive(
                                                in, 0.3, [](auto, auto) { return true; }, nullptr)),
            1e-14);
}

TEST(AttentionReference, SlidingWindowBothMasks) {
  const Inputs in(Shape{});
  AttentionParams p;
  p.sliding_window = 3;
  const std::int64_t shift = in.s.Sk - in.s.Sq;
  EXPECT_LT(test::MaxAbsDiff(Attend(p, in), Naive(
                                                in, 1 / std::sqrt(8.0),
                                                [&](std::int64_t i, std::int64_t j) {
                                                  return j <= shift + i && shift + i - 3 < j;
                                                },
                                                nullptr)),
            1e-14);
  p.mask = AttentionMask::kBidirectional;
  EXPECT_LT(test::MaxAbsDiff(Attend(p, in), Naive(
                                                in, 1 / std::sqrt(8.0),
                                                [&](std::int64_t i, std::int64_t j) {
                                                  return std::llabs(shift + i - j) < 3;
                                                },
                                                nullptr)),
            1e-14);
}

TEST(AttentionReference, GqaEqualsRepeatedKvHeads) {
  const Inputs in(Shape{});
  Shape full = in.s;
  full.Hkv = full.H;
  Inputs rep(full);
  for (std::int64_t b = 0; b < full.B; ++b)
    for (std::int64_t j = 0; j < full.Sk; ++j)
      for (std::int64_t h = 0; h < full.H; ++h) {
        const std::int64_t hk = h / 2;
        for (std::int64_t x = 0; x < full.D; ++x)
          rep.k[((b * full.Sk + j) * full.H + h) * full.D + x] =
              in.k[((b * full.Sk + j) * 2 + hk) * full.D + x];
        for (std::int64_t x = 0; x < full.Dv; ++x)
          rep.v[((b * full.Sk + j) * full.H + h) * full.Dv + x] =
              in.v[((b * full.Sk + j) * 2 + hk) * full.Dv + x];
      }
  rep.q = in.q;
  AttentionParams p;
  p.scheme = AlibiScheme({0.5, 0.25, 0.125, 0.0625});
  EXPECT_EQ(Attend(p, in), Attend(p, rep));
}

TEST(AttentionReference, CausalNeverLooksAhead) {
  Shape s;
  s.Sq = s.Sk = 6;
  const Inputs in(s);
  Inputs changed = in;
  for (std::int64_t b = 0; b < s.B; ++b)  // keys/values at positions >= 4 change
    for (std::int64_t j = 4; j < s.Sk; ++j) {
      for (std::int64_t x = 0; x < s.Hkv * s.D; ++x)
        changed.k[(b * s.Sk + j) * s.Hkv * s.D + x] += 3.0;
      for (std::int64_t x = 0; x < s.Hkv * s.Dv; ++x)
        changed.v[(b * s.Sk + j) * s.Hkv * s.Dv + x] -= 2.0;
    }
  AttentionParams p;
  p.scheme = RopeScheme(Rope(s.D, 10000.0));
  const auto a = Attend(p, in), c = Attend(p, changed);
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t i = 0; i < s.Sq; ++i)
      for (std::int64_t x = 0; x < s.H * s.Dv; ++x) {
        const double diff =
            std::fabs(a[(b * s.Sq + i) * s.H * s.Dv + x] - c[(b * s.Sq + i) * s.H * s.Dv + x]);
        if (i < 4) {
          EXPECT_EQ(diff, 0.0) << i;
        }
      }
  EXPECT_GT(test::MaxAbsDiff(a, c), 0.1);  // later rows do see the change
}

TEST(AttentionReference, DecodeWithOffsetEqualsLastRowsOfFullAttention) {
  Shape full;
  full.Sq = full.Sk = 7;
  const Inputs in(full);
  Shape dec = full;
  dec.Sq = 2;
  Inputs last(dec);
  last.k = in.k;
  last.v = in.v;
  for (std::int64_t b = 0; b < full.B; ++b)
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t x = 0; x < full.H * full.D; ++x)
        last.q[(b * 2 + i) * full.H * full.D + x] = in.q[(b * 7 + 5 + i) * full.H * full.D + x];
  for (auto scheme : {RopeScheme(Rope(full.D, 10000.0)), AlibiScheme({0.5, 0.25, 0.125, 0.0625})}) {
    AttentionParams p;
    p.scheme = scheme;
    const auto a = Attend(p, in), d = Attend(p, last);
    for (std::int64_t b = 0; b < full.B; ++b)
      for (std::int64_t i = 0; i < 2; ++i)
        for (std::int64_t x = 0; x < full.H * full.Dv; ++x)
          EXPECT_EQ(d[(b * 2 + i) * full.H * full.Dv + x],
                    a[(b * 7 + 5 + i) * full.H * full.Dv + x]);
  }
}

TEST(AttentionReference, BshdEqualsBhsdAndFloat32OutputRoundsOnce) {
  const Inputs in(Shape{});
  const Shape& s = in.s;
  auto to_bhsd = [](const std::vector<double>& x, std::int64_t B, std::int64_t S, std::int64_t H,
                    std::int64_t D) {
    std::vector<double> y(x.size());
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < S; ++t)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t d = 0; d < D; ++d)
            y[((b * H + h) * S + t) * D + d] = x[((b * S + t) * H + h) * D + d];
    return y;
  };
  const auto q = to_bhsd(in.q, s.B, s.Sq, s.H, s.D), k = to_bhsd(in.k, s.B, s.Sk, s.Hkv, s.D),
             v = to_bhsd(in.v, s.B, s.Sk, s.Hkv, s.Dv);
  AttentionParams p;
  p.scheme = RopeScheme(Rope(s.D, 10000.0));
  const auto ref = Attend(p, in);
  p.layout = AttentionLayout::kBHSD;
  std::vector<float> out(ref.size());
  AttentionReference(p, TensorView::Contiguous(q.data(), DType::kFloat64, {s.B, s.H, s.Sq, s.D}),
                     TensorView::Contiguous(k.data(), DType::kFloat64, {s.B, s.Hkv, s.Sk, s.D}),
                     TensorView::Contiguous(v.data(), DType::kFloat64, {s.B, s.Hkv, s.Sk, s.Dv}),
                     TensorView::Contiguous(out.data(), DType::kFloat32, {s.B, s.H, s.Sq, s.Dv}));
  const auto want = to_bhsd(ref, s.B, s.Sq, s.H, s.Dv);
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], static_cast<float>(want[i])) << i;
}

TEST(AttentionReference, RopeSchemeEqualsRotatingFirst) {
  const Inputs in(Shape{});
  const RopeParams rope = Rope(in.s.D, 500.0, RopePairing::kInterleaved);
  AttentionParams p;
  p.scheme = RopeScheme(rope);
  const auto out = Attend(p, in);
  Inputs rotated = in;
  ApplyRope(rope, rotated.Q(), AttentionLayout::kBSHD, Positions::Offset(in.s.Sk - in.s.Sq));
  ApplyRope(rope, rotated.K(), AttentionLayout::kBSHD, Positions::Offset(0));
  p.scheme = PositionScheme::None();
  EXPECT_LT(test::MaxAbsDiff(out, Attend(p, rotated)), 1e-15);
  EXPECT_GT(test::MaxAbsDiff(out, Attend(p, in)), 1e-3);
}

TEST(AttentionReference, AlibiScoresDependOnlyOnDistance) {
  Shape s;
  s.Sq = s.Sk = 6;
  Inputs in(s);
  std::fill(in.q.begin(), in.q.end(), 0.0);  // logits = bias only
  AlibiParams alibi;
  alibi.num_heads = s.H;
  const auto slopes = AlibiSlopes(alibi);
  AttentionParams p;
  p.mask = AttentionMask::kBidirectional;
  p.scheme = AlibiScheme(slopes);
  std::vector<double> probs, shifted;
  Attend(p, in, &probs);
  const auto want = Naive(
      in, 1.0, [](auto, auto) { return true; },
      [&](auto, std::int64_t h, std::int64_t i, std::int64_t j) {
        return -slopes[h] * std::fabs(double(i - j));
      });
  EXPECT_LT(test::MaxAbsDiff(Attend(p, in), want), 1e-14);
  std::vector<std::int64_t> ids(6);
  for (int i = 0; i < 6; ++i) ids[i] = 1000 + i;
  p.query_positions = p.key_positions = Positions::Ids(ids.data(), 6);
  Attend(p, in, &shifted);
  EXPECT_LT(test::MaxAbsDiff(probs, shifted), 1e-15);
}

TEST(AttentionReference, FullyMaskedRowsAreZerosNotNaN) {
  Shape s;
  s.Sq = 2;
  s.Sk = 3;
  const Inputs in(s);
  std::vector<std::int64_t> qids = {0, 5}, kids = {1, 2, 3};
  AttentionParams p;
  p.query_positions = Positions::Ids(qids.data(), 2);
  p.key_positions = Positions::Ids(kids.data(), 3);
  std::vector<double> probs;
  const auto out = Attend(p, in, &probs);
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t x = 0; x < s.H * s.Dv; ++x) {
      EXPECT_EQ(out[(b * 2 + 0) * s.H * s.Dv + x], 0.0);
      EXPECT_NE(out[(b * 2 + 1) * s.H * s.Dv + x], 0.0);
    }
  for (double x : probs) EXPECT_FALSE(std::isnan(x));
  EXPECT_EQ(probs[0], 0.0);
}

TEST(AttentionSchemes, T5MatchesFillBias) {
  const Inputs in(Shape{});
  T5BiasTable table(T5BucketParams{8, 16, T5Direction::kCausal}, in.s.H);
  table.InitNormal(7, 0.7);
  std::vector<double> bias(static_cast<std::size_t>(in.s.H * in.s.Sq * in.s.Sk));
  table.FillBias(Positions::Offset(in.s.Sk - in.s.Sq), in.s.Sq, in.s.Sk,
                 TensorView::Contiguous(bias.data(), DType::kFloat64, {in.s.H, in.s.Sq, in.s.Sk}));
  AttentionParams p;
  p.scale = 1.0;
  p.scheme = T5Scheme(table);
  EXPECT_LT(test::MaxAbsDiff(Attend(p, in),
                             Naive(in, 1.0, CausalBottomRight(in.s),
                                   [&](auto, std::int64_t h, std::int64_t i, std::int64_t j) {
                                     return bias[(h * in.s.Sq + i) * in.s.Sk + j];
                                   })),
            1e-14);
}

TEST(AttentionSchemes, ShawMatchesMatrixHelpers) {
  Shape s{1, 1, 1, 4, 6, 5, 5};
  const Inputs in(s);
  const ShawParams sp{2, 5};
  auto ak = Random(25, 11), av = Random(25, 12);
  const auto ak_v = TensorView::Contiguous(ak.data(), DType::kFloat64, {5, 5});
  const auto av_v = TensorView::Contiguous(av.data(), DType::kFloat64, {5, 5});
  AttentionParams p;
  p.mask = AttentionMask::kBidirectional;
  p.scheme = ShawScheme(sp, ak_v, av_v);
  std::vector<double> probs;
  const auto out = Attend(p, in, &probs);
  const double scale = 1 / std::sqrt(5.0);
  std::vector<double> rel(24), shaw_out(20);
  ShawKeyLogitsMatrix(sp, ak_v, TensorView::Contiguous(in.q.data(), DType::kFloat64, {4, 5}), 2, 6,
                      scale, TensorView::Contiguous(rel.data(), DType::kFloat64, {4, 6}),
                      BiasWrite::kOverwrite);
  auto want = Naive(
      in, scale, [](auto, auto) { return true; },
      [&](auto, auto, std::int64_t i, std::int64_t j) { return rel[i * 6 + j]; });
  ShawValueOutputMatrix(sp, av_v, TensorView::Contiguous(probs.data(), DType::kFloat64, {4, 6}), 2,
                        TensorView::Contiguous(shaw_out.data(), DType::kFloat64, {4, 5}),
                        BiasWrite::kOverwrite);
  for (std::size_t i = 0; i < want.size(); ++i) want[i] += shaw_out[i];
  EXPECT_LT(test::MaxAbsDiff(out, want), 1e-14);
}

TEST(AttentionSchemes, TransformerXLMatchesScores) {
  Shape s{1, 2, 2, 3, 5, 4, 4};
  const Inputs in(s);
  auto u = Random(8, 21), vb = Random(8, 22), rw = Random(5 * 2 * 4, 23);
  AttentionParams p;
  p.scheme = TransformerXLScheme(TensorView::Contiguous(u.data(), DType::kFloat64, {2, 4}),
                                 TensorView::Contiguous(vb.data(), DType::kFloat64, {2, 4}),
                                 TensorView::Contiguous(rw.data(), DType::kFloat64, {5, 2, 4}));
  const double scale = 0.5;
  std::vector<double> scores(2 * 15);
  for (int h = 0; h < 2; ++h) {
    TransformerXLScores(TensorView::Strided(const_cast<double*>(in.q.data()) + h * 4,
                                            DType::kFloat64, {3, 4}, {8, 1}),
                        TensorView::Strided(const_cast<double*>(in.k.data()) + h * 4,
                                            DType::kFloat64, {5, 4}, {8, 1}),
                        TensorView::Strided(rw.data() + h * 4, DType::kFloat64, {5, 4}, {8, 1}),
                        TensorView::Contiguous(u.data() + h * 4, DType::kFloat64, {4}),
                        TensorView::Contiguous(vb.data() + h * 4, DType::kFloat64, {4}), scale,
                        TransformerXLMethod::kRelShift,
                        TensorView::Contiguous(scores.data() + h * 15, DType::kFloat64, {3, 5}));
  }
  // Naive takes scale*q.k + extra: the extra is the score minus the content term.
  const auto content = [&](std::int64_t h, std::int64_t i, std::int64_t j) {
    double d = 0;
    for (int x = 0; x < 4; ++x) d += in.q[(i * 2 + h) * 4 + x] * in.k[(j * 2 + h) * 4 + x];
    return d;
  };
  EXPECT_LT(test::MaxAbsDiff(Attend(p, in),
                             Naive(in, scale, CausalBottomRight(s),
                                   [&](auto, std::int64_t h, std::int64_t i, std::int64_t j) {
                                     return scores[h * 15 + i * 5 + j] - scale * content(h, i, j);
                                   })),
            1e-13);
}

TEST(AttentionSchemes, DebertaMatchesScores) {
  Shape s{1, 2, 2, 7, 7, 4, 4};
  const Inputs in(s);
  DebertaParams dp;
  dp.position_buckets = 4;
  dp.max_relative_positions = 8;
  dp.head_dim = 4;
  auto kr = Random(8 * 2 * 4, 31), qr = Random(8 * 2 * 4, 32);
  AttentionParams p;
  p.mask = AttentionMask::kBidirectional;
  p.scheme = DebertaScheme(dp, TensorView::Contiguous(kr.data(), DType::kFloat64, {8, 2, 4}),
                           TensorView::Contiguous(qr.data(), DType::kFloat64, {8, 2, 4}));
  const DebertaRelative rel(dp);
  std::vector<double> scores(2 * 49);
  for (int h = 0; h < 2; ++h) {
    rel.Scores(TensorView::Strided(const_cast<double*>(in.q.data()) + h * 4, DType::kFloat64,
                                   {7, 4}, {8, 1}),
               TensorView::Strided(const_cast<double*>(in.k.data()) + h * 4, DType::kFloat64,
                                   {7, 4}, {8, 1}),
               TensorView::Strided(kr.data() + h * 4, DType::kFloat64, {8, 4}, {8, 1}),
               TensorView::Strided(qr.data() + h * 4, DType::kFloat64, {8, 4}, {8, 1}),
               TensorView::Contiguous(scores.data() + h * 49, DType::kFloat64, {7, 7}),
               BiasWrite::kOverwrite);
  }
  EXPECT_LT(test::MaxAbsDiff(Attend(p, in),
                             Naive(
                                 in, 0.0, [](auto, auto) { return true; },
                                 [&](auto, std::int64_t h, std::int64_t i, std::int64_t j) {
                                   return scores[h * 49 + i * 7 + j];
                                 })),
            1e-14);
}

// ---- gradients vs central finite differences of L = sum(out * G) ----

double Loss(const AttentionParams& p, const Inputs& in, const std::vector<double>& g) {
  const auto out = Attend(p, in);
  double l = 0;
  for (std::size_t i = 0; i < out.size(); ++i) l += out[i] * g[i];
  return l;
}

struct GradCase {
  Inputs in{Shape{1, 2, 1, 3, 4, 4, 4}, 41};
  std::vector<double> g = Random(static_cast<std::size_t>(1 * 3 * 2 * 4), 42);
  std::vector<double> dq = std::vector<double>(in.q.size()), dk = std::vector<double>(in.k.size()),
                      dv = std::vector<double>(in.v.size());
  AttentionGrads grads;
  GradCase() {
    grads.dq = TensorView::Contiguous(dq.data(), DType::kFloat64, {1, 3, 2, 4});
    grads.dk = TensorView::Contiguous(dk.data(), DType::kFloat64, {1, 4, 1, 4});
    grads.dv = TensorView::Contiguous(dv.data(), DType::kFloat64, {1, 4, 1, 4});
  }
  void Backward(const AttentionParams& p) {
    AttentionReferenceBackward(p, in.Q(), in.K(), in.V(),
                               TensorView::Contiguous(g.data(), DType::kFloat64, {1, 3, 2, 4}),
                               grads);
  }
  // Checks analytic[i] == dL/dx[i] for every element of `x` (float64 data).
  template <typename T>
  void CheckFd(const AttentionParams& p, std::vector<T>& x, const std::vector<double>& analytic,
               double h, double tol, const char* what) {
    ASSERT_EQ(x.size(), analytic.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const T orig = x[i];
      x[i] = static_cast<T>(orig + h);
      const double lp = Loss(p, in, g);
      const double up = static_cast<double>(x[i]);
      x[i] = static_cast<T>(orig - h);
      const double lm = Loss(p, in, g);
      const double fd = (lp - lm) / (up - static_cast<double>(x[i]));
      x[i] = orig;
      EXPECT_NEAR(analytic[i], fd, tol) << what << "[" << i << "]";
    }
  }
  void CheckQkv(const AttentionParams& p) {
    CheckFd(p, in.q, dq, 1e-6, 1e-8, "dq");
    CheckFd(p, in.k, dk, 1e-6, 1e-8, "dk");
    CheckFd(p, in.v, dv, 1e-6, 1e-8, "dv");
  }
};

TEST(AttentionBackward, QkvNoneRopeAlibiWindow) {
  for (int variant = 0; variant < 3; ++variant) {
    GradCase c;
    AttentionParams p;
    if (variant == 1) p.scheme = RopeScheme(Rope(4, 100.0));
    if (variant == 2) {
      p.scheme = AlibiScheme({0.5, 0.25});
      p.sliding_window = 2;
      p.mask = AttentionMask::kBidirectional;
    }
    c.Backward(p);
    c.CheckQkv(p);
  }
}

TEST(AttentionBackward, T5TableEqualsFiniteDifferences) {
  GradCase c;
  T5BiasTable table(T5BucketParams{8, 16, T5Direction::kBidirectional}, 2);
  table.InitNormal(3, 0.5);
  AttentionParams p;
  p.mask = AttentionMask::kBidirectional;
  p.scheme = T5Scheme(table);
  std::vector<double> dt(16);
  c.grads.scheme.Set("table", TensorView::Contiguous(dt.data(), DType::kFloat64, {8, 2}));
  c.Backward(p);
  c.CheckQkv(p);
  std::vector<float> values(table.data(), table.data() + 16);
  // float32 table: a power-of-two step keeps x +- h exact.
  for (std::size_t i = 0; i < 16; ++i) {
    const float orig = table.data()[i];
    table.data()[i] = orig + 1.0f / 1024;
    const double lp = Loss(p, c.in, c.g);
    table.data()[i] = orig - 1.0f / 1024;
    const double lm = Loss(p, c.in, c.g);
    table.data()[i] = orig;
    EXPECT_NEAR(dt[i], (lp - lm) * 512, 2e-6) << "t5[" << i << "]";
  }
  double total = 0;
  for (double x : dt) total += std::fabs(x);
  EXPECT_GT(total, 1e-3);
}

TEST(AttentionBackward, ShawTablesEqualFiniteDifferences) {
  GradCase c;
  auto ak = Random(12, 51), av = Random(12, 52);
  AttentionParams p;
  p.scheme =
      ShawScheme(ShawParams{1, 4}, TensorView::Contiguous(ak.data(), DType::kFloat64, {3, 4}),
                 TensorView::Contiguous(av.data(), DType::kFloat64, {3, 4}));
  std::vector<double> dak(12), dav(12);
  c.grads.scheme.Set("a_key", TensorView::Contiguous(dak.data(), DType::kFloat64, {3, 4}));
  c.grads.scheme.Set("a_value", TensorView::Contiguous(dav.data(), DType::kFloat64, {3, 4}));
  c.Backward(p);
  c.CheckQkv(p);
  c.CheckFd(p, ak, dak, 1e-6, 1e-8, "a_key");
  c.CheckFd(p, av, dav, 1e-6, 1e-8, "a_value");
}

TEST(AttentionBackward, TransformerXLAndDebertaTablesEqualFiniteDifferences) {
  GradCase c;
  auto u = Random(8, 61), vb = Random(8, 62), rw = Random(4 * 2 * 4, 63);
  AttentionParams p;
  p.scheme = TransformerXLScheme(TensorView::Contiguous(u.data(), DType::kFloat64, {2, 4}),
                                 TensorView::Contiguous(vb.data(), DType::kFloat64, {2, 4}),
                                 TensorView::Contiguous(rw.data(), DType::kFloat64, {4, 2, 4}));
  std::vector<double> du(8), dvb(8), drw(32);
  c.grads.scheme.Set("r_w_bias", TensorView::Contiguous(du.data(), DType::kFloat64, {2, 4}));
  c.grads.scheme.Set("r_r_bias", TensorView::Contiguous(dvb.data(), DType::kFloat64, {2, 4}));
  c.grads.scheme.Set("rw", TensorView::Contiguous(drw.data(), DType::kFloat64, {4, 2, 4}));
  c.Backward(p);
  c.CheckQkv(p);
  c.CheckFd(p, u, du, 1e-6, 1e-8, "r_w_bias");
  c.CheckFd(p, vb, dvb, 1e-6, 1e-8, "r_r_bias");
  c.CheckFd(p, rw, drw, 1e-6, 1e-8, "rw");

  GradCase d;
  DebertaParams dp;
  dp.position_buckets = 4;
  dp.max_relative_positions = 8;
  dp.head_dim = 4;
  auto kr = Random(64, 71), qr = Random(64, 72);
  AttentionParams pd;
  pd.mask = AttentionMask::kBidirectional;
  pd.scheme = DebertaScheme(dp, TensorView::Contiguous(kr.data(), DType::kFloat64, {8, 2, 4}),
                            TensorView::Contiguous(qr.data(), DType::kFloat64, {8, 2, 4}));
  std::vector<double> dkr(64), dqr(64);
  d.grads.scheme.Set("pos_key", TensorView::Contiguous(dkr.data(), DType::kFloat64, {8, 2, 4}));
  d.grads.scheme.Set("pos_query", TensorView::Contiguous(dqr.data(), DType::kFloat64, {8, 2, 4}));
  d.Backward(pd);
  d.CheckQkv(pd);
  d.CheckFd(pd, kr, dkr, 1e-6, 1e-8, "pos_key");
  d.CheckFd(pd, qr, dqr, 1e-6, 1e-8, "pos_query");
}

// ---- bad input: one test per case ----

void ExpectInvalid(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected InvalidArgument mentioning " << needle;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

struct Bad {
  std::vector<double> q = std::vector<double>(2 * 3 * 4 * 8, 0.1),
                      k = std::vector<double>(2 * 3 * 4 * 8, 0.1), v = k, out = q;
  TensorView Q(std::initializer_list<std::int64_t> s = {2, 3, 4, 8}) {
    return TensorView::Contiguous(q.data(), DType::kFloat64, s);
  }
  TensorView K(std::initializer_list<std::int64_t> s = {2, 3, 2, 8}) {
    return TensorView::Contiguous(k.data(), DType::kFloat64, s);
  }
  TensorView V(std::initializer_list<std::int64_t> s = {2, 3, 2, 8}) {
    return TensorView::Contiguous(v.data(), DType::kFloat64, s);
  }
  TensorView O(std::initializer_list<std::int64_t> s = {2, 3, 4, 8}) {
    return TensorView::Contiguous(out.data(), DType::kFloat64, s);
  }
  void Call(const AttentionParams& p) { AttentionReference(p, Q(), K(), V(), O()); }
};

TEST(AttentionBadInput, Valid) {
  Bad b;
  b.Call(AttentionParams{});
}
TEST(AttentionBadInput, HeadsNotMultipleOfKvHeads) {
  Bad b;
  ExpectInvalid(
      [&] {
        AttentionReference({}, b.Q({2, 3, 3, 8}), b.K(), b.V(), b.O({2, 3, 3, 8}));
      },
      "k heads: got 2");
}
TEST(AttentionBadInput, MismatchedHeadDim) {
  Bad b;
  ExpectInvalid(
      [&] {
        AttentionReference({}, b.Q(), b.K({2, 3, 2, 4}), b.V(), b.O());
      },
      "k head_dim: got 4");
}
TEST(AttentionBadInput, EmptySequence) {
  Bad b;
  ExpectInvalid(
      [&] {
        AttentionReference({}, b.Q({2, 0, 4, 8}), b.K(), b.V(), b.O());
      },
      "q.shape[1]: got 0");
}
TEST(AttentionBadInput, ZeroHeads) {
  Bad b;
  ExpectInvalid(
      [&] {
        AttentionReference({}, b.Q(), b.K({2, 3, 0, 8}), b.V(), b.O());
      },
      "k.shape[2]: got 0");
}
TEST(AttentionBadInput, SlidingWindowZero) {
  Bad b;
  AttentionParams p;
  p.sliding_window = 0;
  ExpectInvalid([&] { b.Call(p); }, "sliding_window: got 0");
}
TEST(AttentionBadInput, WrongRank) {
  Bad b;
  ExpectInvalid([&] { AttentionReference({}, b.Q({6, 4, 8}), b.K(), b.V(), b.O()); }, "q");
}
TEST(AttentionBadInput, MismatchedBatch) {
  Bad b;
  ExpectInvalid(
      [&] {
        AttentionReference({}, b.Q(), b.K({1, 3, 2, 8}), b.V(), b.O());
      },
      "k batch: got 1");
}
TEST(AttentionBadInput, QueriesLongerThanKeysNeedPositions) {
  Bad b;
  ExpectInvalid(
      [&] {
        AttentionReference({}, b.Q(), b.K({2, 2, 2, 8}), b.V({2, 2, 2, 8}), b.O());
      },
      "query_positions");
}
TEST(AttentionBadInput, BadScale) {
  Bad b;
  AttentionParams p;
  p.scale = -1.0;
  ExpectInvalid([&] { b.Call(p); }, "scale: got -1");
}
TEST(AttentionBadInput, OutputShape) {
  Bad b;
  ExpectInvalid([&] { AttentionReference({}, b.Q(), b.K(), b.V(), b.O({2, 3, 2, 8})); }, "out");
}
TEST(AttentionBadInput, AlibiSlopesOfWrongLength) {
  Bad b;
  AttentionParams p;
  p.scheme = AlibiScheme({0.5});
  ExpectInvalid([&] { b.Call(p); }, "scheme.alibi.slopes.size(): got 1");
}
TEST(AttentionBadInput, RopeHeadDimMismatch) {
  Bad b;
  AttentionParams p;
  p.scheme = RopeScheme(Rope(4, 10000.0));
  ExpectInvalid([&] { b.Call(p); }, "scheme.rope.head_dim: got 4");
}
TEST(AttentionBadInput, T5TableHeads) {
  Bad b;
  T5BiasTable table(T5BucketParams{}, 3);
  AttentionParams p;
  p.scheme = T5Scheme(table);
  ExpectInvalid([&] { b.Call(p); }, "scheme.t5.table heads: got 3");
}
TEST(AttentionBadInput, TransformerXLTableTooShort) {
  Bad b;
  std::vector<double> u(32), rw(2 * 4 * 8);
  AttentionParams p;
  p.scheme = TransformerXLScheme(TensorView::Contiguous(u.data(), DType::kFloat64, {4, 8}),
                                 TensorView::Contiguous(u.data(), DType::kFloat64, {4, 8}),
                                 TensorView::Contiguous(rw.data(), DType::kFloat64, {2, 4, 8}));
  ExpectInvalid([&] { b.Call(p); }, "scheme.transformer_xl.rw: got 2 rows");
}
TEST(AttentionBadInput, OutputOverlapsInput) {
  Bad b;
  ExpectInvalid([&] { AttentionReference({}, b.Q(), b.K(), b.V(), b.Q()); }, "out");
}

TEST(AttentionNames, RoundTrip) {
  for (const char* name : {"none", "transformer_xl", "deberta"}) {
    EXPECT_EQ(PositionScheme::Registered(name).name, name);
  }
  EXPECT_EQ(PositionScheme::None().name, "none");
  ExpectInvalid([] { (void)PositionScheme::Registered("xpos"); }, "scheme.name: got xpos");
  EXPECT_EQ(ParseAttentionMask("bidirectional"), AttentionMask::kBidirectional);
  ExpectInvalid([] { (void)ParseAttentionMask("full"); }, "mask: got full");
}

}  // namespace
}  // namespace posenc
