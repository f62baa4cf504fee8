// Shaw et al. 2018: indices, a tiny float64 softmax attention built from the
// row functions (logits, outputs, all-zero tables == no positions), table
// gradients against finite differences, float32 rows vs float64, matrix
// helpers, and every bad-input case.
#include "posenc/shaw.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/error.h"
#include "test_util.h"

namespace posenc {
namespace {

TEST(Shaw, IndexClipsRelativeDistance) {
  EXPECT_EQ(ShawIndex(2, 5, 5), 2);  // j - i = 0 -> k
  EXPECT_EQ(ShawIndex(2, 5, 6), 3);
  EXPECT_EQ(ShawIndex(2, 5, 9), 4);  // +4 clipped to +2
  EXPECT_EQ(ShawIndex(2, 5, 0), 0);  // -5 clipped to -2
  EXPECT_EQ(ShawIndex(0, 5, 0), 0);  // k = 0: one row
  const std::vector<std::int64_t> m = ShawIndexMatrix(ShawParams{1, 4}, 2, 3, 1);
  EXPECT_EQ(m, (std::vector<std::int64_t>{0, 1, 2, 0, 0, 1}));
}

// A tiny attention of one head in float64 with Shaw terms, and its backward.
struct Attn {
  ShawParams p{2, 3};
  std::int64_t sq = 4, sk = 7, offset = 3;         // queries at 3..6, keys at 0..6
  std::vector<double> q, k, v, a_key, a_value, w;  // w: dL/dz (loss = sum w . z)
  std::vector<std::int64_t> kp;
  double scale = 1.0 / std::sqrt(3.0);

  Attn() {
    const std::int64_t d = p.head_dim, rows = p.TableRows();
    q.resize(sq * d);
    k.resize(sk * d);
    v.resize(sk * d);
    a_key.resize(rows * d);
    a_value.resize(rows * d);
    w.resize(sq * d);
    for (std::size_t e = 0; e < q.size(); ++e) q[e] = std::sin(0.9 * static_cast<double>(e) + 0.1);
    for (std::size_t e = 0; e < k.size(); ++e) k[e] = std::cos(1.1 * static_cast<double>(e));
    for (std::size_t e = 0; e < v.size(); ++e) v[e] = std::sin(0.3 * static_cast<double>(e) - 1.0);
    for (std::size_t e = 0; e < a_key.size(); ++e)
      a_key[e] = 0.2 * std::cos(2.1 * static_cast<double>(e));
    for (std::size_t e = 0; e < a_value.size(); ++e)
      a_value[e] = 0.3 * std::sin(1.7 * static_cast<double>(e));
    for (std::size_t e = 0; e < w.size(); ++e) w[e] = std::cos(0.5 * static_cast<double>(e) + 0.3);
    for (std::int64_t j = 0; j < sk; ++j) kp.push_back(j);
  }

  // Returns probs [sq, sk] and out [sq, d]; with_positions=false ignores the tables.
  void Forward(bool with_positions, std::vector<double>& probs, std::vector<double>& out) const {
    const std::int64_t d = p.head_dim;
    probs.assign(sq * sk, 0.0);
    out.assign(sq * d, 0.0);
    for (std::int64_t i = 0; i < sq; ++i) {
      double* lg = &probs[i * sk];
      for (std::int64_t j = 0; j < sk; ++j) {
        double dot = 0;
        for (std::int64_t e = 0; e < d; ++e) dot += q[i * d + e] * k[j * d + e];
        lg[j] = scale * dot;
      }
      if (with_positions)
        ShawAddKeyLogits(p, a_key.data(), &q[i * d], offset + i, kp.data(), sk, scale, lg);
      double mx = lg[0], sum = 0;
      for (std::int64_t j = 1; j < sk; ++j) mx = std::max(mx, lg[j]);
      for (std::int64_t j = 0; j < sk; ++j) sum += (lg[j] = std::exp(lg[j] - mx));
      for (std::int64_t j = 0; j < sk; ++j) lg[j] /= sum;
      for (std::int64_t j = 0; j < sk; ++j)
        for (std::int64_t e = 0; e < d; ++e) out[i * d + e] += lg[j] * v[j * d + e];
      if (with_positions)
        ShawAddValueOutput(p, a_value.data(), lg, offset + i, kp.data(), sk, &out[i * d]);
    }
  }

