// The relative-position matrix (include/posenc/relative.h): rel = p_q - p_k
// or p_k - p_q, exact int64. Shared vocabulary (RelativeSign, BiasWrite) of
// the score-side relative methods.
#include "posenc/relative.h"

#include <string>

#include "posenc/error.h"
#include "posenc/positions.h"

namespace posenc {

std::string_view RelativeSignName(RelativeSign sign) {
  switch (sign) {
    case RelativeSign::kQueryMinusKey:
      return "query_minus_key";
    case RelativeSign::kKeyMinusQuery:
      return "key_minus_query";
  }
  return "?";
}

RelativeSign ParseRelativeSign(std::string_view text, std::string_view arg) {
  if (text == "query_minus_key") return RelativeSign::kQueryMinusKey;
  if (text == "key_minus_query") return RelativeSign::kKeyMinusQuery;
  throw InvalidArgument(
      ArgMessage(arg, std::string(text), "one of query_minus_key, key_minus_query"));
}

std::string_view BiasWriteName(BiasWrite write) {
  switch (write) {
    case BiasWrite::kOverwrite:
      return "overwrite";
    case BiasWrite::kAdd:
      return "add";
  }
  return "?";
}

BiasWrite ParseBiasWrite(std::string_view text, std::string_view arg) {
  if (text == "overwrite") return BiasWrite::kOverwrite;
  if (text == "add") return BiasWrite::kAdd;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "one of overwrite, add"));
}

namespace {
constexpr std::int64_t kMaxLen = std::int64_t{1} << 16;
constexpr std::int64_t kMaxCells = std::int64_t{1} << 28;
}  // namespace

void ValidateRelativeMatrixParams(const RelativeMatrixParams& params) {
  Require(params.query_len >= 1 && params.query_len <= kMaxLen, "query_len", params.query_len,
          "a length in [1, 65536]");
  Require(params.key_len >= 1 && params.key_len <= kMaxLen, "key_len", params.key_len,
          "a length in [1, 65536]");
  if (!(params.query_offset >= 0 && params.query_offset <= kMaxPosition - (params.query_len - 1))) {
    FailArgument("query_offset", params.query_offset,
                 "an offset >= 0 with query_offset + query_len - 1 <= 2^24 - 1");
  }
  // The matrix is materialised as int64: 65536 x 65536 would be 32 GiB.
  if (params.query_len * params.key_len > kMaxCells) {
    FailArgument("query_len * key_len",
                 std::to_string(params.query_len) + " * " + std::to_string(params.key_len),
                 "at most 2^28 cells (a 2 GiB int64 matrix)");
  }
}

std::vector<std::int64_t> RelativePositionMatrix(const RelativeMatrixParams& params) {
  ValidateRelativeMatrixParams(params);
  std::vector<std::int64_t> m(static_cast<std::size_t>(params.query_len * params.key_len));
  for (std::int64_t i = 0; i < params.query_len; ++i) {
    for (std::int64_t j = 0; j < params.key_len; ++j) {
      m[static_cast<std::size_t>(i * params.key_len + j)] =
          RelativePosition(params.query_offset + i, j, params.sign);
    }
  }
  return m;
}

std::vector<std::int64_t> RelativePositionMatrix(std::int64_t length) {
  Require(length >= 1 && length <= kMaxLen, "length", length,
          "a length in [1, 65536] with length^2 <= 2^28 (at most 16384)");
  return RelativePositionMatrix(
      RelativeMatrixParams{length, length, 0, RelativeSign::kQueryMinusKey});
}

}  // namespace posenc
