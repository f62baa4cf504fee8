// Transformer-XL: the R table (descending positions, [sin | cos], clamp_len),
// rel-shift == direct on the causal region for qlen == klen and with memory,
// HF's rel-shift layout on a hand example, the row form, and bad inputs.
#include "posenc/transformer_xl.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/error.h"
#include "test_util.h"

namespace posenc {
namespace {

TensorView V2(std::vector<double>& b, std::int64_t r, std::int64_t c) {
  return TensorView::Contiguous(b.data(), DType::kFloat64, {r, c});
}
TensorView V1(std::vector<double>& b, std::int64_t n) {
  return TensorView::Contiguous(b.data(), DType::kFloat64, {n});
}

TEST(TransformerXL, PositionEmbeddingDescendingSinCos) {
  std::vector<double> r(3 * 4);
  TransformerXLPositionEmbedding(TransformerXLParams{4, 0, 10000.0}, 3, V2(r, 3, 4));
  // inv_freq = [1, 10000^(-2/4) = 0.01]; row 0 is position 2, row 2 position 0.
  const std::vector<double> expected = {std::sin(2.0), std::sin(0.02),
                                        std::cos(2.0), std::cos(0.02),
                                        std::sin(1.0), std::sin(0.01),
                                        std::cos(1.0), std::cos(0.01),
                                        0.0,           0.0,
                                        1.0,           1.0};
  EXPECT_LT(test::MaxAbsDiff(r, expected), 1e-15);
  // clamp_len = 1: position 2 is clamped to 1, so rows 0 and 1 are equal.
  TransformerXLPositionEmbedding(TransformerXLParams{4, 1, 10000.0}, 3, V2(r, 3, 4));
  for (int c = 0; c < 4; ++c) EXPECT_EQ(r[c], r[4 + c]);
  // float32 output is the float64 table rounded once.
  std::vector<float> r32(3 * 4);
  TransformerXLPositionEmbedding(TransformerXLParams{4, 0, 10000.0}, 3,
                                 TensorView::Contiguous(r32.data(), DType::kFloat32, {3, 4}));
  for (int e = 0; e < 12; ++e) EXPECT_EQ(r32[e], static_cast<float>(expected[e]));
}

TEST(TransformerXL, RelShiftMatchesHFLayoutByHand) {
  // x = [[1 2 3], [4 5 6]] (qlen 2, klen 3). Padded [[0 1 2 3], [0 4 5 6]]
  // flattened 0 1 2 3 0 4 5 6, viewed [4, 2], first row dropped: 2 3 0 4 5 6.
  std::vector<double> x = {1, 2, 3, 4, 5, 6}, out(6);
  TransformerXLRelShift(V2(x, 2, 3), V2(out, 2, 3));
  EXPECT_EQ(out, (std::vector<double>{2, 3, 0, 4, 5, 6}));
}

struct Head {
  std::int64_t qlen, klen, d = 4;
  std::vector<double> q, k, rw, u, v;
  Head(std::int64_t ql, std::int64_t kl) : qlen(ql), klen(kl) {
    q.resize(qlen * d);
    k.resize(klen * d);
    rw.resize(klen * d);
    u.resize(d);
    v.resize(d);
    for (std::size_t e = 0; e < q.size(); ++e) q[e] = std::sin(0.7 * static_cast<double>(e) + 0.3);
    for (std::size_t e = 0; e < k.size(); ++e) k[e] = std::cos(1.3 * static_cast<double>(e));
    for (std::size_t e = 0; e < rw.size(); ++e)
      rw[e] = std::sin(2.3 * static_cast<double>(e) - 0.5);
    for (std::size_t e = 0; e < u.size(); ++e) u[e] = 0.1 * static_cast<double>(e) - 0.2;
    for (std::size_t e = 0; e < v.size(); ++e) v[e] = 0.05 * static_cast<double>(e) + 0.1;
  }
  std::vector<double> Scores(TransformerXLMethod m) {
    std::vector<double> out(qlen * klen);
    TransformerXLScores(V2(q, qlen, d), V2(k, klen, d), V2(rw, klen, d), V1(u, d), V1(v, d), 0.5, m,
                        V2(out, qlen, klen));
    return out;
  }
};

TEST(TransformerXL, RelShiftEqualsDirectOnCausalRegion) {
  for (const auto& [ql, kl] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{5, 5}, {3, 8}, {1, 6}, {4, 5}}) {
    Head h(ql, kl);
    const std::vector<double> shifted = h.Scores(TransformerXLMethod::kRelShift);
    const std::vector<double> direct = h.Scores(TransformerXLMethod::kDirect);
    const std::int64_t mem = kl - ql;
    int compared = 0;
    for (std::int64_t i = 0; i < ql; ++i) {
      for (std::int64_t j = 0; j < kl; ++j) {
        const std::size_t f = static_cast<std::size_t>(i * kl + j);
        if (j <= mem + i) {
          EXPECT_NEAR(shifted[f], direct[f], 1e-13) << ql << "x" << kl << " i=" << i << " j=" << j;
          ++compared;
        } else if (j == mem + i + 1) {
          // The zero pad: rel-shift has the content term only, like direct.
          EXPECT_NEAR(shifted[f], direct[f], 1e-13);
        }
      }
    }
    EXPECT_EQ(compared, ql * (mem + 1) + ql * (ql - 1) / 2);
  }
}

TEST(TransformerXL, DirectMatchesFormulaAndRowForm) {
  Head h(3, 7);
  const std::vector<double> direct = h.Scores(TransformerXLMethod::kDirect);
  for (std::int64_t i = 0; i < 3; ++i) {
    std::vector<double> row(7, 0.0);
    TransformerXLAddPositionTermsRow(&h.q[i * 4], h.u.data(), h.v.data(), h.k.data(), 4,
                                     h.rw.data(), 4, 4, 3, 7, i, 0.5, row.data());
    for (std::int64_t j = 0; j < 7; ++j) {
      double qk = 0, uk = 0, bd = 0;
      const std::int64_t dist = 4 + i - j;  // mem 4
      for (std::int64_t e = 0; e < 4; ++e) {
        qk += h.q[i * 4 + e] * h.k[j * 4 + e];
        uk += h.u[e] * h.k[j * 4 + e];
        if (dist >= 0) bd += (h.q[i * 4 + e] + h.v[e]) * h.rw[(6 - dist) * 4 + e];
      }
      EXPECT_NEAR(direct[i * 7 + j], 0.5 * (qk + uk + bd), 1e-14);
      EXPECT_NEAR(row[j], 0.5 * (uk + bd), 1e-14);
    }
  }
  EXPECT_EQ(TransformerXLRow(7, TransformerXLDistance(3, 7, 0, 0)), 2);
}

TEST(TransformerXL, RejectsBadInputs) {
  EXPECT_THROW(ValidateTransformerXLParams(TransformerXLParams{5, 0, 10000.0}),
               InvalidArgument);  // odd dim
  EXPECT_THROW(ValidateTransformerXLParams(TransformerXLParams{4, 0, 1.0}), InvalidArgument);
  std::vector<double> r(12);
  EXPECT_THROW(TransformerXLPositionEmbedding(TransformerXLParams{4, 0, 10000.0}, 0, V2(r, 3, 4)),
               InvalidArgument);  // empty sequence
  EXPECT_THROW(TransformerXLPositionEmbedding(TransformerXLParams{4, 0, 10000.0}, 4, V2(r, 3, 4)),
               InvalidArgument);
  Head h(4, 3);  // qlen > klen
  std::vector<double> out(12);
  EXPECT_THROW(TransformerXLScores(V2(h.q, 4, 4), V2(h.k, 3, 4), V2(h.rw, 3, 4), V1(h.u, 4),
                                   V1(h.v, 4), 0.5, TransformerXLMethod::kDirect, V2(out, 4, 3)),
               InvalidArgument);
  Head g(2, 3);
  EXPECT_THROW(TransformerXLScores(V2(g.q, 2, 4), V2(g.k, 3, 4), V2(g.rw, 3, 4), V1(g.u, 3),
                                   V1(g.v, 4), 0.5, TransformerXLMethod::kDirect, V2(out, 2, 3)),
               InvalidArgument);  // mismatched d_head (u)
  EXPECT_THROW(TransformerXLScores(V2(g.q, 2, 4), V2(g.k, 3, 4), V2(g.rw, 2, 4), V1(g.u, 4),
                                   V1(g.v, 4), 0.5, TransformerXLMethod::kDirect, V2(out, 2, 3)),
               InvalidArgument);  // rw rows != klen
  EXPECT_THROW(TransformerXLScores(V2(g.q, 2, 4), V2(g.k, 3, 4), V2(g.rw, 3, 4), V1(g.u, 4),
                                   V1(g.v, 4), 0.0, TransformerXLMethod::kDirect, V2(out, 2, 3)),
               InvalidArgument);  // scale
  EXPECT_THROW(ParseTransformerXLMethod("shift"), InvalidArgument);
  EXPECT_EQ(ParseTransformerXLMethod("rel_shift"), TransformerXLMethod::kRelShift);
}

}  // namespace
}  // namespace posenc
