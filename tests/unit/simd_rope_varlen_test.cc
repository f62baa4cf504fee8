// Packed variable-length RoPE (ApplyRopeVarlen) and the precomputed cos/sin
// cache (RopeCosSinCache, ApplyRopeWithCache), scalar and SIMD, on every
// Highway target compiled in and supported by this CPU, plus one test per
// bad input. The scalar kernel is the reference: varlen must equal per-sequence
// ApplyRope bit for bit on the scalar backend, and a float64 cache built by
// RopeCosSinCache must reproduce ApplyRope bit for bit (same cos/sin values);
// the SIMD paths agree with the scalar reference within float32 arithmetic.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include "kernels/simd/targets.h"
#include "posenc/context.h"
#include "posenc/error.h"
#include "posenc/rope.h"
#include "posenc/rope_scaling.h"
#include "simd_rope_test_util.h"
#include "simd_target_fixture.h"
#include "test_util.h"

namespace posenc {
namespace {

// Runs once per compiled Highway target (tests/unit/simd_target_fixture.h).
class SimdRopeVarlen : public test::PerSimdTarget {};

using test::Buffer;
using test::ExpectClose;

double Tol(DType dtype, double factor = 1.0) { return test::RopeTol(dtype, factor); }

const Context kScalar(1, Backend::kScalar);

// Sequences of lengths 5, 0, 37, 1, 40 (an empty one included), total 83.
const std::vector<std::int64_t> kCu = {0, 5, 5, 42, 43, 83};

void CheckVarlen(const RopeParams& params, DType dtype, const std::vector<std::int64_t>& offsets,
                 RopeDirection dir, std::uint32_t seed) {
  const std::int64_t heads = 3, hd = params.head_dim, total = kCu.back();
  const std::int64_t num_seqs = static_cast<std::int64_t>(kCu.size()) - 1;
  const std::string what =
      std::string(DTypeName(dtype)) + " " + std::string(RopePairingName(params.pairing)) +
      " rd=" + std::to_string(params.rotary_dim) + " " + std::string(RopeDirectionName(dir));
  // Reference: ApplyRope per sequence, scalar backend.
  Buffer ref(dtype, total * heads * hd, seed);
  for (std::int64_t s = 0; s < num_seqs; ++s) {
    const std::int64_t len = kCu[s + 1] - kCu[s];
    if (len == 0) continue;
    ApplyRope(params, ref.Slice(kCu[s], len, heads, hd), AttentionLayout::kBSHD,
              Positions::Offset(offsets[s]), dir, nullptr, kScalar);
  }
  Buffer scalar(dtype, total * heads * hd, seed), fast = scalar, src = scalar;
  ApplyRopeVarlen(params, scalar.View({total, heads, hd}), kCu.data(), num_seqs, offsets.data(),
                  dir, nullptr, kScalar);
  ASSERT_EQ(scalar.bytes, ref.bytes) << what << ": scalar varlen differs from per-sequence";
  ApplyRopeVarlen(params, fast.View({total, heads, hd}), kCu.data(), num_seqs, offsets.data(), dir,
                  nullptr, Context(2, Backend::kSimd));
  ExpectClose(fast.Values(), ref.Values(), Tol(dtype, params.frequencies.attention_factor),
              what + " simd in place");
  Buffer dst(dtype, total * heads * hd, seed + 1);
  const TensorView out = dst.View({total, heads, hd});
  ApplyRopeVarlen(params, src.View({total, heads, hd}), kCu.data(), num_seqs, offsets.data(), dir,
                  &out, Context(1, Backend::kSimd));
  ASSERT_EQ(dst.bytes, fast.bytes) << what << ": out of place differs from in place";
  ASSERT_EQ(src.bytes, Buffer(dtype, total * heads * hd, seed).bytes) << what << ": input modified";
}

TEST_P(SimdRopeVarlen, VarlenMatchesPerSequenceApplyRope) {
  const std::vector<std::int64_t> offsets = {0, 9, kMaxPosition - 36, 77, 1000};
  RopeParams params;
  params.head_dim = 64;
  CheckVarlen(params, DType::kFloat32, offsets, RopeDirection::kForward, 1);
  params.pairing = RopePairing::kInterleaved;
  CheckVarlen(params, DType::kBFloat16, offsets, RopeDirection::kForward, 2);
  params.head_dim = 80;
  params.rotary_dim = 40;
  params.frequencies = RopeDefaultFrequencies(40, 500000.0, RopeNumerics::kAccurate);
  params.frequencies.attention_factor = 1.25;
  CheckVarlen(params, DType::kFloat16, offsets, RopeDirection::kForward, 3);
  params.pairing = RopePairing::kHalfSplit;
  CheckVarlen(params, DType::kFloat32, offsets, RopeDirection::kForward, 4);
}

TEST_P(SimdRopeVarlen, VarlenInverseAcceptsNegativeOffsetsAndNullOffsets) {
  RopeParams params;
  params.head_dim = 32;
  CheckVarlen(params, DType::kFloat32, {-kMaxPosition, -3, 4096, 0, -39}, RopeDirection::kInverse,
              5);
  // Null seq_offsets == all zeros.
  const std::int64_t total = kCu.back(), num_seqs = static_cast<std::int64_t>(kCu.size()) - 1;
  Buffer a(DType::kFloat32, total * 2 * 32, 6), b = a;
  const std::vector<std::int64_t> zeros(static_cast<std::size_t>(num_seqs), 0);
  ApplyRopeVarlen(params, a.View({total, 2, 32}), kCu.data(), num_seqs, nullptr,
                  RopeDirection::kForward, nullptr, Context(1, Backend::kSimd));
  ApplyRopeVarlen(params, b.View({total, 2, 32}), kCu.data(), num_seqs, zeros.data(),
                  RopeDirection::kForward, nullptr, Context(1, Backend::kSimd));
  EXPECT_EQ(a.bytes, b.bytes);
}

// ApplyRopeWithCache on x [2, seq, heads, hd] vs ApplyRope, for `positions`.
void CheckCache(const RopeParams& params, DType dtype, DType cache_dtype, AttentionLayout layout,
                const Positions& positions, RopeDirection dir, std::uint32_t seed) {
  const std::int64_t b = 2, seq = 19, heads = 2, hd = params.head_dim;
  const std::int64_t rows = 300, rd = params.EffectiveRotaryDim();
  const std::string what =
      std::string(DTypeName(dtype)) + " cache " + std::string(DTypeName(cache_dtype)) + " " +
      std::string(RopePairingName(params.pairing)) + " " + std::string(LayoutName(layout)) + " " +
      std::string(RopeDirectionName(dir));
  auto shape = [&](Buffer& buf) {
    return layout == AttentionLayout::kBSHD ? buf.View({b, seq, heads, hd})
                                            : buf.View({b, heads, seq, hd});
  };
  Buffer ref(dtype, b * seq * heads * hd, seed), fast = ref, exact = ref;
  ApplyRope(params, shape(ref), layout, positions, dir, nullptr, kScalar);
  // A float64 cache holds RopeTrig's values exactly: bit-identical scalar results.
  std::vector<double> cache64(static_cast<std::size_t>(rows * rd));
  const TensorView c64 = TensorView::Contiguous(cache64.data(), DType::kFloat64, {rows, rd});
  RopeCosSinCache(params, c64, kScalar);
  ApplyRopeWithCache(params, shape(exact), layout, positions, c64, dir, nullptr, kScalar);
  ASSERT_EQ(exact.bytes, ref.bytes) << what << ": scalar cache path differs from ApplyRope";
  // A cache in cache_dtype, column-strided inside a wider buffer.
  Buffer wide(cache_dtype, rows * rd * 2, seed + 7);
  const TensorView cache =
      TensorView::Strided(wide.bytes.data(), cache_dtype, {rows, rd}, {2 * rd, 2});
  RopeCosSinCache(params, cache, Context(2, Backend::kSimd));
  ApplyRopeWithCache(params, shape(fast), layout, positions, cache, dir, nullptr,
                     Context(2, Backend::kSimd));
  // The cache rounds cos/sin to cache_dtype: up to one of its ulps per factor.
  const double cache_err = cache_dtype == DType::kFloat64 ? 0.0 : 2 * test::Eps(cache_dtype);
  ExpectClose(fast.Values(), ref.Values(),
              Tol(dtype, params.frequencies.attention_factor) + 2 * cache_err, what + " simd");
}

TEST_P(SimdRopeVarlen, CacheMatchesApplyRope) {
  std::vector<std::int64_t> shared(19), rows(38);
  for (std::size_t i = 0; i < shared.size(); ++i)
    shared[i] = static_cast<std::int64_t>(i * 13 % 300);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(299 - i * 7);
  RopeParams params;
  params.head_dim = 64;
  CheckCache(params, DType::kFloat32, DType::kFloat32, AttentionLayout::kBSHD,
             Positions::Offset(281), RopeDirection::kForward, 1);
  params.pairing = RopePairing::kInterleaved;
  CheckCache(params, DType::kBFloat16, DType::kFloat32, AttentionLayout::kBHSD,
             Positions::Ids(shared.data(), 19), RopeDirection::kInverse, 2);
  params.head_dim = 96;
  params.rotary_dim = 48;
  params.frequencies = RopeDefaultFrequencies(48, 10000.0, RopeNumerics::kAccurate);
  params.frequencies.attention_factor = 1.25;
  CheckCache(params, DType::kFloat16, DType::kBFloat16, AttentionLayout::kBSHD,
             Positions::Ids(rows.data(), 38), RopeDirection::kForward, 3);
  params.pairing = RopePairing::kHalfSplit;
  CheckCache(params, DType::kFloat32, DType::kFloat64, AttentionLayout::kBHSD,
             Positions::Ids(rows.data(), 38), RopeDirection::kForward, 4);
}

TEST(RopeCache, HFNumericsCacheReproducesApplyRope) {
  RopeParams params;
  params.head_dim = 64;
  params.numerics = RopeNumerics::kHF;
  params.frequencies.attention_factor = 1.25;
  std::vector<float> cache(static_cast<std::size_t>(5000 * 64));
  const TensorView cv = TensorView::Contiguous(cache.data(), DType::kFloat32, {5000, 64});
  RopeCosSinCache(params, cv);
  for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    Buffer a(dtype, 1 * 9 * 2 * 64, 11), b = a;
    ApplyRope(params, a.View({1, 9, 2, 64}), AttentionLayout::kBSHD, Positions::Offset(4991),
              RopeDirection::kForward, nullptr, kScalar);
    ApplyRopeWithCache(params, b.View({1, 9, 2, 64}), AttentionLayout::kBSHD,
                       Positions::Offset(4991), cv, RopeDirection::kForward, nullptr,
                       Context(1, Backend::kSimd));
    EXPECT_EQ(a.bytes, b.bytes) << DTypeName(dtype);
  }
}

POSENC_INSTANTIATE_PER_SIMD_TARGET(SimdRopeVarlen);

// --- bad inputs: one test per case -----------------------------------------

// fn must throw InvalidArgument whose message contains needle.
template <class Fn>
void ExpectInvalid(Fn&& fn, const std::string& needle) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << needle;
    return;
  }
  ADD_FAILURE() << "no InvalidArgument thrown; expected one containing: " << needle;
}