  double Loss() const {
    std::vector<double> probs, out;
    Forward(true, probs, out);
    double l = 0;
    for (std::size_t e = 0; e < out.size(); ++e) l += w[e] * out[e];
    return l;
  }
};

TEST(Shaw, LogitsAndOutputsMatchPaperFormula) {
  const Attn a;
  std::vector<double> probs, out;
  a.Forward(true, probs, out);
  const std::int64_t d = 3;
  for (std::int64_t i = 0; i < a.sq; ++i) {
    std::vector<double> e(a.sk);
    double mx = -1e300, sum = 0;
    for (std::int64_t j = 0; j < a.sk; ++j) {
      std::int64_t r = std::clamp<std::int64_t>(j - (a.offset + i), -2, 2) + 2;
      double dot = 0;
      for (std::int64_t c = 0; c < d; ++c)
        dot += a.q[i * d + c] * (a.k[j * d + c] + a.a_key[r * d + c]);
      e[j] = dot / std::sqrt(3.0);
      mx = std::max(mx, e[j]);
    }
    for (auto& x : e) sum += (x = std::exp(x - mx));
    for (std::int64_t c = 0; c < d; ++c) {
      double z = 0;
      for (std::int64_t j = 0; j < a.sk; ++j) {
        const std::int64_t r = std::clamp<std::int64_t>(j - (a.offset + i), -2, 2) + 2;
        z += e[j] / sum * (a.v[j * d + c] + a.a_value[r * d + c]);
      }
      EXPECT_NEAR(out[i * d + c], z, 1e-14);
    }
    for (std::int64_t j = 0; j < a.sk; ++j) EXPECT_NEAR(probs[i * a.sk + j], e[j] / sum, 1e-15);
  }
}

TEST(Shaw, AllZeroTablesEqualAttentionWithoutPositions) {
  Attn a;
  std::fill(a.a_key.begin(), a.a_key.end(), 0.0);
  std::fill(a.a_value.begin(), a.a_value.end(), 0.0);
  std::vector<double> p1, o1, p0, o0;
  a.Forward(true, p1, o1);
  a.Forward(false, p0, o0);
  EXPECT_EQ(p1, p0);
  EXPECT_EQ(o1, o0);
  // Non-zero tables do change the result (the test above is not vacuous).
  const Attn b;
  b.Forward(true, p1, o1);
  EXPECT_GT(test::MaxAbsDiff(o1, o0), 1e-3);
}

TEST(Shaw, TableGradientsEqualFiniteDifferences) {
  Attn a;
  const std::int64_t d = 3, rows = a.p.TableRows();
  std::vector<double> probs, out;
  a.Forward(true, probs, out);
  std::vector<double> d_ak(rows * d, 0.0), d_av(rows * d, 0.0), dq(a.sq * d, 0.0);
  for (std::int64_t i = 0; i < a.sq; ++i) {
    const double* dout = &a.w[i * d];
    const double* pr = &probs[i * a.sk];
    ShawValueTableGrad(a.p, pr, a.offset + i, a.kp.data(), a.sk, dout, d_av.data());
    std::vector<double> dprobs(a.sk, 0.0);
    for (std::int64_t j = 0; j < a.sk; ++j)
      for (std::int64_t c = 0; c < d; ++c) dprobs[j] += dout[c] * a.v[j * d + c];
    ShawValueProbsGrad(a.p, a.a_value.data(), a.offset + i, a.kp.data(), a.sk, dout, dprobs.data());
    double dot = 0;
    for (std::int64_t j = 0; j < a.sk; ++j) dot += pr[j] * dprobs[j];
    std::vector<double> dlogits(a.sk);
    for (std::int64_t j = 0; j < a.sk; ++j) dlogits[j] = pr[j] * (dprobs[j] - dot);
    ShawKeyTableGrad(a.p, &a.q[i * d], a.offset + i, a.kp.data(), a.sk, dlogits.data(), a.scale,
                     d_ak.data());
    ShawKeyQueryGrad(a.p, a.a_key.data(), a.offset + i, a.kp.data(), a.sk, dlogits.data(), a.scale,
                     &dq[i * d]);
  }
  const double h = 1e-6;
  auto fd = [&](double& x) {
    const double orig = x;
    x = orig + h;
    const double lp = a.Loss();
    x = orig - h;
    const double lm = a.Loss();
    x = orig;
    return (lp - lm) / (2 * h);
  };
  int nonzero = 0;
  for (std::int64_t e = 0; e < rows * d; ++e) {
    EXPECT_NEAR(d_ak[e], fd(a.a_key[e]), 1e-8) << "a_key " << e;
    EXPECT_NEAR(d_av[e], fd(a.a_value[e]), 1e-8) << "a_value " << e;
    nonzero += (std::abs(d_ak[e]) > 1e-6) + (std::abs(d_av[e]) > 1e-6);
  }
  EXPECT_GT(nonzero, 20);
  // dq from ShawKeyQueryGrad (the a^K part) plus the content part equals
  // the finite difference of the full loss.
  for (std::int64_t e = 0; e < a.sq * d; ++e) {
    // Full dL/dq = Shaw part + content part (scale * sum_j dlogits k_j).
    double content = 0;
    const std::int64_t i = e / d, c = e % d;
    std::vector<double> pr(probs.begin() + i * a.sk, probs.begin() + (i + 1) * a.sk);
    std::vector<double> dprobs(a.sk, 0.0);
    for (std::int64_t j = 0; j < a.sk; ++j)
      for (std::int64_t cc = 0; cc < d; ++cc) {
        const std::int64_t r = ShawIndex(2, a.offset + i, j);
        dprobs[j] += a.w[i * d + cc] * (a.v[j * d + cc] + a.a_value[r * d + cc]);
      }
    double dot = 0;
    for (std::int64_t j = 0; j < a.sk; ++j) dot += pr[j] * dprobs[j];
    for (std::int64_t j = 0; j < a.sk; ++j)
      content += a.scale * pr[j] * (dprobs[j] - dot) * a.k[j * d + c];
    EXPECT_NEAR(dq[e] + content, fd(a.q[e]), 1e-8) << "q " << e;
  }
}

TEST(Shaw, Float32RowsTrackFloat64) {
  const Attn a;
  const ShawParams p = a.p;
  std::vector<float> ak(a.a_key.begin(), a.a_key.end()), av(a.a_value.begin(), a.a_value.end());
  for (std::int64_t i = 0; i < a.sq; ++i) {
    std::vector<float> q32(a.q.begin() + i * 3, a.q.begin() + i * 3 + 3), l32(a.sk, 0.f),
        pr32(a.sk, 0.1f), o32(3, 0.f);
    std::vector<double> l64(a.sk, 0.0), pr64(a.sk, 0.1), o64(3, 0.0);
    ShawAddKeyLogits(p, ak.data(), q32.data(), a.offset + i, a.kp.data(), a.sk, 0.5f, l32.data());
    ShawAddKeyLogits(p, a.a_key.data(), &a.q[i * 3], a.offset + i, a.kp.data(), a.sk, 0.5,
                     l64.data());
    ShawAddValueOutput(p, av.data(), pr32.data(), a.offset + i, a.kp.data(), a.sk, o32.data());
    ShawAddValueOutput(p, a.a_value.data(), pr64.data(), a.offset + i, a.kp.data(), a.sk,
                       o64.data());
    for (std::int64_t j = 0; j < a.sk; ++j) EXPECT_NEAR(l32[j], l64[j], 1e-6);
    for (std::int64_t c = 0; c < 3; ++c) EXPECT_NEAR(o32[c], o64[c], 1e-6);
  }
}

TEST(Shaw, MatrixHelpersMatchRows) {
  const Attn a;
  std::vector<double> logits(a.sq * a.sk, 1.0), rows(a.sq * a.sk, 1.0), out(a.sq * 3, 0.0),
      probs(a.sq * a.sk);
  for (std::size_t e = 0; e < probs.size(); ++e) probs[e] = 1.0 / static_cast<double>(e + 1);
  ShawKeyLogitsMatrix(
      a.p, TensorView::Contiguous(a.a_key.data(), DType::kFloat64, {5, 3}),
      TensorView::Contiguous(a.q.data(), DType::kFloat64, {a.sq, 3}), a.offset, a.sk, 0.25,
      TensorView::Contiguous(logits.data(), DType::kFloat64, {a.sq, a.sk}), BiasWrite::kAdd);
  ShawValueOutputMatrix(a.p, TensorView::Contiguous(a.a_value.data(), DType::kFloat64, {5, 3}),
                        TensorView::Contiguous(probs.data(), DType::kFloat64, {a.sq, a.sk}),
                        a.offset, TensorView::Contiguous(out.data(), DType::kFloat64, {a.sq, 3}),
                        BiasWrite::kOverwrite);
  for (std::int64_t i = 0; i < a.sq; ++i) {
    ShawAddKeyLogits(a.p, a.a_key.data(), &a.q[i * 3], a.offset + i, a.kp.data(), a.sk, 0.25,
                     &rows[i * a.sk]);
    std::vector<double> o(3, 0.0);
    ShawAddValueOutput(a.p, a.a_value.data(), &probs[i * a.sk], a.offset + i, a.kp.data(), a.sk,
                       o.data());
    for (std::int64_t c = 0; c < 3; ++c) EXPECT_NEAR(out[i * 3 + c], o[c], 1e-15);
  }
  EXPECT_LT(test::MaxAbsDiff(logits, rows), 1e-15);
}

TEST(Shaw, RejectsNegativeClip) {
  EXPECT_THROW(ValidateShawParams(ShawParams{-1, 4}), InvalidArgument);
  try {
    ShawIndexMatrix(ShawParams{-3, 4}, 2, 2);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("clip: got -3"), std::string::npos) << e.what();
  }
}

TEST(Shaw, RejectsMismatchedHeadDim) {
  std::vector<double> table(5 * 4), q(2 * 3), logits(2 * 2);
  const ShawParams p{2, 4};
  // Table width 4 but q width 3.
  EXPECT_THROW(
      ShawKeyLogitsMatrix(p, TensorView::Contiguous(table.data(), DType::kFloat64, {5, 4}),
                          TensorView::Contiguous(q.data(), DType::kFloat64, {2, 3}), 0, 2, 1.0,
                          TensorView::Contiguous(logits.data(), DType::kFloat64, {2, 2}),
                          BiasWrite::kOverwrite),
      InvalidArgument);
  // Table width 3 for head_dim 4.
  EXPECT_THROW(
      ValidateShawTable(p, TensorView::Contiguous(table.data(), DType::kFloat64, {5, 3}), "a_key"),
      InvalidArgument);
  // Table rows 4 for clip 2 (needs 5).
  EXPECT_THROW(ValidateShawTable(p, TensorView::Contiguous(table.data(), DType::kFloat64, {4, 4}),
                                 "a_value"),
               InvalidArgument);
  EXPECT_THROW(ValidateShawParams(ShawParams{2, 0}), InvalidArgument);
}

TEST(Shaw, RejectsEmptySequences) {
  std::vector<double> table(5 * 2), q(2 * 2), logits(4), probs(4), out(4);
  const ShawParams p{2, 2};
  const TensorView t = TensorView::Contiguous(table.data(), DType::kFloat64, {5, 2});
  EXPECT_THROW(
      ShawKeyLogitsMatrix(p, t, TensorView::Contiguous(q.data(), DType::kFloat64, {2, 2}), 0, 0,
                          1.0, TensorView::Contiguous(logits.data(), DType::kFloat64, {2, 2}),
                          BiasWrite::kOverwrite),
      InvalidArgument);
  EXPECT_THROW(
      ShawKeyLogitsMatrix(p, t, TensorView::Contiguous(q.data(), DType::kFloat64, {0, 2}), 0, 2,
                          1.0, TensorView::Contiguous(logits.data(), DType::kFloat64, {2, 2}),
                          BiasWrite::kOverwrite),
      InvalidArgument);
  EXPECT_THROW(
      ShawValueOutputMatrix(p, t, TensorView::Contiguous(probs.data(), DType::kFloat64, {2, 0}), 0,
                            TensorView::Contiguous(out.data(), DType::kFloat64, {2, 2}),
                            BiasWrite::kOverwrite),
      InvalidArgument);
  EXPECT_THROW(ShawIndexMatrix(p, 0, 3), InvalidArgument);
}

}  // namespace
}  // namespace posenc
