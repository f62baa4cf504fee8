// The relative-position matrix: the lesson's 6x6 example, both signs, query
// offsets (KV cache), enum names, and bad inputs.
#include "posenc/relative.h"

#include <vector>

#include <gtest/gtest.h>

#include "posenc/error.h"
#include "posenc/positions.h"

namespace posenc {
namespace {

TEST(Relative, LessonSixBySix) {
  const std::vector<std::int64_t> m = RelativePositionMatrix(6);
  const std::vector<std::int64_t> expected = {0, -1, -2, -3, -4, -5,  //
                                              1, 0,  -1, -2, -3, -4,  //
                                              2, 1,  0,  -1, -2, -3,  //
                                              3, 2,  1,  0,  -1, -2,  //
                                              4, 3,  2,  1,  0,  -1,  //
                                              5, 4,  3,  2,  1,  0};
  EXPECT_EQ(m, expected);
}

TEST(Relative, SignAndOffset) {
  const std::vector<std::int64_t> m =
      RelativePositionMatrix(RelativeMatrixParams{2, 4, 2, RelativeSign::kKeyMinusQuery});
  EXPECT_EQ(m, (std::vector<std::int64_t>{-2, -1, 0, 1, -3, -2, -1, 0}));
  EXPECT_EQ(RelativePosition(7, 3, RelativeSign::kQueryMinusKey), 4);
  EXPECT_EQ(RelativePosition(7, 3, RelativeSign::kKeyMinusQuery), -4);
  EXPECT_EQ(ParseRelativeSign("key_minus_query"), RelativeSign::kKeyMinusQuery);
  EXPECT_EQ(RelativeSignName(RelativeSign::kQueryMinusKey), "query_minus_key");
  EXPECT_EQ(ParseBiasWrite("add"), BiasWrite::kAdd);
  EXPECT_EQ(BiasWriteName(BiasWrite::kOverwrite), "overwrite");
}

TEST(Relative, RejectsBadInput) {
  EXPECT_THROW(RelativePositionMatrix(0), InvalidArgument);
  EXPECT_THROW(RelativePositionMatrix(65537), InvalidArgument);
  EXPECT_THROW(RelativePositionMatrix(RelativeMatrixParams{2, 0, 0, RelativeSign::kQueryMinusKey}),
               InvalidArgument);
  EXPECT_THROW(RelativePositionMatrix(RelativeMatrixParams{2, 2, -1, RelativeSign::kQueryMinusKey}),
               InvalidArgument);
  EXPECT_THROW(RelativePositionMatrix(
                   RelativeMatrixParams{2, 2, kMaxPosition, RelativeSign::kQueryMinusKey}),
               InvalidArgument);
  EXPECT_THROW(ParseRelativeSign("i-j"), InvalidArgument);
  EXPECT_THROW(ParseBiasWrite("set"), InvalidArgument);
  try {
    RelativePositionMatrix(0);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "length: got 0, expected a length in [1, 65536] with length^2 <= 2^28 "
              "(at most 16384)");
  }
  // A 65536 x 65536 int64 matrix would need 32 GiB: refused before allocating.
  try {
    RelativePositionMatrix(65536);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("query_len * key_len: got 65536 * 65536, expected at most "
                                         "2^28 cells"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(ValidateRelativeMatrixParams(
      RelativeMatrixParams{16384, 16384, 0, RelativeSign::kQueryMinusKey}));
  EXPECT_THROW(ValidateRelativeMatrixParams(
                   RelativeMatrixParams{16385, 16384, 0, RelativeSign::kQueryMinusKey}),
               InvalidArgument);
}

}  // namespace
}  // namespace posenc
