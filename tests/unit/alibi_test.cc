// ALiBi: slopes vs the paper and Bloom (tests/golden/alibi.json), bias tiles,
// Bloom's key-index tensor, bad input.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/alibi.h"
#include "posenc/error.h"
#include "test_util.h"

namespace posenc {
namespace {

std::vector<double> Slopes(std::int64_t heads, AlibiSlopeConvention c) {
  AlibiParams p;
  p.num_heads = heads;
  p.convention = c;
  return AlibiSlopes(p);
}

double Ulp32(double x) {
  const float f = static_cast<float>(x);
  return static_cast<double>(std::nextafter(f, std::numeric_limits<float>::infinity())) - f;
}

TEST(AlibiSlopes, GoldenPaperAllHeadCounts) {
  const auto& cases = test::Golden("alibi.json")["slopes"];
  ASSERT_EQ(cases.size(), 64u);
  for (const auto& c : cases) {
    const auto heads = c["num_heads"].get<std::int64_t>();
    const auto ours = Slopes(heads, AlibiSlopeConvention::kReference);
    const auto f64 = test::ToDoubles(c["paper_slopes_float64"]);
    const auto f32 = test::ToDoubles(c["paper_slopes_float32"]);
    ASSERT_EQ(ours.size(), f64.size()) << heads;
    for (std::size_t h = 0; h < ours.size(); ++h) {
      // The paper multiplies start * ratio**i in float64 (up to 1.6e-15 relative
      // drift from the exact 2^(-8k/n) measured over all 64 cases); ours is exp2.
      EXPECT_NEAR(ours[h], f64[h], 2e-15 * f64[h]) << "heads " << heads << " h " << h;
      EXPECT_NEAR(static_cast<float>(ours[h]), f32[h], 2.5e-7 * f32[h])
          << "heads " << heads << " h " << h;
    }
  }
}

TEST(AlibiSlopes, GoldenBloomAllHeadCounts) {
  for (const auto& c : test::Golden("alibi.json")["slopes"]) {
    const auto heads = c["num_heads"].get<std::int64_t>();
    const auto bloom = test::ToDoubles(c["bloom_slopes"]);
    const auto exact = Slopes(heads, AlibiSlopeConvention::kReference);
    const auto b32 = Slopes(heads, AlibiSlopeConvention::kBloomFloat32);
    ASSERT_EQ(b32.size(), bloom.size());
    for (std::size_t h = 0; h < bloom.size(); ++h) {
      EXPECT_NEAR(exact[h], bloom[h], 4e-6 * bloom[h]) << "heads " << heads << " h " << h;
      EXPECT_LE(std::fabs(b32[h] - bloom[h]), Ulp32(bloom[h])) << "heads " << heads << " h " << h;
      EXPECT_EQ(static_cast<double>(static_cast<float>(b32[h])), b32[h]);  // float32 values
    }
  }
}

TEST(AlibiSlopes, MaxBiasGeneralisesGgml) {
  AlibiParams p;
  p.num_heads = 12;  // n = 8
  p.max_bias = 5.0;
  const auto s = AlibiSlopes(p);
  for (int h = 0; h < 8; ++h) EXPECT_DOUBLE_EQ(s[h], std::pow(std::exp2(-5.0 / 8), h + 1));
  for (int h = 8; h < 12; ++h) {
    EXPECT_DOUBLE_EQ(s[h], std::pow(std::exp2(-2.5 / 8), 2 * (h - 8) + 1));
  }
}

TEST(AlibiSlopes, ExplicitSlopesPassThrough) {
  AlibiParams p;
  p.num_heads = 3;
  p.slopes = {0.5, 0.0, 2.0};
  EXPECT_EQ(AlibiSlopes(p), p.slopes);
}

TEST(AlibiBias, GoldenBloomTensors) {
  for (const auto& c : test::Golden("alibi.json")["bloom_alibi_tensors"]) {
    const auto heads = c["num_heads"].get<std::int64_t>();
    std::vector<std::int64_t> mask;
    for (const auto& row : c["attention_mask"]) {
      for (const auto& m : row) mask.push_back(m.get<std::int64_t>());
    }
    const auto batch = static_cast<std::int64_t>(c["attention_mask"].size());
    const std::int64_t seq = static_cast<std::int64_t>(mask.size()) / batch;
    const auto expected = test::FlattenDoubles(c["alibi"]);
    std::vector<float> out(static_cast<std::size_t>(batch * heads * seq));
    BloomAlibiTensor(Slopes(heads, AlibiSlopeConvention::kBloomFloat32), mask.data(), batch, seq,
                     TensorView::Contiguous(out.data(), DType::kFloat32, {batch * heads, 1, seq}));
    ASSERT_EQ(out.size(), expected.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      EXPECT_LE(std::fabs(out[i] - expected[i]), Ulp32(expected[i])) << "element " << i;
    }
  }
}

TEST(AlibiBias, CausalAndSymmetricBottomRight) {
  const std::vector<double> slopes = {0.5, 0.25};
  AlibiGeometry g{2, 4, AlibiForm::kCausal};  // queries at positions 2, 3
  std::vector<double> out(2 * 2 * 4);
  AlibiBiasMatrix(slopes, g, TensorView::Contiguous(out.data(), DType::kFloat64, {2, 2, 4}));
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> head1 = {-0.5, -0.25, 0.0, -inf, -0.75, -0.5, -0.25, 0.0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[8 + i], head1[i]) << i;
  g.form = AlibiForm::kSymmetric;
  AlibiBiasMatrix(slopes, g, TensorView::Contiguous(out.data(), DType::kFloat64, {2, 2, 4}));
  EXPECT_EQ(out[3], -0.5);             // head 0, query pos 2, key 3: -0.5*|2-3|
  EXPECT_EQ(out[4], -1.5);             // head 0, query pos 3, key 0
  EXPECT_FALSE(std::signbit(out[2]));  // the diagonal is +0, not -0
}

TEST(AlibiBias, TileEqualsMatrixSliceAndDependsOnlyOnDistance) {
  const auto slopes = Slopes(6, AlibiSlopeConvention::kReference);
  const AlibiGeometry g{37, 53, AlibiForm::kSymmetric};
  std::vector<double> full(6 * 37 * 53);
  AlibiBiasMatrix(slopes, g, TensorView::Contiguous(full.data(), DType::kFloat64, {6, 37, 53}),
                  Context(2));
  // A strided float32 tile (transposed storage) of head 4.
  const AlibiTile tile{4, 5, 17, 30, 51};
  std::vector<float> t(12 * 21);
  AlibiBiasTile(slopes, g, tile, TensorView::Strided(t.data(), DType::kFloat32, {12, 21}, {1, 12}));
  for (std::int64_t r = 0; r < 12; ++r) {
    for (std::int64_t c = 0; c < 21; ++c) {
      const double want = full[static_cast<std::size_t>((4 * 37 + 5 + r) * 53 + 30 + c)];
      EXPECT_EQ(t[static_cast<std::size_t>(c * 12 + r)], static_cast<float>(want));
    }
  }
  // Toeplitz: depends only on i - j.
  for (std::int64_t h = 0; h < 6; ++h) {
    for (std::int64_t i = 1; i < 37; ++i) {
      for (std::int64_t j = 1; j < 53; ++j) {
        EXPECT_EQ(full[static_cast<std::size_t>((h * 37 + i) * 53 + j)],
                  full[static_cast<std::size_t>((h * 37 + i - 1) * 53 + j - 1)]);
      }
    }
  }
}

TEST(AlibiBias, MaskedCellsAreMinusInfinityInHalf) {
  std::vector<Float16> out(4);
  AlibiBiasMatrix({1.0}, AlibiGeometry{2, 2, AlibiForm::kCausal},
                  TensorView::Contiguous(out.data(), DType::kFloat16, {1, 2, 2}));
  EXPECT_EQ(F16ToFloat(out[1]), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(F16ToFloat(out[2]), -1.0f);
}

void ExpectInvalid(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected InvalidArgument mentioning " << needle;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(AlibiBadInput, ZeroHeads) {
  ExpectInvalid([] { (void)Slopes(0, AlibiSlopeConvention::kReference); }, "num_heads: got 0");
}

TEST(AlibiBadInput, NaNMaxBias) {
  AlibiParams p{4, std::nan(""), AlibiSlopeConvention::kReference, {}};
  ExpectInvalid([&] { (void)AlibiSlopes(p); }, "max_bias");
}

TEST(AlibiBadInput, NonPositiveMaxBias) {
  AlibiParams p{4, 0.0, AlibiSlopeConvention::kReference, {}};
  ExpectInvalid([&] { (void)AlibiSlopes(p); }, "max_bias: got 0");
  p.max_bias = -8;
  ExpectInvalid([&] { (void)AlibiSlopes(p); }, "max_bias: got -8");
}

TEST(AlibiBadInput, UserSlopesOfWrongLength) {
  AlibiParams p{4, 8.0, AlibiSlopeConvention::kReference, {0.5, 0.25}};
  ExpectInvalid([&] { (void)AlibiSlopes(p); }, "slopes.size(): got 2");
}

TEST(AlibiBadInput, NegativeOrNaNUserSlope) {
  AlibiParams p{2, 8.0, AlibiSlopeConvention::kReference, {0.5, -1.0}};
  // The whole message of RequireAt: name[index], the value, what is allowed.
  ExpectInvalid([&] { (void)AlibiSlopes(p); }, "slopes[1]: got -1, expected a finite slope >= 0");
  p.slopes[1] = std::nan("");
  ExpectInvalid([&] { (void)AlibiSlopes(p); }, "slopes[1]");
}

TEST(AlibiBadInput, GeometryAndTile) {
  std::vector<double> out(64);
  auto view = TensorView::Contiguous(out.data(), DType::kFloat64, {1, 4, 4});
  ExpectInvalid(
      [&] {
        AlibiBiasMatrix({1.0}, AlibiGeometry{0, 4, AlibiForm::kCausal}, view);
      },
      "query_len: got 0");
  ExpectInvalid(
      [&] {
        AlibiBiasMatrix({1.0}, AlibiGeometry{5, 4, AlibiForm::kCausal}, view);
      },
      "key_len: got 4");
  ExpectInvalid(
      [&] {
        AlibiBiasMatrix({1.0, 0.5}, AlibiGeometry{4, 4, AlibiForm::kCausal}, view);
      },
      "out");
  auto tile_view = TensorView::Contiguous(out.data(), DType::kFloat64, {2, 2});
  ExpectInvalid(
      [&] {
        AlibiBiasTile({1.0}, AlibiGeometry{4, 4, AlibiForm::kCausal}, AlibiTile{1, 0, 2, 0, 2},
                      tile_view);
      },
      "tile.head: got 1");
  ExpectInvalid(
      [&] {
        AlibiBiasTile({1.0}, AlibiGeometry{4, 4, AlibiForm::kCausal}, AlibiTile{0, 3, 5, 0, 2},
                      tile_view);
      },
      "tile rows");
  ExpectInvalid(
      [&] {
        AlibiBiasTile({1.0}, AlibiGeometry{4, 4, AlibiForm::kCausal}, AlibiTile{0, 0, 2, 2, 2},
                      tile_view);
      },
      "tile cols");
}

TEST(AlibiBadInput, BloomMaskNotBinary) {
  const std::int64_t mask[3] = {1, 2, 1};
  std::vector<float> out(3);
  ExpectInvalid(
      [&] {
        BloomAlibiTensor({1.0}, mask, 1, 3,
                         TensorView::Contiguous(out.data(), DType::kFloat32, {1, 1, 3}));
      },
      "attention_mask[1]: got 2");
}

TEST(AlibiNames, RoundTrip) {
  EXPECT_EQ(ParseAlibiForm(AlibiFormName(AlibiForm::kSymmetric)), AlibiForm::kSymmetric);
  EXPECT_EQ(ParseAlibiSlopeConvention("bloom_float32"), AlibiSlopeConvention::kBloomFloat32);
  ExpectInvalid([] { (void)ParseAlibiForm("both"); }, "form: got both");
}

}  // namespace
}  // namespace posenc
