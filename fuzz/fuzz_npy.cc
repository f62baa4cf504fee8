// libFuzzer target: the .npy reader (posenc/npy.h) on arbitrary bytes.
// Properties: ReadNpy throws only IoError (every malformed, truncated or
// oversized file), never allocates more than the input could fill, and an
// array it accepts round-trips: WriteNpy then ReadNpy gives the same dtype,
// shape and bytes; ToFloat32 / ToFloat64 give one value per element.
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz_util.h"
#include "posenc/error.h"
#include "posenc/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace posenc;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size), std::ios::binary);
  NpyArray a;
  try {
    a = ReadNpy(in, "fuzz.npy");
  } catch (const IoError&) {
    return 0;
  }
  FUZZ_CHECK(a.NumElements() * static_cast<std::int64_t>(DTypeSize(a.dtype)) ==
                 static_cast<std::int64_t>(a.bytes.size()),
             "byte count disagrees with the shape");
  FUZZ_CHECK(a.bytes.size() <= size, "more data bytes than the file holds");
  FUZZ_CHECK(static_cast<std::int64_t>(a.ToFloat32().size()) == a.NumElements(), "ToFloat32 size");
  FUZZ_CHECK(static_cast<std::int64_t>(a.ToFloat64().size()) == a.NumElements(), "ToFloat64 size");
  (void)a.ShapeText();
  TensorView view;
  try {
    view = a.View();
  } catch (const IoError&) {
    return 0;  // scalars, empty arrays, rank > 6 have no view
  }
  std::ostringstream out(std::ios::binary);
  WriteNpy(out, view, "fuzz-out.npy");
  std::istringstream back(out.str(), std::ios::binary);
  const NpyArray b = ReadNpy(back, "fuzz-out.npy");
  FUZZ_CHECK(b.dtype == a.dtype && b.shape == a.shape && b.bytes == a.bytes,
             "write + read does not round-trip");
  return 0;
}
