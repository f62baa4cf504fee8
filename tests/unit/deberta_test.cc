// DeBERTa: HF golden log buckets and build_relative_position (all 4 cases),
// c2p/p2c indices and scores against a hand-written formula, the
// query_len != key_len build_rpos pitfall, and every bad-input case.
#include "posenc/deberta.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/error.h"
#include "posenc/positions.h"
#include "test_util.h"

namespace posenc {
namespace {

TEST(DebertaBuckets, GoldenAllCases) {
  const auto& cases = test::Golden("deberta_buckets.json")["cases"];
  ASSERT_EQ(cases.size(), 4u);
  int checked = 0;
  for (const auto& c : cases) {
    const std::int64_t bs = c["bucket_size"].get<std::int64_t>();
    const std::int64_t mp = c["max_position"].get<std::int64_t>();
    if (c["function"] == "make_log_bucket_position") {
      const std::int64_t first = c["relative_position_first"].get<std::int64_t>();
      const auto& expected = c["bucket_pos"];
      for (std::size_t r = 0; r < expected.size(); ++r) {
        const std::int64_t rel = first + static_cast<std::int64_t>(r);
        ASSERT_EQ(MakeLogBucketPosition(rel, bs, mp), expected[r].get<std::int64_t>()) << rel;
      }
      ++checked;
      continue;
    }
    const std::int64_t sq = c["query_size"].get<std::int64_t>();
    const std::int64_t sk = c["key_size"].get<std::int64_t>();
    const std::vector<std::int64_t> m = BuildRelativePosition(sq, sk, DebertaBucketParams{bs, mp});
    ASSERT_EQ(m.size(), static_cast<std::size_t>(sq * sk));
    if (c.contains("rel_pos")) {
      const auto& rows = c["rel_pos"][0];
      for (std::int64_t i = 0; i < sq; ++i)
        for (std::int64_t j = 0; j < sk; ++j)
          ASSERT_EQ(m[static_cast<std::size_t>(i * sk + j)], rows[i][j].get<std::int64_t>());
    } else {
      const auto& ids = c["rows_included"];
      const auto& rows = c["rel_pos_rows"];
      ASSERT_EQ(ids.size(), 7u);
      for (std::size_t r = 0; r < ids.size(); ++r) {
        const std::int64_t i = ids[r].get<std::int64_t>();
        for (std::int64_t j = 0; j < sk; ++j)
          ASSERT_EQ(m[static_cast<std::size_t>(i * sk + j)], rows[r][j].get<std::int64_t>())
              << i << "," << j;
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST(DebertaBuckets, OddAndIdentityWithinMid) {
  const DebertaBucketer b(DebertaBucketParams{256, 512});
  for (std::int64_t r = 0; r <= 2000; ++r) {
    EXPECT_EQ(b.Bucket(-r), -b.Bucket(r));
    if (r <= 128) {
      EXPECT_EQ(b.Bucket(r), r);
    }
    if (r > 0) {
      EXPECT_GE(b.Bucket(r), b.Bucket(r - 1));
    }
  }
  // Disabled: the identity (HF -1, -1).
  const DebertaBucketer id(DebertaBucketParams{});
  EXPECT_EQ(id.Bucket(-7777), -7777);
}

TEST(DebertaBuckets, RejectsBadBucketParams) {
  EXPECT_THROW(MakeLogBucketPosition(3, 1, 512), InvalidArgument);    // bucket_size < 2
  EXPECT_THROW(MakeLogBucketPosition(3, 256, 129), InvalidArgument);  // max_position <= mid + 1
  EXPECT_THROW(MakeLogBucketPosition(3, -1, 512), InvalidArgument);   // not enabled
  EXPECT_THROW(MakeLogBucketPosition(kMaxPosition + 1, 256, 512), InvalidArgument);
  EXPECT_NO_THROW(MakeLogBucketPosition(3, 256, 130));
  try {
    DebertaBucketer(DebertaBucketParams{256, 100});
    FAIL();
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("max_position: got 100"), std::string::npos) << msg;
    EXPECT_NE(msg.find("130"), std::string::npos) << msg;
  }
  EXPECT_THROW(BuildRelativePosition(0, 8, DebertaBucketParams{}), InvalidArgument);
  EXPECT_THROW(BuildRelativePosition(8, 0, DebertaBucketParams{}), InvalidArgument);
}

TEST(DebertaParamsTest, ScaleAndValidation) {
  DebertaParams p;
  p.head_dim = 64;
  EXPECT_DOUBLE_EQ(DebertaScale(p), 1.0 / std::sqrt(64.0 * 3.0));
  p.pos_att_type = DebertaPosAttType::kP2C;
  EXPECT_DOUBLE_EQ(DebertaScale(p), 1.0 / std::sqrt(128.0));
  p.pos_att_type = ParseDebertaPosAttType("p2c|c2p");
  EXPECT_EQ(p.pos_att_type, DebertaPosAttType::kC2PAndP2C);
  EXPECT_EQ(DebertaPosAttTypeName(p.pos_att_type), "c2p|p2c");
  EXPECT_THROW(ParseDebertaPosAttType("p2p"), InvalidArgument);
  DebertaParams bad = p;
  bad.max_relative_positions = 0;
  EXPECT_THROW(ValidateDebertaParams(bad), InvalidArgument);
  bad = p;
  bad.head_dim = 0;
  EXPECT_THROW(ValidateDebertaParams(bad), InvalidArgument);
  bad = p;
  bad.position_buckets = 1;
  EXPECT_THROW(ValidateDebertaParams(bad), InvalidArgument);
  bad = p;
  bad.position_buckets = 256;
  bad.max_relative_positions = 129;  // needs >= 130 when bucketing with 256
  EXPECT_THROW(DebertaRelative{bad}, InvalidArgument);
  EXPECT_EQ(p.AttSpan(), 256);
  p.position_buckets = -1;
  EXPECT_EQ(p.AttSpan(), 512);
}

TEST(DebertaRelativeTest, IndicesByHandWithoutBuckets) {
  // No bucketing, att_span = 3: idx = clamp(i - j + 3, 0, 5) for both terms.
  DebertaParams p;
  p.position_buckets = -1;
  p.max_relative_positions = 3;
  p.head_dim = 2;
  const DebertaRelative rel(p);
  EXPECT_EQ(rel.att_span(), 3);
  EXPECT_EQ(rel.C2PIndex(0, 0), 3);
  EXPECT_EQ(rel.C2PIndex(4, 2), 5);
  EXPECT_EQ(rel.C2PIndex(4, 0), 5);  // 7 clamped to 2*3-1
  EXPECT_EQ(rel.C2PIndex(0, 2), 1);
  EXPECT_EQ(rel.C2PIndex(0, 4), 0);  // -1 clamped to 0
  EXPECT_EQ(rel.P2CIndex(0, 2), 1);  // -(2 - 0) + 3
  EXPECT_EQ(rel.P2CIndex(4, 0), 5);
}

TEST(DebertaRelativeTest, ScoresMatchFormulaAndRowForm) {
  DebertaParams p;
  p.position_buckets = 4;  // mid 2, span 4, 8 rows
  p.max_relative_positions = 16;
  p.head_dim = 3;
  const DebertaRelative rel(p);
  const std::int64_t sq = 7, sk = 7, d = 3, rows = 8;
  std::vector<double> q(sq * d), k(sk * d), pk(rows * d), pq(rows * d);
  for (std::size_t e = 0; e < q.size(); ++e) q[e] = std::sin(1.3 * static_cast<double>(e) + 0.2);
  for (std::size_t e = 0; e < k.size(); ++e) k[e] = std::cos(0.7 * static_cast<double>(e) - 0.4);
  for (std::size_t e = 0; e < pk.size(); ++e) pk[e] = 0.1 * static_cast<double>(e) - 1.0;
  for (std::size_t e = 0; e < pq.size(); ++e) pq[e] = std::sin(0.5 * static_cast<double>(e));
  std::vector<double> out(sq * sk);
  rel.Scores(TensorView::Contiguous(q.data(), DType::kFloat64, {sq, d}),
             TensorView::Contiguous(k.data(), DType::kFloat64, {sk, d}),
             TensorView::Contiguous(pk.data(), DType::kFloat64, {rows, d}),
             TensorView::Contiguous(pq.data(), DType::kFloat64, {rows, d}),
             TensorView::Contiguous(out.data(), DType::kFloat64, {sq, sk}), BiasWrite::kOverwrite);
  // bucket(r) for bucket_size 4, max_position 16: |r| <= 2 -> r; else
  // sign * (ceil(ln(|r|/2) / ln(7.5) * 1) + 2) = sign * 3 for 2 < |r| < 16.
  auto bucket = [](std::int64_t r) -> std::int64_t {
    const std::int64_t a = r < 0 ? -r : r;
    if (a <= 2) return r;
    return r < 0 ? -3 : 3;
  };
  const double scale = 1.0 / std::sqrt(3.0 * 3.0);
  std::vector<std::int64_t> kp(sk);
  for (std::int64_t j = 0; j < sk; ++j) kp[j] = j;
  for (std::int64_t i = 0; i < sq; ++i) {
    std::vector<double> row(sk, 0.0);
    rel.AddPositionTermsRow(&q[i * d], i, k.data(), d, kp.data(), sk, pk.data(), pq.data(),
                            row.data());
    for (std::int64_t j = 0; j < sk; ++j) {
      const std::int64_t ci = std::clamp<std::int64_t>(bucket(i - j) + 4, 0, 7);
      const std::int64_t pi = std::clamp<std::int64_t>(-bucket(j - i) + 4, 0, 7);
      ASSERT_EQ(rel.C2PIndex(i, j), ci);
      ASSERT_EQ(rel.P2CIndex(i, j), pi);
      double qk = 0, c2p = 0, p2c = 0;
      for (std::int64_t e = 0; e < d; ++e) {
        qk += q[i * d + e] * k[j * d + e];
        c2p += q[i * d + e] * pk[ci * d + e];
        p2c += k[j * d + e] * pq[pi * d + e];
      }
      EXPECT_NEAR(out[i * sk + j], (qk + c2p + p2c) * scale, 1e-14);
      EXPECT_NEAR(row[j], (c2p + p2c) * scale, 1e-14);
    }
  }
}

TEST(DebertaRelativeTest, QueryLenDiffersFromKeyLenFollowsPaperNotSwappedHF) {
  // position_buckets 8 (mid 4, att_span 8, 16 rows), max_relative_positions
  // 16. Query 0 of 2 against key 10 of 12 (query_len != key_len).
  DebertaParams p;
  p.position_buckets = 8;
  p.max_relative_positions = 16;
  p.head_dim = 4;
  const DebertaRelative rel(p);
  // Ours: bucket(10) with (bucket_size 8, max_position 16):
  //   ceil(ln(10/4) / ln(15/4) * 3) + 4 = ceil(0.9163/1.3218*3 = 2.080) + 4 = 7
  // P2C index = clamp(-7 + 8) = 1.
  EXPECT_EQ(MakeLogBucketPosition(10, 8, 16), 7);
  EXPECT_EQ(rel.P2CIndex(/*query_pos=*/0, /*key_pos=*/10), 1);
  // HF build_rpos(..., max_relative_positions, position_buckets) swaps them:
  // bucket_size 16 (mid 8), max_position 8: ceil(ln(10/8) / ln(7/8) * 7) + 8
  //   = ceil(0.2231 / -0.1335 * 7 = -11.70) + 8 = -11 + 8 = -3, so its p2c
  // index would be clamp(3 + 8) = 11, a different row of Qr.
  const std::int64_t hf_swapped_index = 11;
  EXPECT_NE(rel.P2CIndex(0, 10), hf_swapped_index);
  // Within both mids the two agree (|rel| = 3): index -3 + 8 = 5.
  EXPECT_EQ(rel.P2CIndex(0, 3), 5);
  // And c2p uses the same bucketing: bucket(0 - 10) = -7 -> clamp(1).
  EXPECT_EQ(rel.C2PIndex(0, 10), 1);
  // The score of that pair uses Qr row 1 (not 11).
  std::vector<double> q(4, 0.0), k(12 * 4, 0.0), pq(16 * 4, 0.0), out(12, 0.0);
  k[10 * 4 + 0] = 1.0;
  pq[1 * 4 + 0] = 2.0;   // row 1
  pq[11 * 4 + 0] = 5.0;  // row 11 (the swapped index)
  std::vector<std::int64_t> kp(12);
  for (std::int64_t j = 0; j < 12; ++j) kp[j] = j;
  DebertaParams only_p2c = p;
  only_p2c.pos_att_type = DebertaPosAttType::kP2C;
  const DebertaRelative rp(only_p2c);
  rp.AddPositionTermsRow(q.data(), 0, k.data(), 4, kp.data(), 12, nullptr, pq.data(), out.data());
  EXPECT_DOUBLE_EQ(out[10], 2.0 / std::sqrt(4.0 * 2.0));
}

TEST(DebertaRelativeTest, ScoresRejectMismatchedShapes) {
  DebertaParams p;
  p.position_buckets = 4;
  p.max_relative_positions = 16;
  p.head_dim = 3;
  const DebertaRelative rel(p);
  std::vector<double> q(4 * 3), k(5 * 3), k2(5 * 2), pk(8 * 3), pk_bad(7 * 3), out(4 * 5);
  auto v = [](std::vector<double>& b, std::int64_t r, std::int64_t c) {
    return TensorView::Contiguous(b.data(), DType::kFloat64, {r, c});
  };
  EXPECT_NO_THROW(rel.Scores(v(q, 4, 3), v(k, 5, 3), v(pk, 8, 3), v(pk, 8, 3), v(out, 4, 5),
                             BiasWrite::kOverwrite));
  EXPECT_THROW(rel.Scores(v(q, 4, 3), v(k2, 5, 2), v(pk, 8, 3), v(pk, 8, 3), v(out, 4, 5),
                          BiasWrite::kOverwrite),
               InvalidArgument);  // mismatched D
  EXPECT_THROW(rel.Scores(v(q, 4, 3), v(k, 5, 3), v(pk_bad, 7, 3), v(pk, 8, 3), v(out, 4, 5),
                          BiasWrite::kOverwrite),
               InvalidArgument);  // wrong table rows
  EXPECT_THROW(rel.Scores(v(q, 4, 3), v(k, 5, 3), v(pk, 8, 3), v(pk, 8, 3), v(out, 5, 4),
                          BiasWrite::kOverwrite),
               InvalidArgument);  // wrong out shape
  EXPECT_THROW(rel.Scores(TensorView{}, v(k, 5, 3), v(pk, 8, 3), v(pk, 8, 3), v(out, 4, 5),
                          BiasWrite::kOverwrite),
               InvalidArgument);  // empty q
}

// A 65536 x 65536 int64 matrix (32 GiB) is refused before allocating.
TEST(DebertaLimits, RelativePositionMatrixSizeIsBounded) {
  const DebertaBucketParams p{256, 512};
  try {
    (void)BuildRelativePosition(65536, 65536, p);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("query_size * key_size: got 65536 * 65536"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(BuildRelativePosition(3, 65536, p).size(), std::size_t{3} * 65536);
}

}  // namespace
}  // namespace posenc
