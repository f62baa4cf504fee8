// Multi-stream RoPE (M-RoPE, interleaved M-RoPE, 2-D axial) and xPos
// (posenc/rope_multimodal.h): reduction to plain RoPE, stream assignment,
// relative-position properties, and one test per bad input.
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/error.h"
#include "posenc/rope.h"
#include "posenc/rope_multimodal.h"
#include "test_util.h"

namespace posenc {
namespace {

const RopeNumerics kBoth[] = {RopeNumerics::kHF, RopeNumerics::kAccurate};

std::vector<float> Input(std::int64_t n, double seed) {
  std::vector<float> x(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    x[static_cast<std::size_t>(i)] =
        static_cast<float>(std::sin(0.37 * static_cast<double>(i) + seed));
  }
  return x;
}

double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - double(b[i])));
  return m;
}

TEST(MRope, EqualStreamsArePlainRope) {
  const std::vector<std::int64_t> ids = {0, 1, 2, 7, 100, 4095, 131071};
  const auto n = static_cast<std::int64_t>(ids.size());
  for (RopeNumerics num : kBoth) {
    for (MRopeLayout layout : {MRopeLayout::kSectioned, MRopeLayout::kInterleaved}) {
      SCOPED_TRACE(std::string(RopeNumericsName(num)) + " " + std::string(MRopeLayoutName(layout)));
      const RopeFrequencies f = RopeDefaultFrequencies(128, 1e6, num);
      const MultiStreamRope m = MakeMRope(128, {f.inv_freq, 1.25}, {16, 24, 24}, layout, num);
      StreamPositions sp{{ids.data(), ids.data(), ids.data()}, n};
      std::vector<float> c(static_cast<std::size_t>(n * 128)), s(c.size()), c2(c.size()),
          s2(c.size());
      MultiStreamRopeCosSin(m, sp, TensorView::Contiguous(c.data(), DType::kFloat32, {n, 128}),
                            TensorView::Contiguous(s.data(), DType::kFloat32, {n, 128}));
      RopeParams rp;
      rp.head_dim = 128;
      rp.numerics = num;
      rp.frequencies = {f.inv_freq, 1.25};
      RopeCosSin(rp, Positions::Ids(ids.data(), n), n,
                 TensorView::Contiguous(c2.data(), DType::kFloat32, {n, 128}),
                 TensorView::Contiguous(s2.data(), DType::kFloat32, {n, 128}));
      EXPECT_LE(MaxDiff(c, c2), 2.4e-7);
      EXPECT_LE(MaxDiff(s, s2), 2.4e-7);
      // Apply: q [1, 2 heads, n, 160] (rotary 128 of 160) vs ApplyRope.
      std::vector<float> q = Input(2 * n * 160, 0.11), q2 = q;
      const TensorView qv = TensorView::Contiguous(q.data(), DType::kFloat32, {1, 2, n, 160});
      MultiStreamRope m160 = m;
      m160.head_dim = 160;
      ApplyMultiStreamRope(m160, qv, AttentionLayout::kBHSD, sp);
      rp.head_dim = 160;
      rp.rotary_dim = 128;
      rp.numerics = RopeNumerics::kAccurate;
      if (num == RopeNumerics::kAccurate) {
        // Against rope.h's scalar reference (the executable spec).
        ApplyRope(rp, TensorView::Contiguous(q2.data(), DType::kFloat32, {1, 2, n, 160}),
                  AttentionLayout::kBHSD, Positions::Ids(ids.data(), n), RopeDirection::kForward,
                  nullptr, Context(1, Backend::kScalar));
        EXPECT_LE(MaxDiff(q, q2), 6e-7);
      }
    }
  }
}

