// Helpers shared by the SIMD RoPE tests (simd_rope_test.cc,
// simd_rope_varlen_test.cc): a typed byte buffer of random values, the
// element-wise comparison and the fast-path tolerance.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/dtype.h"
#include "posenc/tensor.h"
#include "test_util.h"

namespace posenc::test {

// A tensor's bytes with its dtype; values uniform in [-1, 1] (rounded to dtype).
struct Buffer {
  Buffer(DType d, std::int64_t n, std::uint32_t seed) : dtype(d), bytes(n * DTypeSize(d)) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (std::int64_t i = 0; i < n; ++i) StoreFromDouble(bytes.data(), dtype, i, u(rng));
  }
  std::int64_t size() const { return static_cast<std::int64_t>(bytes.size() / DTypeSize(dtype)); }
  std::vector<double> Values() const {
    std::vector<double> v(static_cast<std::size_t>(size()));
    for (std::int64_t i = 0; i < size(); ++i) v[i] = LoadAsDouble(bytes.data(), dtype, i);
    return v;
  }
  TensorView View(std::initializer_list<std::int64_t> shape) {
    return TensorView::Contiguous(bytes.data(), dtype, shape);
  }
  // [b, s, h, d] in bshd or [b, h, s, d] in bhsd.
  TensorView View(AttentionLayout layout, std::int64_t b, std::int64_t s, std::int64_t h,
                  std::int64_t d) {
    return layout == AttentionLayout::kBSHD ? View({b, s, h, d}) : View({b, h, s, d});
  }
  // [1, n, heads, hd] view of tokens [t0, t0 + n) of a packed [T, heads, hd] buffer.
  TensorView Slice(std::int64_t t0, std::int64_t n, std::int64_t heads, std::int64_t hd) {
    return TensorView::Contiguous(bytes.data() + t0 * heads * hd * DTypeSize(dtype), dtype,
                                  {1, n, heads, hd});
  }
  DType dtype;
  std::vector<unsigned char> bytes;
};

// Max |a - b| must be <= tol; reports the first offending index.
inline void ExpectClose(const std::vector<double>& a, const std::vector<double>& b, double tol,
                        const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_LE(std::abs(a[i] - b[i]), tol)
        << what << " index " << i << ": " << a[i] << " vs " << b[i];
  }
}

// Tolerance of the fast path vs the float64 reference for inputs in [-1, 1]:
// float32 arithmetic (a few ulp of float32) plus, for 16-bit storage, one
// ulp of the storage type from a rounding flipped by that difference.
inline double RopeTol(DType dtype, double factor = 1.0) {
  const double f32 = 8 * Eps(DType::kFloat32);
  return factor * (dtype == DType::kFloat32 ? f32 : 3 * Eps(dtype) + f32);
}

}  // namespace posenc::test