struct VarlenBad : testing::Test {
  RopeParams params = [] {
    RopeParams p;
    p.head_dim = 8;
    return p;
  }();
  std::vector<float> data = std::vector<float>(6 * 2 * 8, 0.5f);
  TensorView x = TensorView::Contiguous(data.data(), DType::kFloat32, {6, 2, 8});
  void Expect(const std::vector<std::int64_t>& cu, std::int64_t num_seqs,
              const std::int64_t* offsets, const std::string& needle,
              RopeDirection dir = RopeDirection::kForward) {
    ExpectInvalid([&] { ApplyRopeVarlen(params, x, cu.data(), num_seqs, offsets, dir); }, needle);
  }
};

TEST_F(VarlenBad, NullCuSeqlens) {
  ExpectInvalid([&] { ApplyRopeVarlen(params, x, nullptr, 1, nullptr); }, "cu_seqlens: got null");
}
TEST_F(VarlenBad, ZeroSequences) { Expect({0}, 0, nullptr, "num_seqs: got 0"); }
TEST_F(VarlenBad, FirstEntryNotZero) { Expect({1, 6}, 1, nullptr, "cu_seqlens[0]: got 1"); }
TEST_F(VarlenBad, Decreasing) { Expect({0, 4, 3, 6}, 3, nullptr, "cu_seqlens[2]: got 3"); }
TEST_F(VarlenBad, BeyondTotal) { Expect({0, 7, 6}, 2, nullptr, "cu_seqlens[1]: got 7"); }
TEST_F(VarlenBad, LastNotTotal) { Expect({0, 2, 5}, 2, nullptr, "cu_seqlens[2]: got 5"); }
TEST_F(VarlenBad, NegativeOffsetForward) {
  const std::vector<std::int64_t> off = {0, -1};
  Expect({0, 2, 6}, 2, off.data(), "seq_offsets[1]: got -1");
}
TEST_F(VarlenBad, OffsetRunsPastMaxPosition) {
  const std::vector<std::int64_t> off = {kMaxPosition - 3, 0};  // 4 tokens fit, 5 do not
  Expect({0, 5, 6}, 2, off.data(), "seq_offsets[0]: got " + std::to_string(kMaxPosition - 3));
}
TEST_F(VarlenBad, WrongRank) {
  const TensorView x4 = TensorView::Contiguous(data.data(), DType::kFloat32, {1, 6, 2, 8});
  const std::vector<std::int64_t> cu = {0, 6};
  ExpectInvalid([&] { ApplyRopeVarlen(params, x4, cu.data(), 1, nullptr); }, "x");
}
TEST_F(VarlenBad, HeadDimMismatch) {
  params.head_dim = 4;
  Expect({0, 6}, 1, nullptr, "x.shape[2] (head_dim): got 8");
}
TEST_F(VarlenBad, OutShapeMismatch) {
  std::vector<float> o(5 * 2 * 8);
  const TensorView out = TensorView::Contiguous(o.data(), DType::kFloat32, {5, 2, 8});
  const std::vector<std::int64_t> cu = {0, 6};
  ExpectInvalid(
      [&] { ApplyRopeVarlen(params, x, cu.data(), 1, nullptr, RopeDirection::kForward, &out); },
      "out.shape");
}

