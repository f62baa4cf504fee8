#include "posenc/positions.h"

#include <string>

#include "posenc/error.h"

namespace posenc {

void ValidatePositions(const Positions& positions, std::int64_t batch, std::int64_t seq,
                       std::string_view arg, std::int64_t min_position) {
  // Messages are built only on failure: this runs once per RoPE and attention
  // call, and a call in the steady state allocates nothing (c.h, "Memory").
  const auto name = [&](const char* field) { return std::string(arg) + field; };
  const auto range = [&] {
    return "a position in [" + std::to_string(min_position) + ", " + std::to_string(kMaxPosition) +
           "]";
  };
  if (positions.ids == nullptr) {
    if (positions.count != 0) {
      FailArgument(name(".count"), positions.count, "0 when no ids are given");
    }
    if (positions.offset < min_position || positions.offset > kMaxPosition - (seq - 1)) {
      FailArgument(name(".offset"), positions.offset,
                   range() + " for offset + seq - 1 (seq = " + std::to_string(seq) + ")");
    }
    return;
  }
  if (positions.count != seq && positions.count != batch * seq) {
    FailArgument(name(".count"), positions.count,
                 "seq (" + std::to_string(seq) + ", shared by all rows) or batch*seq (" +
                     std::to_string(batch * seq) + ")");
  }
  for (std::int64_t i = 0; i < positions.count; ++i) {
    const std::int64_t p = positions.ids[i];
    if (p < min_position || p > kMaxPosition) {
      throw InvalidArgument(std::string(arg) + "[" + std::to_string(i) + "]: got " +
                            std::to_string(p) + ", expected " + range());
    }
  }
}

}  // namespace posenc
