// Tensor views, dtypes, positions and the threading context.
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/context.h"
#include "posenc/error.h"
#include "posenc/positions.h"
#include "posenc/tensor.h"
#include "test_util.h"

namespace posenc {
namespace {

TEST(TensorView, ContiguousStrides) {
  float buf[24];
  auto v = TensorView::Contiguous(buf, DType::kFloat32, {2, 3, 4});
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.strides[0], 12);
  EXPECT_EQ(v.strides[1], 4);
  EXPECT_EQ(v.strides[2], 1);
  EXPECT_EQ(v.NumElements(), 24);
  EXPECT_TRUE(v.IsContiguous());
  EXPECT_EQ(v.Describe(), "[2, 3, 4] float32");
}

TEST(TensorView, RejectsNullData) {
  auto v = TensorView::Contiguous(static_cast<void*>(nullptr), DType::kFloat32, {2});
  try {
    ValidateView(v, "q");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("q.data"), std::string::npos) << e.what();
  }
}

TEST(TensorView, RejectsEmptyAndWrongRank) {
  float buf[4];
  EXPECT_THROW(ValidateView(TensorView::Contiguous(buf, DType::kFloat32, {0, 4}), "x"),
               InvalidArgument);
  EXPECT_THROW(ValidateView(TensorView::Contiguous(buf, DType::kFloat32, {4}), "x", 2),
               InvalidArgument);
  EXPECT_THROW(TensorView::Strided(buf, DType::kFloat32, {2, 2}, {1}), InvalidArgument);
}

TEST(TensorView, WritableViewsMayNotAlias) {
  float buf[16];
  auto broadcast = TensorView::Strided(buf, DType::kFloat32, {4, 4}, {0, 1});
  EXPECT_NO_THROW(ValidateView(broadcast, "in"));
  EXPECT_THROW(ValidateView(broadcast, "out", -1, true), InvalidArgument);
  auto overlap = TensorView::Strided(buf, DType::kFloat32, {4, 4}, {2, 1});
  EXPECT_THROW(ValidateView(overlap, "out", -1, true), InvalidArgument);
  auto transposed = TensorView::Strided(buf, DType::kFloat32, {4, 4}, {1, 4});
  EXPECT_NO_THROW(ValidateView(transposed, "out", -1, true));
}

TEST(TensorView, OverlapRules) {
  float buf[32];
  auto a = TensorView::Contiguous(buf, DType::kFloat32, {16});
  auto b = TensorView::Contiguous(buf + 8, DType::kFloat32, {16});
  auto c = TensorView::Contiguous(buf + 16, DType::kFloat32, {16});
  EXPECT_TRUE(Overlaps(a, b));
  EXPECT_FALSE(Overlaps(a, c));
  EXPECT_THROW(RequireNoOverlap(a, "out", b, "x", true), InvalidArgument);
  EXPECT_THROW(RequireNoOverlap(a, "out", a, "x", false), InvalidArgument);
  EXPECT_NO_THROW(RequireNoOverlap(a, "out", a, "x", true));
  EXPECT_NO_THROW(RequireNoOverlap(a, "out", c, "x", false));
}

TEST(AttentionDims, BothLayouts) {
  float buf[2 * 3 * 5 * 8];
  auto bshd = GetAttentionDims(TensorView::Contiguous(buf, DType::kFloat32, {2, 5, 3, 8}),
                               AttentionLayout::kBSHD, "q");
  EXPECT_EQ(bshd.seq, 5);
  EXPECT_EQ(bshd.heads, 3);
  EXPECT_EQ(bshd.stride_seq, 24);
  EXPECT_EQ(bshd.stride_head, 8);
  auto bhsd = GetAttentionDims(TensorView::Contiguous(buf, DType::kFloat32, {2, 3, 5, 8}),
                               AttentionLayout::kBHSD, "q");
  EXPECT_EQ(bhsd.seq, 5);
  EXPECT_EQ(bhsd.heads, 3);
  EXPECT_EQ(bhsd.stride_seq, 8);
  EXPECT_EQ(bhsd.stride_head, 40);
  EXPECT_EQ(ParseLayout("bshd"), AttentionLayout::kBSHD);
  EXPECT_THROW(ParseLayout("sbhd"), InvalidArgument);
}

TEST(DType, HalfConversionsRoundTrip) {
  // Every finite float16 and bfloat16 value survives float and back.
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
    Float16 h{static_cast<std::uint16_t>(bits)};
    const float f = F16ToFloat(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToF16(f).bits, h.bits) << bits;
    BFloat16 b{static_cast<std::uint16_t>(bits)};
    const float g = BF16ToFloat(b);
    if (std::isnan(g)) continue;
    EXPECT_EQ(FloatToBF16(g).bits, b.bits) << bits;
  }
}

