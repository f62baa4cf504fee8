// The row kernels' narrowed rows and bfloat16 rounding (kernels/simd/flash.h),
// on every compiled Highway target, bit for bit against the kernels they
// replace:
//  - FlashSoftmaxTile with FlashSoftmaxRows (each row of a causal diagonal
//    tile to its visible keys and its band's columns, P rounded in the same
//    pass) = FlashScaleRow + FlashExpRow + FloatToBF16 row by row over the
//    same columns, the entries past a row's columns untouched, a row that
//    sees no key zeroed with m and l unchanged; rows in any number of
//    batches of 16 (the AVX-512 kernel's reductions of 16 rows at once),
//    l = l * alpha + the row kernel's lane sum;
//  - FlashBackwardRow with FlashRowRounding::kBFloat16 = the unrounded row
//    pass followed by FloatToBF16 of P and of dS (dS from the unrounded P);
//  - FlashDecodeLogitsStored (key rows read in their float32, bfloat16 or
//    float16 storage) = FlashDecodeLogits on the float32 copy of the rows;
// each row-kernel test with both ways of rounding (VCVTNEPS2BF16 where the CPU has
// AVX512_BF16, and integer arithmetic: FlashBf16Dots::kFloat32), which
// differ only for a subnormal input (+-0 from the instruction), and agree
// there too under the engines' FTZ and DAZ.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "flash_kernels_fixture.h"
#include "kernels/float_mode.h"
#include "kernels/simd/flash.h"
#include "posenc/dtype.h"
#include "simd_target_fixture.h"

