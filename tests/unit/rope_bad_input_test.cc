// RoPE core (posenc/rope.h): one test per bad input (the golden fixtures
// and the properties are in rope_test.cc).
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/error.h"
#include "posenc/rope.h"
#include "rope_test_util.h"
#include "test_util.h"

namespace posenc {
namespace {

using test::MakeInput;
using test::Params;
using test::Tensor4;

// ------------------------------------------------------------- bad input --

template <typename F>
void ExpectInvalid(F&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no exception; expected InvalidArgument naming '" << needle << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

RopeParams Good() { return Params(8, 0, RopePairing::kHalfSplit, RopeNumerics::kAccurate); }

TEST(RopeBadInput, HeadDimTooSmall) {
  RopeParams p = Good();
  p.head_dim = 1;
  ExpectInvalid([&] { ValidateRopeParams(p); }, "head_dim: got 1");
}

TEST(RopeBadInput, RotaryDimOdd) {
  RopeParams p = Good();
  p.rotary_dim = 7;
  ExpectInvalid([&] { ValidateRopeParams(p); },
                "rotary_dim: got 7, expected 0 (meaning head_dim) or an even");
}

TEST(RopeBadInput, RotaryDimZeroOrNegative) {
  ExpectInvalid([] { RopeDefaultFrequencies(0, 1e4, RopeNumerics::kHF); }, "rotary_dim: got 0");
  RopeParams p = Good();
  p.rotary_dim = -2;
  ExpectInvalid([&] { ValidateRopeParams(p); }, "rotary_dim: got -2");
}

TEST(RopeBadInput, RotaryDimTooLarge) {
  RopeParams p = Good();
  p.rotary_dim = 10;
  ExpectInvalid(
      [&] { ValidateRopeParams(p); },
      "rotary_dim: got 10, expected 0 (meaning head_dim) or an even number in [2, head_dim=8]");
}

TEST(RopeBadInput, ThetaNaN) {
  RopeParams p = Good();
  p.theta = std::nan("");
  ExpectInvalid([&] { ValidateRopeParams(p); }, "theta: got nan");
}

TEST(RopeBadInput, ThetaNegative) {
  ExpectInvalid([] { RopeDefaultFrequencies(8, -10000.0, RopeNumerics::kAccurate); },
                "theta: got -10000");
}

TEST(RopeBadInput, ThetaZero) {
  RopeParams p = Good();
  p.theta = 0.0;
  ExpectInvalid([&] { ValidateRopeParams(p); }, "theta: got 0, expected a finite base > 1");
}

TEST(RopeBadInput, ThetaAtMostOne) {
  RopeParams p = Good();
  p.theta = 1.0;
  ExpectInvalid([&] { ValidateRopeParams(p); }, "theta: got 1,");
}

TEST(RopeBadInput, InvFreqWrongLength) {
  RopeParams p = Good();
  p.frequencies.inv_freq = {1.0, 0.1, 0.01};
  ExpectInvalid([&] { ValidateRopeParams(p); },
                "frequencies.inv_freq.size(): got 3, expected rotary_dim/2 = 4");
}

TEST(RopeBadInput, InvFreqNonFinite) {
  RopeParams p = Good();
  p.frequencies.inv_freq = {1.0, 0.1, std::numeric_limits<double>::infinity(), 0.001};
  ExpectInvalid([&] { ValidateRopeParams(p); }, "frequencies.inv_freq[2]: got inf");
}

TEST(RopeBadInput, InvFreqNegative) {
  RopeParams p = Good();
  p.frequencies.inv_freq = {1.0, -0.1, 0.01, 0.001};
  ExpectInvalid([&] { ValidateRopeParams(p); }, "frequencies.inv_freq[1]: got -0.1");
}

TEST(RopeBadInput, AttentionFactorNonFinite) {
  RopeParams p = Good();
  p.frequencies.attention_factor = std::nan("");
  ExpectInvalid([&] { ValidateRopeParams(p); }, "frequencies.attention_factor: got nan");
}

TEST(RopeBadInput, AttentionFactorNotPositive) {
  RopeParams p = Good();
  p.frequencies.attention_factor = 0.0;
  ExpectInvalid([&] { ValidateRopeParams(p); }, "frequencies.attention_factor: got 0");
}

TEST(RopeBadInput, NegativePositionInTable) {
  const std::int64_t ids[] = {0, -1};
  float c[16], s[16];
  ExpectInvalid(
      [&] {
        RopeCosSin(Good(), Positions::Ids(ids, 2), 2,
                   TensorView::Contiguous(c, DType::kFloat32, {2, 8}),
                   TensorView::Contiguous(s, DType::kFloat32, {2, 8}));
      },
      "positions[1]: got -1, expected a position in [0, 16777215]");
}

TEST(RopeBadInput, NegativeOffsetForward) {
  Tensor4 x(DType::kFloat32, 1, 2, 1, 8);
  ExpectInvalid([&] { ApplyRope(Good(), x.View(), AttentionLayout::kBSHD, Positions::Offset(-1)); },
                "positions.offset: got -1");
}

TEST(RopeBadInput, NegativeIdForwardLeavesXUntouched) {
  Tensor4 x = MakeInput(DType::kFloat32, AttentionLayout::kBSHD, 1, 1, 3, 8);
  const auto before = x.bytes;
  const std::int64_t ids[] = {0, 1, -5};
  ExpectInvalid(
      [&] { ApplyRope(Good(), x.View(), AttentionLayout::kBSHD, Positions::Ids(ids, 3)); },
      "positions[2]: got -5");
  EXPECT_EQ(x.bytes, before);
}

TEST(RopeBadInput, PositionPast2Pow24) {
  Tensor4 x(DType::kFloat32, 1, 2, 1, 8);
  ExpectInvalid(
      [&] { ApplyRope(Good(), x.View(), AttentionLayout::kBSHD, Positions::Offset(kMaxPosition)); },
      "positions.offset: got 16777215");
}

TEST(RopeBadInput, PositionIdsCountMismatch) {
  Tensor4 x(DType::kFloat32, 2, 3, 1, 8);
  const std::int64_t ids[] = {0, 1, 2, 3};
  ExpectInvalid(
      [&] { ApplyRope(Good(), x.View(), AttentionLayout::kBSHD, Positions::Ids(ids, 4)); },
      "positions.count: got 4");
}

// fuzz_rope_views (2026-12-02): an out-of-place output whose seq dimension
// has size 1 and a stride near 2^62 reached the kernel, whose stride-to-bytes
// product overflowed int64 (UBSan). Refused at the boundary now; the input is
// not touched and nothing is written.
TEST(RopeBadInput, HugeStrideOfASizeOneOutputDimension) {
  Tensor4 x = MakeInput(DType::kBFloat16, AttentionLayout::kBSHD, 1, 1, 2, 8);
  const auto before = x.bytes;
  std::vector<std::uint16_t> out(16, 0x7fc0);
  const TensorView o = TensorView::Strided(out.data(), DType::kBFloat16, {1, 1, 2, 8},
                                           {16, 6484326861776993725, 8, 1});
  ExpectInvalid(
      [&] {
        ApplyRope(Good(), x.View(), AttentionLayout::kBSHD, Positions::Offset(0),
                  RopeDirection::kForward, &o);
      },
      "out.strides[1]: got 6484326861776993725");
  EXPECT_EQ(x.bytes, before);
  EXPECT_EQ(out, std::vector<std::uint16_t>(16, 0x7fc0));
}

TEST(RopeBadInput, QKBatchMismatch) {
  Tensor4 q(DType::kFloat32, 2, 3, 4, 8), k(DType::kFloat32, 1, 3, 2, 8);
  ExpectInvalid(
      [&] {
        ApplyRopeQK(Good(), q.View(), k.View(), AttentionLayout::kBSHD, Positions::Offset(0));
      },
      "k.shape[0] (batch): got 1, expected q's batch (2)");
}

TEST(RopeBadInput, QKSeqMismatch) {
  Tensor4 q(DType::kFloat32, 1, 4, 3, 8), k(DType::kFloat32, 1, 2, 5, 8);
  ExpectInvalid(
      [&] {
        ApplyRopeQK(Good(), q.View(), k.View(), AttentionLayout::kBHSD, Positions::Offset(0));
      },
      "k.shape[2] (seq): got 5, expected q's seq (3)");
}

TEST(RopeBadInput, QKHeadDimMismatch) {
  Tensor4 q(DType::kFloat32, 1, 3, 4, 8), k(DType::kFloat32, 1, 3, 2, 16);
  ExpectInvalid(
      [&] {
        ApplyRopeQK(Good(), q.View(), k.View(), AttentionLayout::kBSHD, Positions::Offset(0));
      },
      "k.shape[3] (head_dim): got 16, expected params.head_dim (8)");
}

TEST(RopeBadInput, QKOverlap) {
  std::vector<float> buf(128);
  const TensorView q = TensorView::Contiguous(buf.data(), DType::kFloat32, {1, 4, 2, 8});
  const TensorView k = TensorView::Contiguous(buf.data() + 8, DType::kFloat32, {1, 4, 2, 8});
  ExpectInvalid([&] { ApplyRopeQK(Good(), q, k, AttentionLayout::kBSHD, Positions::Offset(0)); },
                "q: overlaps k");
}

TEST(RopeBadInput, EmptyTensor) {
  Tensor4 x(DType::kFloat32, 1, 1, 1, 8);
  TensorView v = x.View();
  v.shape[1] = 0;
  ExpectInvalid([&] { ApplyRope(Good(), v, AttentionLayout::kBSHD, Positions::Offset(0)); },
                "x.shape[1]: got 0, expected a size >= 1 (empty tensors are not accepted)");
}

TEST(RopeBadInput, OutOverlapsX) {
  Tensor4 x(DType::kFloat32, 1, 2, 2, 8);
  const TensorView out = TensorView::Contiguous(x.bytes.data() + 4, DType::kFloat32, {1, 2, 2, 8});
  ExpectInvalid(
      [&] {
        ApplyRope(Good(), x.View(), AttentionLayout::kBSHD, Positions::Offset(0),
                  RopeDirection::kForward, &out);
      },
      "out: overlaps x");
}

TEST(RopeBadInput, WrongRank) {
  float buf[16];
  const TensorView v = TensorView::Contiguous(buf, DType::kFloat32, {2, 8});
  ExpectInvalid([&] { ApplyRope(Good(), v, AttentionLayout::kBSHD, Positions::Offset(0)); },
                "x.rank: got 2, expected rank 4");
}

TEST(RopeBadInput, OutDTypeMismatch) {
  Tensor4 x(DType::kFloat32, 1, 2, 2, 8), out(DType::kBFloat16, 1, 2, 2, 8);
  const TensorView ov = out.View();
  ExpectInvalid(
      [&] {
        ApplyRope(Good(), x.View(), AttentionLayout::kBSHD, Positions::Offset(0),
                  RopeDirection::kForward, &ov);
      },
      "out.dtype: got bfloat16, expected x's dtype (float32)");
}

TEST(RopeBadInput, OutShapeMismatch) {
  Tensor4 x(DType::kFloat32, 1, 2, 2, 8), out(DType::kFloat32, 1, 2, 1, 8);
  const TensorView ov = out.View();
  ExpectInvalid(
      [&] {
        ApplyRope(Good(), x.View(), AttentionLayout::kBSHD, Positions::Offset(0),
                  RopeDirection::kForward, &ov);
      },
      "out.shape: got [1, 2, 1, 8] float32");
}

TEST(RopeBadInput, XHeadDimMismatch) {
  Tensor4 x(DType::kFloat32, 1, 2, 2, 16);
  ExpectInvalid([&] { ApplyRope(Good(), x.View(), AttentionLayout::kBSHD, Positions::Offset(0)); },
                "x.shape[3] (head_dim): got 16, expected params.head_dim (8)");
}

TEST(RopeBadInput, NullData) {
  TensorView v = TensorView::Contiguous(static_cast<void*>(nullptr), DType::kFloat32, {1, 1, 1, 8});
  ExpectInvalid([&] { ApplyRope(Good(), v, AttentionLayout::kBHSD, Positions::Offset(0)); },
                "x.data");
}

TEST(RopeBadInput, TableShapeWrong) {
  float c[16], s[16];
  ExpectInvalid(
      [&] {
        RopeCosSin(Good(), Positions::Offset(0), 2,
                   TensorView::Contiguous(c, DType::kFloat32, {2, 8}),
                   TensorView::Contiguous(s, DType::kFloat32, {4, 4}));
      },
      "sin.shape[0]: got 4, expected count (2 positions)");
}

TEST(RopeBadInput, TableCosSinOverlap) {
  float c[24];
  ExpectInvalid(
      [&] {
        RopeCosSin(Good(), Positions::Offset(0), 2,
                   TensorView::Contiguous(c, DType::kFloat32, {2, 8}),
                   TensorView::Contiguous(c + 8, DType::kFloat32, {2, 8}));
      },
      "sin: overlaps cos");
}

TEST(RopeBadInput, TableCountZero) {
  float c[8], s[8];
  ExpectInvalid(
      [&] {
        RopeCosSin(Good(), Positions::Offset(0), 0,
                   TensorView::Contiguous(c, DType::kFloat32, {1, 8}),
                   TensorView::Contiguous(s, DType::kFloat32, {1, 8}));
      },
      "count: got 0");
}

TEST(RopeBadInput, TableIdCountMismatch) {
  const std::int64_t ids[] = {0, 1, 2};
  float c[16], s[16];
  ExpectInvalid(
      [&] {
        RopeCosSin(Good(), Positions::Ids(ids, 3), 2,
                   TensorView::Contiguous(c, DType::kFloat32, {2, 8}),
                   TensorView::Contiguous(s, DType::kFloat32, {2, 8}));
      },
      "positions.count: got 3, expected count (2)");
}

TEST(RopeBadInput, UnknownNames) {
  ExpectInvalid([] { ParseRopePairing("neox"); }, "pairing: got neox");
  ExpectInvalid([] { ParseRopeNumerics("fast", "--numerics"); },
                "--numerics: got fast, expected accurate or hf");
  ExpectInvalid([] { ParseRopeDirection("backward"); }, "direction: got backward");
}

}  // namespace
}  // namespace posenc