TEST(MRope, StreamAssignment) {
  const RopeFrequencies f = RopeDefaultFrequencies(128, 1e6, RopeNumerics::kAccurate);
  const MultiStreamRope sec = MakeMRope(128, f, {16, 24, 24}, MRopeLayout::kSectioned);
  for (int j = 0; j < 64; ++j) EXPECT_EQ(sec.stream[j], j < 16 ? 0 : j < 40 ? 1 : 2) << j;
  const MultiStreamRope il = MakeMRope(128, f, {24, 20, 20}, MRopeLayout::kInterleaved);
  int counts[3] = {0, 0, 0};
  for (int j = 0; j < 64; ++j) ++counts[il.stream[j]];
  EXPECT_EQ(counts[0], 24);
  EXPECT_EQ(counts[1], 20);
  EXPECT_EQ(counts[2], 20);
  EXPECT_EQ(il.stream[0], 0);
  EXPECT_EQ(il.stream[1], 1);
  EXPECT_EQ(il.stream[2], 2);
  EXPECT_EQ(il.stream[58], 1);
  EXPECT_EQ(il.stream[59], 2);
  EXPECT_EQ(il.stream[61], 0);  // 61 % 3 == 1 but 61 >= 3*20
}

TEST(MRope, EachPairReadsItsStream) {
  const RopeFrequencies f = RopeDefaultFrequencies(16, 1e4, RopeNumerics::kAccurate);
  const MultiStreamRope m = MakeMRope(16, f, {2, 3, 3}, MRopeLayout::kSectioned);
  const std::int64_t t[] = {5, 9}, h[] = {3, 1}, w[] = {7, 2};
  std::vector<double> c(2 * 16), s(c.size());
  MultiStreamRopeCosSin(m, StreamPositions{{t, h, w}, 2},
                        TensorView::Contiguous(c.data(), DType::kFloat64, {2, 16}),
                        TensorView::Contiguous(s.data(), DType::kFloat64, {2, 16}));
  for (int r = 0; r < 2; ++r) {
    for (int j = 0; j < 8; ++j) {
      const std::int64_t pos = j < 2 ? t[r] : j < 5 ? h[r] : w[r];
      const double a = static_cast<double>(pos) * f.inv_freq[static_cast<std::size_t>(j)];
      EXPECT_NEAR(c[static_cast<std::size_t>(r * 16 + j)], std::cos(a), 1e-15);
      EXPECT_NEAR(c[static_cast<std::size_t>(r * 16 + j + 8)], std::cos(a), 1e-15);
      EXPECT_NEAR(s[static_cast<std::size_t>(r * 16 + j)], std::sin(a), 1e-15);
    }
  }
}

// <R(p) q, R(p') k> for one head vector, float64 data.
double RotatedDot(const MultiStreamRope& m, std::int64_t d, const std::int64_t* pq,
                  const std::int64_t* pk) {
  std::vector<double> q(static_cast<std::size_t>(d)), k(q.size());
  for (std::int64_t i = 0; i < d; ++i) {
    q[static_cast<std::size_t>(i)] = std::sin(0.3 * static_cast<double>(i) + 0.2);
    k[static_cast<std::size_t>(i)] = std::cos(0.7 * static_cast<double>(i) + 0.1);
  }
  const std::int64_t qa[] = {pq[0]}, qb[] = {pq[1]}, ka[] = {pk[0]}, kb[] = {pk[1]};
  ApplyMultiStreamRope(m, TensorView::Contiguous(q.data(), DType::kFloat64, {1, 1, 1, d}),
                       AttentionLayout::kBSHD, StreamPositions{{qa, qb, nullptr}, 1});
  ApplyMultiStreamRope(m, TensorView::Contiguous(k.data(), DType::kFloat64, {1, 1, 1, d}),
                       AttentionLayout::kBSHD, StreamPositions{{ka, kb, nullptr}, 1});
  return std::inner_product(q.begin(), q.end(), k.begin(), 0.0);
}

TEST(AxialRope2D, FrequenciesAndRelativeInBothAxes) {
  const MultiStreamRope m = MakeAxialRope2D(64, 64, 10000.0);
  ASSERT_EQ(m.inv_freq.size(), 32u);
  for (int k = 0; k < 16; ++k) {
    EXPECT_NEAR(m.inv_freq[k], std::pow(10000.0, -2.0 * k / 32.0), 1e-15);
    EXPECT_EQ(m.inv_freq[k + 16], m.inv_freq[k]);
    EXPECT_EQ(m.stream[k], 0);
    EXPECT_EQ(m.stream[k + 16], 1);
  }
  const std::int64_t a[] = {3, 10}, b[] = {1, 4}, a2[] = {12, 30}, b2[] = {10, 24};
  EXPECT_NEAR(RotatedDot(m, 64, a, b), RotatedDot(m, 64, a2, b2), 1e-12);
  const std::int64_t c2[] = {10, 25};  // column offset differs: dot changes
  EXPECT_GT(std::abs(RotatedDot(m, 64, a, b) - RotatedDot(m, 64, a2, c2)), 1e-6);
}

