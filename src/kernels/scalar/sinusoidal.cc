#include "kernels/scalar/sinusoidal.h"

#include <cmath>

namespace posenc::kernels::scalar {

void SinusoidalRow(const SinusoidalRowSpec& spec, std::int64_t pos, void* out, DType dtype,
                   std::int64_t col_stride, bool add) {
  const double p = static_cast<double>(pos);
  auto put = [&](std::int64_t col, double v) {
    const std::int64_t i = col * col_stride;
    StoreFromDouble(out, dtype, i, add ? LoadAsDouble(out, dtype, i) + v : v);
  };
  for (std::int64_t i = 0; i < spec.num_sin; ++i) {
    const double angle = p * spec.inv_freq[i];
    const std::int64_t sin_col = spec.interleaved ? 2 * i : i;
    put(sin_col, std::sin(angle));
    if (i < spec.num_cos) {
      const std::int64_t cos_col = spec.interleaved ? 2 * i + 1 : spec.num_sin + i;
      put(cos_col, std::cos(angle));
    }
  }
}

}  // namespace posenc::kernels::scalar
