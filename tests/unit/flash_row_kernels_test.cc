// The row kernels' narrowed rows and bfloat16 rounding (kernels/simd/flash.h),
// on every compiled Highway target, bit for bit against the kernels they
// replace:
//  - FlashSoftmaxTile with FlashSoftmaxRows (each row of a causal diagonal
//    tile to its visible keys and its band's columns, P rounded in the same
//    pass) = FlashScaleRow + FlashExpRow + FloatToBF16 row by row over the
//    same columns, the entries past a row's columns untouched, a row that
//    sees no key zeroed with m and l unchanged;
//  - FlashBackwardRow with FlashRowRounding::kBFloat16 = the unrounded row
//    pass followed by FloatToBF16 of P and of dS (dS from the unrounded P).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "flash_kernels_fixture.h"
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

class FlashRowKernels : public test::PerSimdTarget {};

TEST_P(FlashRowKernels, SoftmaxTileNarrowsRowsAndRoundsP) {
  // 7 rows of a 64-key tile: visible prefixes of every kind (none, one key,
  // mid-vector, a whole vector, all), columns of 16 to 64; with and
  // without terms, with and without rounding.
  const Index nq = 7, nk = 61, ld = 64;
  const std::vector<Index> visible = {0, 1, 9, 16, 33, 61, 47};
  const std::vector<Index> cols = {16, 16, 16, 16, 48, 64, 48};
  const std::vector<float> s0 = Random(nq * ld, 31, -4.0f, 4.0f);
  const std::vector<float> bias = Random(ld + 8, 32);
  for (const bool terms : {false, true})
    for (const auto rounding : {ks::FlashRowRounding::kNone, ks::FlashRowRounding::kBFloat16}) {
      std::vector<const float*> rows(nq);
      for (Index i = 0; i < nq; ++i) rows[i] = terms && i != 3 ? bias.data() + i : nullptr;
      const std::vector<float> m0 = {-INFINITY, 0.5f, -INFINITY, 9.0f, -1.0f, 2.0f, 0.0f};
      const std::vector<float> l0 = {0.0f, 3.0f, 0.0f, 1.5f, 2.0f, 0.25f, 1.0f};
      std::vector<float> fast = s0, m = m0, l = l0, alpha(nq, -7.0f);
      ks::FlashSoftmaxRows shape;
      shape.visible = visible.data();
      shape.cols = cols.data();
      shape.rounding = rounding;
      ks::FlashSoftmaxTile(fast.data(), ld, nq, nk, 0.3f, rows.data(), m.data(), l.data(),
                           alpha.data(), shape);
      for (Index i = 0; i < nq; ++i) {
        SCOPED_TRACE(::testing::Message() << "terms " << terms << " rounding "
                                          << static_cast<int>(rounding) << " row " << i);
        std::vector<float> row(s0.begin() + i * ld, s0.begin() + i * ld + cols[i]);
        const float mx = ks::FlashScaleRow(row.data(), visible[i], cols[i], 0.3f, rows[i]);
        if (mx == -INFINITY) {  // sees no key: zeros, alpha 1, m and l as they were
          for (Index j = 0; j < cols[i]; ++j) EXPECT_TRUE(SameBits(fast[i * ld + j], 0.0f)) << j;
          EXPECT_EQ(alpha[i], 1.0f);
          EXPECT_TRUE(SameBits(m[i], m0[i]));
          EXPECT_TRUE(SameBits(l[i], l0[i]));
        } else {
          const float m_new = std::max(m0[i], mx);
          const float sum = ks::FlashExpRow(row.data(), cols[i], m_new);
          for (Index j = 0; j < cols[i]; ++j) {
            const float want =
                rounding == ks::FlashRowRounding::kBFloat16 ? Rounded(row[j]) : row[j];
            EXPECT_TRUE(SameBits(fast[i * ld + j], want)) << j;
          }
          const double want_alpha = m0[i] == -INFINITY ? 0.0 : std::exp(double(m0[i]) - m_new);
          EXPECT_EQ(m[i], m_new);
          EXPECT_NEAR(alpha[i], want_alpha, 2e-7 * want_alpha);
          // l sums the unrounded P.
          EXPECT_NEAR(l[i], l0[i] * want_alpha + sum, 1e-6 * (l0[i] * want_alpha + sum));
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
  for (const Index nk : {0, 1, 17, 45, 64}) {
    std::vector<float> plain_s = s, plain_dp = dp, got_s = s, got_dp = dp;
    ks::FlashBackwardRow(plain_s.data(), plain_dp.data(), nk, ld, 0.37f, bias.data(), 0.9f, 0.125f);
    ks::FlashBackwardRow(got_s.data(), got_dp.data(), nk, ld, 0.37f, bias.data(), 0.9f, 0.125f,
                         ks::FlashRowRounding::kBFloat16);
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

POSENC_INSTANTIATE_PER_SIMD_TARGET(FlashRowKernels);

}  // namespace
}  // namespace posenc