TEST(MultiStreamApply, InverseUndoesForwardAndOutOfPlaceKeepsTail) {
  const MultiStreamRope m = MakeMRope(40, RopeDefaultFrequencies(32, 1e4, RopeNumerics::kAccurate),
                                      {4, 6, 6}, MRopeLayout::kSectioned);
  const std::int64_t t[] = {0, 17, 300}, h[] = {2, 5, 9}, w[] = {1, 8, 4};
  const StreamPositions sp{{t, h, w}, 3};
  const std::vector<double> x0 = [] {
    std::vector<double> v(2 * 3 * 40);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.5 * static_cast<double>(i));
    return v;
  }();
  std::vector<double> x = x0, out(x.size(), -7.0);
  const TensorView xv = TensorView::Contiguous(x.data(), DType::kFloat64, {1, 3, 2, 40});
  const TensorView ov = TensorView::Contiguous(out.data(), DType::kFloat64, {1, 3, 2, 40});
  ApplyMultiStreamRope(m, xv, AttentionLayout::kBSHD, sp, RopeDirection::kForward, &ov);
  EXPECT_EQ(x, x0);  // input untouched
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (i % 40 >= 32) {
      EXPECT_EQ(out[i], x0[i]);
    }
  }
  ApplyMultiStreamRope(m, xv, AttentionLayout::kBSHD, sp);  // in place == out of place
  EXPECT_EQ(x, out);
  ApplyMultiStreamRope(m, xv, AttentionLayout::kBSHD, sp, RopeDirection::kInverse);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], x0[i], 1e-14);
}

TEST(XPos, ScalesDecayWithRelativeDistance) {
  const std::vector<double> zeta = XPosZeta(8);
  EXPECT_DOUBLE_EQ(zeta[0], 0.4 * 8 / (1.4 * 8));
  EXPECT_DOUBLE_EQ(zeta[3], (6 + 0.4 * 8) / (1.4 * 8));
  const std::int64_t ids[] = {0, 100, 512, 1024};
  std::vector<double> q(4 * 4), k(q.size());
  XPosScales({8, 512.0, 512}, ids, 4, TensorView::Contiguous(q.data(), DType::kFloat64, {4, 4}),
             TensorView::Contiguous(k.data(), DType::kFloat64, {4, 4}));
  for (int j = 0; j < 4; ++j) {
    EXPECT_DOUBLE_EQ(q[2 * 4 + j], 1.0);  // at the center
    EXPECT_NEAR(q[0 * 4 + j] * k[0 * 4 + j], 1.0, 1e-15);
    // q(m) * k(n) = zeta^((m - n)/scale_base)
    EXPECT_NEAR(q[3 * 4 + j] * k[1 * 4 + j], std::pow(zeta[j], (1024.0 - 100.0) / 512.0), 1e-14);
    EXPECT_LT(q[3 * 4 + j], 1.0);  // zeta < 1: later queries shrink
  }
}

// ------------------------------------------------------------- bad input --

