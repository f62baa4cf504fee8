// posenc/positions.h: where each token sits.
//
// Every per-token method takes a Positions: either explicit integer position
// ids or an offset (the KV-cache case: token s of every sequence sits at
// offset + s). Ids are int64 and may be shared by all batch rows (count ==
// seq) or given per row (count == batch * seq, row-major [batch, seq]).
#pragma once

#include <cstdint>
#include <string_view>

namespace posenc {

struct Positions {
  const std::int64_t* ids = nullptr;  // null: use offset + s
  std::int64_t count = 0;             // number of ids (seq or batch*seq)
  std::int64_t offset = 0;            // used when ids == null

  static Positions Offset(std::int64_t offset) { return Positions{nullptr, 0, offset}; }
  static Positions Ids(const std::int64_t* ids, std::int64_t count) {
    return Positions{ids, count, 0};
  }

  // Position of token s of batch row b (after Validate).
  std::int64_t At(std::int64_t b, std::int64_t s, std::int64_t seq) const {
    if (ids == nullptr) return offset + s;
    return count == seq ? ids[s] : ids[b * seq + s];
  }
};

// Largest position the library accepts anywhere: 2^24 - 1 (the longest
// context whose numerics are specified and tested).
inline constexpr std::int64_t kMaxPosition = (std::int64_t{1} << 24) - 1;

// Validates positions for a [batch, seq] set of tokens: ids non-null with
// count == seq or batch*seq, every position in [min_position, kMaxPosition].
// Throws InvalidArgument naming `arg` and the offending index and value.
void ValidatePositions(const Positions& positions, std::int64_t batch, std::int64_t seq,
                       std::string_view arg, std::int64_t min_position = 0);

}  // namespace posenc