struct CacheBad : testing::Test {
  RopeParams params = [] {
    RopeParams p;
    p.head_dim = 8;
    return p;
  }();
  std::vector<float> data = std::vector<float>(1 * 4 * 1 * 8, 0.5f);
  TensorView x = TensorView::Contiguous(data.data(), DType::kFloat32, {1, 4, 1, 8});
  std::vector<float> cache = std::vector<float>(10 * 8, 0.25f);
  TensorView cv = TensorView::Contiguous(cache.data(), DType::kFloat32, {10, 8});
  void Expect(const Positions& pos, const std::string& needle) {
    ExpectInvalid([&] { ApplyRopeWithCache(params, x, AttentionLayout::kBSHD, pos, cv); }, needle);
  }
};

TEST_F(CacheBad, IdBeyondCachedRows) {
  const std::vector<std::int64_t> ids = {0, 1, 10, 2};
  Expect(Positions::Ids(ids.data(), 4), "positions.ids[2]: got 10");
}
TEST_F(CacheBad, OffsetBeyondCachedRows) {
  Expect(Positions::Offset(7), "positions.offset: got 7");
}
TEST_F(CacheBad, NegativeIdEvenInverse) {
  const std::vector<std::int64_t> ids = {0, -1, 2, 3};
  ExpectInvalid(
      [&] {
        ApplyRopeWithCache(params, x, AttentionLayout::kBSHD, Positions::Ids(ids.data(), 4), cv,
                           RopeDirection::kInverse);
      },
      "positions");
}
TEST_F(CacheBad, CacheWidthNotRotaryDim) {
  params.head_dim = 8;
  params.rotary_dim = 4;
  Expect(Positions::Offset(0), "cos_sin_cache.shape[1]: got 8");
}
TEST_F(CacheBad, CacheRankNotTwo) {
  cv = TensorView::Contiguous(cache.data(), DType::kFloat32, {80});
  Expect(Positions::Offset(0), "cos_sin_cache");
}
TEST_F(CacheBad, BuildCacheWidthNotRotaryDim) {
  params.rotary_dim = 6;
  ExpectInvalid([&] { RopeCosSinCache(params, cv); }, "cos_sin_cache.shape[1]: got 8");
}

}  // namespace
}  // namespace posenc