namespace posenc {
namespace {

using test::Index;
using test::Random;
namespace ks = kernels::simd;

float Rounded(float x) { return BF16ToFloat(FloatToBF16(x)); }

// a and b hold the same bits (-0 and 0 differ; NaN payloads count).
::testing::AssertionResult SameBits(float a, float b) {
  if (std::memcmp(&a, &b, sizeof a) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << a << " vs " << b;
}

// Runs each test once per way of rounding to bfloat16 (FlashBf16Dots kAuto:
// VCVTNEPS2BF16 where the CPU has it; kFloat32: integer arithmetic).
class FlashRowKernels : public test::PerSimdTarget {
 protected:
  void TearDown() override {
    ks::SetFlashBf16Dots(ks::FlashBf16Dots::kAuto);
    test::PerSimdTarget::TearDown();
  }
  static constexpr ks::FlashBf16Dots kModes[] = {ks::FlashBf16Dots::kAuto,
                                                 ks::FlashBf16Dots::kFloat32};
  // The row kernels of the dispatched target round with VCVTNEPS2BF16 (an
  // AVX-512 target on a CPU with AVX512_BF16: FlashBf16DotAvailable).
  static bool Converts() { return ks::FlashBf16ConvertPreferred() && ks::FlashBf16DotAvailable(); }
};

TEST_P(FlashRowKernels, SoftmaxTileNarrowsRowsAndRoundsP) {
  // Rows of a 64-key tile: 7 with visible prefixes of every kind (none, one
  // key, mid-vector, a whole vector, all) and columns of 16 to 64, then 30
  // more (37 rows: two whole batches of 16, which the AVX-512 kernel reduces
  // at once, and a batch of 5), m = -inf among them; with and without terms,
  // with and without rounding. l = l * alpha + the row kernel's lane sum
  // (one rounding, or two where the build does not contract them).
  const Index nq = 37, nk = 61, ld = 64;
  std::vector<Index> visible = {0, 1, 9, 16, 33, 61, 47};
  std::vector<Index> cols = {16, 16, 16, 16, 48, 64, 48};
  std::vector<float> m0 = {-INFINITY, 0.5f, -INFINITY, 9.0f, -1.0f, 2.0f, 0.0f};
  std::vector<float> l0 = {0.0f, 3.0f, 0.0f, 1.5f, 2.0f, 0.25f, 1.0f};
  for (Index i = 7; i < nq; ++i) {
    visible.push_back(i % 11 == 3 ? 0 : std::min<Index>(nk, (i * 7) % 62));
    cols.push_back(std::max<Index>(16, (visible.back() + 15) / 16 * 16));
    m0.push_back(i % 5 == 0 ? -INFINITY : -2.0f + 0.5f * static_cast<float>(i % 9));
    l0.push_back(m0.back() == -INFINITY ? 0.0f : 0.5f + static_cast<float>(i % 3));
  }
  std::vector<float> s0 = Random(nq * ld, 31, -6.0f, 6.0f);
  // The last row sees 16 signed zeros, lanes i and i + 8 (and, after the
  // first halving, i and i + 4) of opposite signs: without terms its max is
  // +0 or -0 by the operand order of the lane reduction (bits checked).
  visible[nq - 1] = cols[nq - 1] = 16;
  for (Index j = 0; j < 16; ++j) s0[(nq - 1) * ld + j] = (j / 8 + j / 4) % 2 ? -0.0f : 0.0f;
  const std::vector<float> bias = Random(ld + nq, 32);
  for (const ks::FlashBf16Dots mode : kModes)
    for (const bool terms : {false, true})
      for (const auto rounding : {ks::FlashRowRounding::kNone, ks::FlashRowRounding::kBFloat16})
        for (const auto exp : {kernels::FlashExp::kFloat32, kernels::FlashExp::kBFloat16}) {
          ks::SetFlashBf16Dots(mode);
          std::vector<const float*> rows(nq);
          for (Index i = 0; i < nq; ++i) rows[i] = terms && i % 4 != 3 ? bias.data() + i : nullptr;
          std::vector<float> fast = s0, m = m0, l = l0, alpha(nq, -7.0f);
          ks::FlashSoftmaxRows shape;
          shape.visible = visible.data();
          shape.cols = cols.data();
          shape.rounding = rounding;
          shape.exp = exp;
          ks::FlashSoftmaxTile(fast.data(), ld, nq, nk, 0.3f, rows.data(), m.data(), l.data(),
                               alpha.data(), shape);
          for (Index i = 0; i < nq; ++i) {
            SCOPED_TRACE(::testing::Message() << "mode " << static_cast<int>(mode) << " terms "
                                              << terms << " rounding " << static_cast<int>(rounding)
                                              << " exp " << static_cast<int>(exp) << " row " << i);
            std::vector<float> row(s0.begin() + i * ld, s0.begin() + i * ld + cols[i]);
            const float mx = ks::FlashScaleRow(row.data(), visible[i], cols[i], 0.3f, rows[i]);
            if (mx == -INFINITY) {  // sees no key: zeros, alpha 1, m and l as they were
              for (Index j = 0; j < cols[i]; ++j)
                EXPECT_TRUE(SameBits(fast[i * ld + j], 0.0f)) << j;
              EXPECT_EQ(alpha[i], 1.0f);
              EXPECT_TRUE(SameBits(m[i], m0[i]));
              EXPECT_TRUE(SameBits(l[i], l0[i]));
            } else {
              const float m_new = std::max(m0[i], mx);
              const float sum = ks::FlashExpRow(row.data(), cols[i], m_new, exp);
              for (Index j = 0; j < cols[i]; ++j) {
                const float want =
                    rounding == ks::FlashRowRounding::kBFloat16 ? Rounded(row[j]) : row[j];
                EXPECT_TRUE(SameBits(fast[i * ld + j], want)) << j;
              }
              // exp of the float32 difference the kernel takes, to ~1 ulp.
              const double want_alpha = m0[i] == -INFINITY ? 0.0 : std::exp(double(m0[i] - m_new));
              EXPECT_TRUE(SameBits(m[i], m_new));
              EXPECT_NEAR(alpha[i], want_alpha, 2e-7 * want_alpha);
              // l sums the unrounded P.
              const float fused = std::fma(l0[i], alpha[i], sum), split = l0[i] * alpha[i] + sum;
              EXPECT_TRUE(SameBits(l[i], fused) || SameBits(l[i], split)) << fused;
            }
            for (Index j = cols[i]; j < ld; ++j) {  // past the row's columns: untouched
              EXPECT_TRUE(SameBits(fast[i * ld + j], s0[i * ld + j])) << j;
            }
          }
        }
}

TEST_P(FlashRowKernels, BackwardRowRoundsPAndDsFromTheUnroundedP) {
  const Index ld = 64;
  const std::vector<float> s = Random(ld, 41, -3.0f, 3.0f), dp = Random(ld, 42);
  std::vector<float> bias = Random(ld, 43);
  bias[5] = -INFINITY;  // a masked pair
  for (const ks::FlashBf16Dots mode : kModes)
    for (const auto exp : {kernels::FlashExp::kFloat32, kernels::FlashExp::kBFloat16})
      for (const Index nk : {0, 1, 17, 45, 64}) {
        ks::SetFlashBf16Dots(mode);
        std::vector<float> plain_s = s, plain_dp = dp, got_s = s, got_dp = dp;
        ks::FlashBackwardRow(plain_s.data(), plain_dp.data(), nk, ld, 0.37f, bias.data(), 0.9f,
                             0.125f, ks::FlashRowRounding::kNone, exp);
        ks::FlashBackwardRow(got_s.data(), got_dp.data(), nk, ld, 0.37f, bias.data(), 0.9f, 0.125f,
                             ks::FlashRowRounding::kBFloat16, exp);
        for (Index j = 0; j < ld; ++j) {
          EXPECT_TRUE(SameBits(got_s[j], Rounded(plain_s[j]))) << "nk " << nk << " P " << j;
          EXPECT_TRUE(SameBits(got_dp[j], Rounded(plain_dp[j]))) << "nk " << nk << " dS " << j;
        }
        // Rounding does something: P values in (0, 1) with bits below bfloat16's.
        if (nk == 64) {
          EXPECT_NE(got_s, plain_s);
        }
      }
}

TEST_P(FlashRowKernels, BackwardTileEqualsTheRowKernel) {
  // The row pass of a whole tile: the same bits as FlashBackwardRow row by
  // row, for rows seeing no key (lse -inf: zeros), a prefix of the keys or
  // all of them, narrowed columns (the rest zeroed), with and without
  // terms, each rounding and each exp.
  const Index nq = 6, nk = 61, ld = 64;
  const std::vector<Index> visible = {0, 1, 17, 33, 61, 45};
  const std::vector<Index> cols = {16, 16, 32, 48, 64, 48};
  const std::vector<float> lse = {-INFINITY, 0.3f, 1.5f, 2.0f, 4.0f, 2.5f};
  const std::vector<float> delta = {0.1f, -0.2f, 0.3f, 0.05f, 0.0f, -1.0f};
  const std::vector<float> s0 = Random(nq * ld, 51, -3.0f, 3.0f), dp0 = Random(nq * ld, 52);
  const std::vector<float> bias = Random(ld + 8, 53);
  for (const ks::FlashBf16Dots mode : kModes)
    for (const bool terms : {false, true})
      for (const auto rounding : {ks::FlashRowRounding::kNone, ks::FlashRowRounding::kBFloat16})
        for (const auto exp : {kernels::FlashExp::kFloat32, kernels::FlashExp::kBFloat16}) {
          ks::SetFlashBf16Dots(mode);
          std::vector<const float*> rows_bias(nq);
          for (Index i = 0; i < nq; ++i) rows_bias[i] = terms && i != 2 ? bias.data() + i : nullptr;
          std::vector<float> s = s0, dp = dp0;
          ks::FlashBackwardRows rows;
          rows.bias = rows_bias.data();
          rows.visible = visible.data();
          rows.cols = cols.data();
          rows.rounding = rounding;
          rows.exp = exp;
          ks::FlashBackwardTile(s.data(), dp.data(), ld, nq, nk, 0.37f, lse.data(), delta.data(),
                                rows);
          for (Index i = 0; i < nq; ++i) {
            SCOPED_TRACE(::testing::Message() << "mode " << static_cast<int>(mode) << " terms "
                                              << terms << " rounding " << static_cast<int>(rounding)
                                              << " exp " << static_cast<int>(exp) << " row " << i);
            std::vector<float> ws(s0.begin() + i * ld, s0.begin() + (i + 1) * ld);
            std::vector<float> wdp(dp0.begin() + i * ld, dp0.begin() + (i + 1) * ld);
            const Index c = lse[i] == -INFINITY ? 0 : cols[i];
            if (c > 0) {
              ks::FlashBackwardRow(ws.data(), wdp.data(), visible[i], c, 0.37f, rows_bias[i],
                                   lse[i], delta[i], rounding, exp);
            }
            for (Index j = c; j < ld; ++j) ws[j] = wdp[j] = 0.0f;
            for (Index j = 0; j < ld; ++j) {
              EXPECT_TRUE(SameBits(s[i * ld + j], ws[j])) << "P " << j;
              EXPECT_TRUE(SameBits(dp[i * ld + j], wdp[j])) << "dS " << j;
            }
          }
        }
}

TEST_P(FlashRowKernels, ConvertedRoundingFlushesOnlySubnormals) {
  // P = exp(0 - 86) = 4.4e-38 (normal), dS = P * 0.01 = 4.4e-40 (subnormal
  // in float32 and in bfloat16).
  const Index ld = 16;
  const std::vector<float> s(ld, 0.0f), dp(ld, 0.135f);
  for (const ks::FlashBf16Dots mode : kModes) {
    ks::SetFlashBf16Dots(mode);
    SCOPED_TRACE(::testing::Message() << "mode " << static_cast<int>(mode));
    std::vector<float> plain_s = s, plain_dp = dp, got_s = s, got_dp = dp;
    ks::FlashBackwardRow(plain_s.data(), plain_dp.data(), ld, ld, 1.0f, nullptr, 86.0f, 0.125f);
    ks::FlashBackwardRow(got_s.data(), got_dp.data(), ld, ld, 1.0f, nullptr, 86.0f, 0.125f,
                         ks::FlashRowRounding::kBFloat16);
    ASSERT_TRUE(std::fpclassify(plain_dp[0]) == FP_SUBNORMAL) << plain_dp[0];
    ASSERT_NE(Rounded(plain_dp[0]), 0.0f);
    const bool converts = mode == ks::FlashBf16Dots::kAuto && Converts();
    for (Index j = 0; j < ld; ++j) {
      EXPECT_TRUE(SameBits(got_s[j], Rounded(plain_s[j]))) << j;  // a normal P: the same
      EXPECT_TRUE(SameBits(got_dp[j], converts ? 0.0f : Rounded(plain_dp[j]))) << j;
    }
    // Under the engines' FTZ and DAZ the product is flushed first: 0 both ways.
    const kernels::ScopedFlushSubnormals ftz;
    got_s = s;
    got_dp = dp;
    ks::FlashBackwardRow(got_s.data(), got_dp.data(), ld, ld, 1.0f, nullptr, 86.0f, 0.125f,
                         ks::FlashRowRounding::kBFloat16);
    for (Index j = 0; j < ld; ++j) EXPECT_TRUE(SameBits(got_dp[j], 0.0f)) << j;
  }
}

// FlashDecodeLogitsStored on nk key rows of dim values `stride` elements
// apart in `storage` against FlashDecodeLogits on their float32 copy, for 1
// to 9 query rows (groups of 4, 2 and 1): the same bits for every key, 0 for
// keys [nk, Pad(nk)), nothing written past. The buffer ends at the last row
// read, so a read past nk would leave it (AddressSanitizer).
void ExpectStoredLogitsEqualTheFloat32Rows(ks::FlashStorage storage, Index dim, Index stride,
                                           Index nk) {
  const Index padded = (nk + 15) / 16 * 16, lds = padded + 16;
  const Index first = stride < 0 ? (nk - 1) * -stride : 0;  // key 0's row
  const test::StoredValues x(Random((nk - 1) * std::abs(stride) + dim, 11, -4.0f, 4.0f));
  const void* k = x.At(storage, first);
  std::vector<float> rows(padded * dim, 0.0f);  // the float32 copy, zero rows past nk
  ks::FlashLoadRows(storage, k, stride, nk, dim, rows.data(), dim);
  for (const Index R : {1, 2, 3, 4, 5, 7, 9}) {
    const std::vector<float> q = Random(R * (dim + 16), 12, -2.0f, 2.0f);
    std::vector<float> want(R * lds, NAN), got(R * lds, NAN);
    ks::FlashDecodeLogits(q.data(), dim + 16, R, rows.data(), dim, nk, dim, want.data(), lds);
    ks::FlashDecodeLogitsStored(storage, q.data(), dim + 16, R, k, stride, nk, dim, got.data(),
                                lds);
    for (Index r = 0; r < R; ++r) {
      for (Index j = 0; j < lds; ++j) {
        SCOPED_TRACE(testing::Message() << "R " << R << ": " << r << ", " << j);
        if (j < nk) {
          ASSERT_TRUE(SameBits(got[r * lds + j], want[r * lds + j]));
        } else if (j < padded) {
          ASSERT_TRUE(SameBits(got[r * lds + j], 0.0f));
        } else {
          ASSERT_TRUE(std::isnan(got[r * lds + j]));
        }
      }
    }
  }
}

TEST_P(FlashRowKernels, DecodeLogitsFromStoredKeysEqualTheFloat32Rows) {
  // Keys in partial and whole groups of 16 and passes of 2 and 4; head dims
  // of 1 to 16 vectors; rows strided like one kv head's of a bshd cache of 3
  // heads, overlapping (half a row apart), all one row (stride 0) and in
  // reverse order (a negative stride): views allow all four.
  for (const auto storage :
       {ks::FlashStorage::kFloat32, ks::FlashStorage::kBFloat16, ks::FlashStorage::kFloat16}) {
    for (const Index dim : {16, 48, 128, 256}) {
      for (const Index stride : {3 * dim, dim / 2, Index{0}, -dim}) {
        for (const Index nk : {1, 2, 15, 16, 17, 35, 64}) {
          SCOPED_TRACE(testing::Message() << static_cast<int>(storage) << " dim " << dim
                                          << " stride " << stride << " nk " << nk);
          ExpectStoredLogitsEqualTheFloat32Rows(storage, dim, stride, nk);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

POSENC_INSTANTIATE_PER_SIMD_TARGET(FlashRowKernels);

}  // namespace
}  // namespace posenc
