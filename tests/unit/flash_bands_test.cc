// The tile geometry the fused attention's engines share
// (attention/flash_internal.h): RangeOf, and DiagonalBands' closed form for
// consecutive queries against its row-by-row definition, over offsets of the
// queries before, on and past the keys, windows and partial bands.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "attention/flash_internal.h"

namespace posenc::flash_internal {
namespace {

using Index = std::int64_t;

// The definition: every row's prefix (VisiblePrefix), each band's columns the
// padded longest prefix among its rows, false when any row's is -1.
bool BandsByRows(const Problem& p, const std::vector<Index>& qpos, Index nk, Index kpos0,
                 std::vector<Index>& cols, std::vector<Index>& prefixes) {
  const auto nq = static_cast<Index>(qpos.size());
  for (Index i = 0; i < nq; ++i) {
    const Index prefix = p.VisiblePrefix(qpos[Z(i)], kpos0, nk);
    if (prefix < 0) return false;
    prefixes[Z(i)] = prefix;
    Index& band = cols[Z(i / kBandRows)];
    band = i % kBandRows == 0 ? Pad(prefix) : std::max(band, Pad(prefix));
  }
  return true;
}

TEST(FlashBands, RangeOfGivesMinMaxAndConsecutive) {
  const std::vector<Index> run = {7, 8, 9, 10, 11};
  PositionRange r = RangeOf(run.data(), 5);
  EXPECT_EQ(r.min, 7);
  EXPECT_EQ(r.max, 11);
  EXPECT_TRUE(r.consecutive);
  const std::vector<Index> gap = {7, 8, 9, 10, 12};  // only the last breaks the run
  r = RangeOf(gap.data(), 5);
  EXPECT_EQ(r.max, 12);
  EXPECT_FALSE(r.consecutive);
  const std::vector<Index> shuffled = {4, 2, 9, 0, 3};
  r = RangeOf(shuffled.data(), 5);
  EXPECT_EQ(r.min, 0);
  EXPECT_EQ(r.max, 9);
  EXPECT_FALSE(r.consecutive);
  std::vector<Index> long_run(333);  // more than a vector's lanes, and a tail
  std::iota(long_run.begin(), long_run.end(), Index{1} << 23);
  r = RangeOf(long_run.data(), 333);
  EXPECT_EQ(r.min, Index{1} << 23);
  EXPECT_EQ(r.max, (Index{1} << 23) + 332);
  EXPECT_TRUE(r.consecutive);
  long_run[200] += 1;
  EXPECT_FALSE(RangeOf(long_run.data(), 333).consecutive);
  r = RangeOf(nullptr, 0);  // empty: the identity of min and max, consecutive
  EXPECT_EQ(r.min, std::numeric_limits<Index>::max());
  EXPECT_EQ(r.max, -1);
  EXPECT_TRUE(r.consecutive);
  // ConsecutiveRange: RangeOf of a run without reading it, empty included.
  for (const Index n : {0, 1, 7, 333}) {
    std::vector<Index> ids(Z(n));
    std::iota(ids.begin(), ids.end(), Index{41});
    const PositionRange want = RangeOf(ids.data(), n), got = ConsecutiveRange(41, n);
    EXPECT_EQ(got.min, want.min) << n;
    EXPECT_EQ(got.max, want.max) << n;
    EXPECT_EQ(got.consecutive, want.consecutive) << n;
  }
}

TEST(FlashBands, ClosedFormForConsecutiveQueriesMatchesRows) {
  int checked = 0, banded = 0;
  for (const AttentionMask mask : {AttentionMask::kCausal, AttentionMask::kBidirectional}) {
    for (const Index window : {Index{0}, Index{1}, Index{8}, Index{50}, Index{1000}}) {
      Problem p;
      p.mask = mask;
      p.window = window;
      for (const Index nq : {1, 5, 16, 17, 64}) {
        for (const Index nk : {1, 16, 37, 64, 128}) {
          for (Index offset = -80; offset <= 140; offset += 7) {  // q0 - k0
            const Index k0 = 1000, q0 = k0 + offset;
            std::vector<Index> qpos(Z(nq)), kpos(Z(nk));
            std::iota(qpos.begin(), qpos.end(), q0);
            std::iota(kpos.begin(), kpos.end(), k0);
            const PositionRange queries = RangeOf(qpos.data(), nq);
            const PositionRange keys = RangeOf(kpos.data(), nk);
            ASSERT_TRUE(queries.consecutive && keys.consecutive);
            const Index bands = (nq + kBandRows - 1) / kBandRows;
            std::vector<Index> cols(Z(bands), -7), prefixes(Z(nq), -7);
            std::vector<Index> want_cols(Z(bands), -7), want_prefixes(Z(nq), -7);
            const bool got = DiagonalBands(p, qpos.data(), nq, queries, kpos.data(), nk, keys,
                                           cols.data(), prefixes.data());
            const bool want = BandsByRows(p, qpos, nk, k0, want_cols, want_prefixes);
            ASSERT_EQ(got, want) << "nq " << nq << " nk " << nk << " offset " << offset
                                 << " window " << window;
            ++checked;
            if (!got) continue;
            ++banded;
            EXPECT_EQ(cols, want_cols) << "nq " << nq << " nk " << nk << " offset " << offset;
            EXPECT_EQ(prefixes, want_prefixes) << "nq " << nq << " nk " << nk;
            // Without prefixes requested, the same columns.
            std::vector<Index> cols_only(Z(bands), -7);
            ASSERT_TRUE(DiagonalBands(p, qpos.data(), nq, queries, kpos.data(), nk, keys,
                                      cols_only.data()));
            EXPECT_EQ(cols_only, want_cols);
          }
        }
      }
    }
  }
  EXPECT_GT(banded, 100);          // the closed form ran
  EXPECT_LT(banded, checked / 2);  // and so did its refusals (bidirectional, windows)
}

TEST(FlashBands, ArbitraryQueriesKeepTheRowLoop) {
  Problem p;                                                  // causal, no window
  const std::vector<Index> qpos = {40, 3, 17, 63, 0, 22, 8};  // not a run
  std::vector<Index> kpos(64);
  std::iota(kpos.begin(), kpos.end(), 0);
  const PositionRange queries = RangeOf(qpos.data(), 7), keys = RangeOf(kpos.data(), 64);
  ASSERT_FALSE(queries.consecutive);
  std::vector<Index> cols(1), prefixes(7), want_cols(1), want_prefixes(7);
  ASSERT_TRUE(DiagonalBands(p, qpos.data(), 7, queries, kpos.data(), 64, keys, cols.data(),
                            prefixes.data()));
  ASSERT_TRUE(BandsByRows(p, qpos, 64, 0, want_cols, want_prefixes));
  EXPECT_EQ(prefixes, want_prefixes);
  EXPECT_EQ(cols, want_cols);
  EXPECT_EQ(cols[0], 64);  // row at 63 sees all 64 keys
  // Keys that are not a run: no bands.
  kpos[10] = 100;
  EXPECT_FALSE(DiagonalBands(p, qpos.data(), 7, queries, kpos.data(), 64, RangeOf(kpos.data(), 64),
                             cols.data()));
}

}  // namespace
}  // namespace posenc::flash_internal
