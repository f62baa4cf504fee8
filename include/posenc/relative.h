// posenc/relative.h: the relative-position matrix shared by the score-side
// relative methods (T5 buckets, Shaw, Transformer-XL, DeBERTa, ALiBi).
//
// For a query at position p_q and a key at position p_k the relative position
// is an integer difference; papers disagree on its sign, so the sign is a
// named RelativeSign:
//  - kQueryMinusKey: rel = p_q - p_k (the lesson's matrix rel[i][j] = i - j;
//    DeBERTa build_relative_position; Transformer-XL's distance). For
//    L = 6 and offsets 0 the first row is 0 -1 -2 -3 -4 -5, the diagonal 0.
//  - kKeyMinusQuery: rel = p_k - p_q (T5 `memory_position - context_position`,
//    Shaw et al. j - i).
// Positions default to 0..len-1 (HF `arange`); a query offset places query i
// at query_offset + i (a KV cache: queries are the last tokens of the keys).
// Exact integers; positions in [0, kMaxPosition].
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace posenc {

enum class RelativeSign : std::uint8_t { kQueryMinusKey, kKeyMinusQuery };

std::string_view RelativeSignName(RelativeSign sign);  // "query_minus_key", "key_minus_query"
RelativeSign ParseRelativeSign(std::string_view text, std::string_view arg = "sign");

// How a helper writes its result: overwrite the destination or add to it
// (attention kernels add position terms to scores they already hold).
enum class BiasWrite : std::uint8_t { kOverwrite, kAdd };

std::string_view BiasWriteName(BiasWrite write);  // "overwrite", "add"
BiasWrite ParseBiasWrite(std::string_view text, std::string_view arg = "write");

// The relative position of one (query, key) pair. Unchecked (hot path).
inline std::int64_t RelativePosition(std::int64_t query_pos, std::int64_t key_pos,
                                     RelativeSign sign) noexcept {
  return sign == RelativeSign::kQueryMinusKey ? query_pos - key_pos : key_pos - query_pos;
}

struct RelativeMatrixParams {
  std::int64_t query_len = 0;     // in [1, 2^16]
  std::int64_t key_len = 0;       // in [1, 2^16]
  std::int64_t query_offset = 0;  // query i sits at query_offset + i; keys at j
  RelativeSign sign = RelativeSign::kQueryMinusKey;
};

// Throws InvalidArgument naming query_len, key_len or query_offset (offset
// must keep every query position in [0, kMaxPosition]), or query_len *
// key_len beyond 2^28 cells (the int64 matrix would exceed 2 GiB).
void ValidateRelativeMatrixParams(const RelativeMatrixParams& params);

// Row-major [query_len, key_len]: m[i * key_len + j] = rel(query_offset + i, j).
std::vector<std::int64_t> RelativePositionMatrix(const RelativeMatrixParams& params);

// The lesson's square matrix rel[i][j] = i - j, length in [1, 2^14].
std::vector<std::int64_t> RelativePositionMatrix(std::int64_t length);

}  // namespace posenc
