// Scalar reference kernel for sinusoidal tables: plain loops in float64.
// The executable specification the SIMD kernel is tested against.
#pragma once

#include <cstdint>

#include "posenc/dtype.h"

namespace posenc::kernels::scalar {

// Column layout of one table row, resolved from the public layout enum.
struct SinusoidalRowSpec {
  const double* inv_freq;  // num_sin frequencies
  std::int64_t num_sin;    // columns holding sines
  std::int64_t num_cos;    // columns holding cosines (<= num_sin)
  bool interleaved;        // sin/cos alternate (else [sin... | cos...])
};

// Computes the row of position `pos` in float64 and stores it, converted to
// `dtype`, at out + c * col_stride for c < num_sin + num_cos. When `add` is
// true the row is added to what is there instead.
void SinusoidalRow(const SinusoidalRowSpec& spec, std::int64_t pos, void* out, DType dtype,
                   std::int64_t col_stride, bool add);

}  // namespace posenc::kernels::scalar