TEST(DType, RoundToNearestEven) {
  EXPECT_EQ(BF16ToFloat(FloatToBF16(1.0f + 1.0f / 256)), 1.0f);  // tie -> even
  EXPECT_EQ(BF16ToFloat(FloatToBF16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_EQ(F16ToFloat(FloatToF16(1.0f + 1.0f / 2048)), 1.0f);
  EXPECT_EQ(F16ToFloat(FloatToF16(65520.0f)), std::numeric_limits<float>::infinity());
  EXPECT_EQ(F16ToFloat(FloatToF16(65504.0f)), 65504.0f);
  EXPECT_EQ(F16ToFloat(FloatToF16(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isnan(F16ToFloat(FloatToF16(std::nanf("")))));
  EXPECT_EQ(ParseDType("bf16"), DType::kBFloat16);
  EXPECT_THROW(ParseDType("int8"), InvalidArgument);
}

TEST(Positions, Validation) {
  std::vector<std::int64_t> ids = {0, 5, 9};
  EXPECT_NO_THROW(ValidatePositions(Positions::Ids(ids.data(), 3), 2, 3, "pos"));
  EXPECT_THROW(ValidatePositions(Positions::Ids(ids.data(), 2), 2, 3, "pos"), InvalidArgument);
  ids[1] = -1;
  EXPECT_THROW(ValidatePositions(Positions::Ids(ids.data(), 3), 1, 3, "pos"), InvalidArgument);
  EXPECT_NO_THROW(ValidatePositions(Positions::Ids(ids.data(), 3), 1, 3, "pos", -10));
  EXPECT_THROW(ValidatePositions(Positions::Offset(kMaxPosition), 1, 2, "pos"), InvalidArgument);
  EXPECT_NO_THROW(ValidatePositions(Positions::Offset(kMaxPosition - 1), 1, 2, "pos"));
}

// Found by fuzz_rope_views / fuzz_flash_views: sizes and strides whose
// element count or span overflowed int64 reached NumElements / ByteSpan.
TEST(TensorView, CountAndSpanBeyond2To48AreRefusedWithoutOverflow) {
  float x = 0;
  const std::int64_t big = std::numeric_limits<std::int64_t>::max();
  for (const TensorView& v :
       {TensorView::Strided(&x, DType::kFloat32, {2, 2}, {1, big / 2}),  // span
        TensorView::Strided(&x, DType::kFloat32, {2, 2}, {big, big}),    // sum overflows
        // The count overflows int64:
        TensorView::Strided(&x, DType::kFloat32, {3037000500, 3037000500}, {0, 0}),
        TensorView::Strided(&x, DType::kFloat64, {std::int64_t{1} << 25, 1},
                            {std::int64_t{1} << 23, 1}),
        TensorView::Strided(&x, DType::kFloat32, {std::int64_t{1} << 31, std::int64_t{1} << 31},
                            {0, 0})}) {
    try {
      ValidateView(v, "x");
      FAIL() << v.Describe() << " accepted";
    } catch (const InvalidArgument& e) {
      // The span rule, or the stride rule first for strides of 2^48 bytes and more.
      const std::string what = e.what();
      EXPECT_TRUE(what.find("at most 2^48") != std::string::npos ||
                  what.find("below 2^48 bytes") != std::string::npos)
          << what;
    }
  }
  // Broadcast inputs below the limit are fine; as outputs they alias.
  const TensorView wide = TensorView::Strided(&x, DType::kFloat32, {1 << 20, 1 << 20}, {0, 0});
  EXPECT_NO_THROW(ValidateView(wide, "x"));
  EXPECT_THROW(ValidateView(wide, "x", -1, /*writable=*/true), InvalidArgument);
}

// fuzz_rope_views (2026-12-02): a size-1 dimension's stride addresses no
// element, so the span check let 6484326861776993725 through, and the RoPE
// kernel's stride-to-bytes product overflowed int64 (UBSan). Every stride is
// now below 2^48 bytes, size-1 dimensions included.
TEST(TensorView, HugeStrideOfASizeOneDimensionIsRefused) {
  std::uint16_t x[8] = {};
  const std::int64_t huge = 6484326861776993725;
  for (const TensorView& v :
       {TensorView::Strided(x, DType::kBFloat16, {1, 1, 2, 4}, {8, huge, 4, 1}),
        TensorView::Strided(x, DType::kBFloat16, {1, 8}, {std::int64_t{1} << 47, 1})}) {
    try {
      ValidateView(v, "q");
      FAIL() << v.Describe() << " accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("q.strides["), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("below 2^48 bytes"), std::string::npos) << e.what();
    }
  }
  // The largest stride allowed for bfloat16 (2^47 - 1 elements) on a size-1
  // dimension is fine.
  EXPECT_NO_THROW(ValidateView(
      TensorView::Strided(x, DType::kBFloat16, {1, 8}, {(std::int64_t{1} << 47) - 1, 1}), "q"));
}

TEST(Context, ParallelForRunsEveryTaskOnce) {
  for (int threads : {1, 2, 4}) {
    Context ctx(threads);
    std::vector<std::atomic<int>> hits(1000);
    ctx.ParallelFor(1000, [&](std::int64_t t, int worker) {
      EXPECT_GE(worker, 0);
      EXPECT_LT(worker, threads);
      hits[t].fetch_add(1);
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

TEST(Context, ExceptionsPropagate) {
  Context ctx(2);
  EXPECT_THROW(ctx.ParallelFor(10,
                               [](std::int64_t t, int) {
                                 if (t == 7) throw InvalidArgument("x");
                               }),
               InvalidArgument);
  EXPECT_THROW(Context(-1), InvalidArgument);
  EXPECT_FALSE(SimdTargetName().empty());
}

}  // namespace
}  // namespace posenc
