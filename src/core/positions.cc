#include "posenc/positions.h"

#include <string>

#include "posenc/error.h"

namespace posenc {

void ValidatePositions(const Positions& positions, std::int64_t batch, std::int64_t seq,
                       std::string_view arg, std::int64_t min_position) {
  const std::string a(arg);
  const std::string range =
      "a position in [" + std::to_string(min_position) + ", " + std::to_string(kMaxPosition) + "]";
  if (positions.ids == nullptr) {
    Require(positions.count == 0, a + ".count", positions.count, "0 when no ids are given");
    Require(positions.offset >= min_position && positions.offset <= kMaxPosition - (seq - 1),
            a + ".offset", positions.offset,
            range + " for offset + seq - 1 (seq = " + std::to_string(seq) + ")");
    return;
  }
  Require(positions.count == seq || positions.count == batch * seq, a + ".count", positions.count,
          "seq (" + std::to_string(seq) + ", shared by all rows) or batch*seq (" +
              std::to_string(batch * seq) + ")");
  for (std::int64_t i = 0; i < positions.count; ++i) {
    const std::int64_t p = positions.ids[i];
    if (p < min_position || p > kMaxPosition) {
      throw InvalidArgument(a + "[" + std::to_string(i) + "]: got " + std::to_string(p) +
                            ", expected " + range);
    }
  }
}

}  // namespace posenc
