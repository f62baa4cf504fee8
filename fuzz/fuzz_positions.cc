// libFuzzer target: the position lists and relative ranges of the command
// line (cli/output.h ParseIntList / ParseRelativeList, cli/table_writer.h
// ResolvePositions). Properties: they throw only InvalidArgument; an
// accepted relative list holds at most 2^20 + 1 values, each in
// [-(2^24 - 1), 2^24 - 1]; an id list at most 2^24 values; ResolvePositions
// returns positions in [0, 2^24) (offset form) with rows * dim <= 2^28.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "output.h"
#include "posenc/error.h"
#include "posenc/positions.h"
#include "table_writer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace posenc;
  FuzzedDataProvider fdp(data, size);
  const int which = fdp.ConsumeIntegralInRange<int>(0, 2);
  try {
    if (which == 0) {
      const std::string text = fdp.ConsumeRemainingBytesAsString();
      const auto v = cli::ParseIntList(text, "--position-ids");
      FUZZ_CHECK(!v.empty() && static_cast<std::int64_t>(v.size()) <= cli::kMaxListValues,
                 "list size");
    } else if (which == 1) {
      const std::string text = fdp.ConsumeRemainingBytesAsString();
      const auto v = cli::ParseRelativeList(text, "--relative");
      FUZZ_CHECK(!v.empty() && v.size() <= kMaxPosition * 2 + 1, "relative list size");
      for (const std::int64_t r : v) {
        FUZZ_CHECK(r >= -kMaxPosition && r <= kMaxPosition, "relative position out of domain");
      }
    } else {
      cli::PositionOptions o;
      const std::int64_t dim = fdp.ConsumeBool()
                                   ? fdp.ConsumeIntegral<std::int64_t>()
                                   : fdp.ConsumeIntegralInRange<std::int64_t>(1, 4096);
      if (fdp.ConsumeBool()) {
        o.num_positions = fdp.ConsumeBool() ? fdp.ConsumeIntegral<std::int64_t>()
                                            : fdp.ConsumeIntegralInRange<std::int64_t>(0, 5000);
        o.offset = fdp.ConsumeBool() ? fdp.ConsumeIntegral<std::int64_t>()
                                     : fdp.ConsumeIntegralInRange<std::int64_t>(-5, 1 << 24);
      } else {
        o.position_ids = fdp.ConsumeRemainingBytesAsString();
      }
      const auto v = cli::ResolvePositions(o, dim);
      FUZZ_CHECK(static_cast<__int128>(v.size()) * dim <= (static_cast<__int128>(1) << 28),
                 "table size");
      if (o.position_ids.empty()) {
        for (const std::int64_t p : v) FUZZ_CHECK(p >= 0 && p <= kMaxPosition, "position");
      }
    }
  } catch (const InvalidArgument&) {
  }
  return 0;
}