template <typename F>
void ExpectBad(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error for " << needle;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

const RopeFrequencies kF16 = RopeDefaultFrequencies(16, 1e4, RopeNumerics::kAccurate);

TEST(MultimodalBadInput, SectionSize) {
  ExpectBad([] { MakeMRope(16, kF16, {4, 4}, MRopeLayout::kSectioned); }, "mrope_section size");
}
TEST(MultimodalBadInput, SectionSum) {
  ExpectBad([] { MakeMRope(16, kF16, {2, 2, 2}, MRopeLayout::kSectioned); }, "mrope_section sum");
}
TEST(MultimodalBadInput, SectionNegative) {
  ExpectBad([] { MakeMRope(16, kF16, {10, -1, -1}, MRopeLayout::kSectioned); }, "mrope_section[1]");
}
TEST(MultimodalBadInput, AxialRotaryDim) {
  ExpectBad([] { MakeAxialRope2D(64, 30, 1e4); }, "rotary_dim");
}
TEST(MultimodalBadInput, MissingStream) {
  const MultiStreamRope m = MakeMRope(16, kF16, {2, 3, 3}, MRopeLayout::kSectioned);
  const std::int64_t t[] = {1};
  std::vector<float> c(16), s(16);
  ExpectBad(
      [&] {
        MultiStreamRopeCosSin(m, StreamPositions{{t, t, nullptr}, 1},
                              TensorView::Contiguous(c.data(), DType::kFloat32, {1, 16}),
                              TensorView::Contiguous(s.data(), DType::kFloat32, {1, 16}));
      },
      "positions.ids[2]");
}
TEST(MultimodalBadInput, NegativePosition) {
  const MultiStreamRope m = MakeMRope(16, kF16, {2, 3, 3}, MRopeLayout::kSectioned);
  const std::int64_t t[] = {1}, h[] = {-4};
  std::vector<float> c(16), s(16);
  ExpectBad(
      [&] {
        MultiStreamRopeCosSin(m, StreamPositions{{t, h, t}, 1},
                              TensorView::Contiguous(c.data(), DType::kFloat32, {1, 16}),
                              TensorView::Contiguous(s.data(), DType::kFloat32, {1, 16}));
      },
      "positions.ids[1]");
}
TEST(MultimodalBadInput, CosShape) {
  const MultiStreamRope m = MakeMRope(16, kF16, {2, 3, 3}, MRopeLayout::kSectioned);
  const std::int64_t t[] = {1};
  std::vector<float> c(16), s(16);
  ExpectBad(
      [&] {
        MultiStreamRopeCosSin(m, StreamPositions{{t, t, t}, 1},
                              TensorView::Contiguous(c.data(), DType::kFloat32, {2, 8}),
                              TensorView::Contiguous(s.data(), DType::kFloat32, {1, 16}));
      },
      "cos.shape");
}
TEST(MultimodalBadInput, ApplyHeadDimMismatch) {
  const MultiStreamRope m = MakeMRope(16, kF16, {2, 3, 3}, MRopeLayout::kSectioned);
  const std::int64_t t[] = {1};
  std::vector<float> x(32);
  ExpectBad(
      [&] {
        ApplyMultiStreamRope(m, TensorView::Contiguous(x.data(), DType::kFloat32, {1, 1, 1, 32}),
                             AttentionLayout::kBSHD, StreamPositions{{t, t, t}, 1});
      },
      "x head_dim");
}
TEST(MultimodalBadInput, ApplyOutOverlapsInput) {
  const MultiStreamRope m = MakeMRope(16, kF16, {2, 3, 3}, MRopeLayout::kSectioned);
  const std::int64_t t[] = {1};
  std::vector<float> x(16);
  const TensorView v = TensorView::Contiguous(x.data(), DType::kFloat32, {1, 1, 1, 16});
  ExpectBad(
      [&] {
        ApplyMultiStreamRope(m, v, AttentionLayout::kBSHD, StreamPositions{{t, t, t}, 1},
                             RopeDirection::kForward, &v);
      },
      "out");
}
TEST(MultimodalBadInput, StreamIndexOutOfRange) {
  MultiStreamRope m = MakeAxialRope2D(16, 16, 1e4);
  m.stream[0] = 2;
  ExpectBad([&] { ValidateMultiStreamRope(m); }, "stream[0]");
}
TEST(MultimodalBadInput, XPosScaleBase) {
  const std::int64_t ids[] = {0};
  std::vector<double> q(4), k(4);
  ExpectBad(
      [&] {
        XPosScales({8, 0.0, 0}, ids, 1, TensorView::Contiguous(q.data(), DType::kFloat64, {1, 4}),
                   TensorView::Contiguous(k.data(), DType::kFloat64, {1, 4}));
      },
      "scale_base");
}
TEST(MultimodalBadInput, XPosOddDim) {
  ExpectBad([] { XPosZeta(7); }, "rotary_dim");
}
TEST(MultimodalBadInput, LayoutName) {
  ExpectBad([] { ParseMRopeLayout("diagonal"); }, "sectioned, interleaved");
}

}  // namespace
}  // namespace posenc
