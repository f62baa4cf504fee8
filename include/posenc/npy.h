// posenc/npy.h: reading and writing NumPy .npy files.
//
// Format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
//   "\x93NUMPY" | major | minor | header length (uint16 LE for v1.0, uint32 LE
//   for v2.0/v3.0) | header | raw data
// The header is a Python dict literal with exactly the keys 'descr',
// 'fortran_order' and 'shape', padded with spaces and ended by '\n' so that
// the data starts on a 64-byte boundary (what numpy >= 1.16 writes; readers
// accept any padding).
//
// Supported: little-endian float32 ('<f4'), float64 ('<f8') and, for reading
// and writing storage, float16 ('<f2'); C order; versions 1.0, 2.0 and 3.0
// (3.0 differs only in allowing a UTF-8 header). Anything else -- big-endian
// data, fortran_order True, other dtypes, a truncated file, trailing bytes, a
// malformed header -- is an IoError naming the file and the problem. The
// writer emits version 1.0 with numpy's own header text and 64-byte
// alignment (byte-identical to numpy.save for the same array), so numpy.load
// reads every file it writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "posenc/dtype.h"
#include "posenc/tensor.h"

namespace posenc {

// An array read from a .npy file: C-order little-endian elements.
struct NpyArray {
  std::string source;               // file name (or stream name) for messages
  DType dtype = DType::kFloat32;    // kFloat32, kFloat64 or kFloat16
  std::vector<std::int64_t> shape;  // rank 0 (a scalar) .. any; sizes may be 0
  std::vector<std::byte> bytes;     // NumElements() * DTypeSize(dtype) bytes

  std::int64_t NumElements() const;
  int rank() const { return static_cast<int>(shape.size()); }
  // "(3, 4)" in Python's tuple notation.
  std::string ShapeText() const;
  // Throws IoError naming the source unless the array has `rank` dimensions.
  void RequireRank(int expected_rank) const;
  // Contiguous view of the data (rank 1..kMaxRank, every size >= 1); throws
  // IoError naming the source for a scalar, an empty array or rank > 6.
  TensorView View() const;
  // Elements converted to float32 / float64 (exact for float16 -> float32 and
  // float32 -> float64; float64 -> float32 rounds to nearest).
  std::vector<float> ToFloat32() const;
  std::vector<double> ToFloat64() const;
};

// Reads the .npy file at `path`; throws IoError naming the path and the
// problem if it is missing, unreadable, truncated or malformed.
NpyArray ReadNpy(const std::string& path);
// Same, from an open binary stream; `name` is used in messages.
NpyArray ReadNpy(std::istream& in, const std::string& name);

// Writes `view` (any strides; float32, float64 or float16) as a C-order .npy
// array of the same shape and dtype. bfloat16 has no .npy dtype and is an
// InvalidArgument; a file that cannot be written is an IoError naming it.
void WriteNpy(const std::string& path, const TensorView& view);
void WriteNpy(std::ostream& out, const TensorView& view, const std::string& name);

}  // namespace posenc
