// Shared inputs and checks of the tile-kernel tests (flash_kernels_test.cc,
// flash_row_kernels_test.cc, flash_amx_emulated_test.cc):
//  - Random: n uniform floats in [lo, hi) from a fixed seed;
//  - StoredValues: float32 values and their bfloat16 and float16 roundings,
//    the rows of the kernels that read rows in place in their storage;
//  - ExpectWithin2x: FlashAttention's 2x rule for float32 kernels: the error
//    against float64 is at most 2x a plain float32 loop's, plus 4 float32
//    roundings of the largest value (the rounding floor);
//  - Dot: a dot product as a plain float32 loop and in float64;
//  - Bf16Tile: bfloat16 q and k packed as the flash paths pack them for the
//    bfloat16 logits (FlashTileLogitsBf16's layouts), and the check of a
//    logits tile against the float32 loop and float64.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "kernels/simd/flash.h"
#include "posenc/dtype.h"

namespace posenc::test {

using Index = std::int64_t;

inline std::vector<float> Random(std::size_t n, std::uint32_t seed, float lo = -1.0f,
                                 float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// The float32 values and, element for element, their bfloat16 and float16
// roundings (FloatToBF16, FloatToF16).
struct StoredValues {
  std::vector<float> f32;
  std::vector<std::uint16_t> bf16, f16;

  explicit StoredValues(std::vector<float> x)
      : f32(std::move(x)), bf16(f32.size()), f16(f32.size()) {
    for (std::size_t i = 0; i < f32.size(); ++i) {
      bf16[i] = FloatToBF16(f32[i]).bits;
      f16[i] = FloatToF16(f32[i]).bits;
    }
  }
  // Element i in `storage`: its address, and its value as float32.
  const void* At(kernels::simd::FlashStorage storage, Index i = 0) const {
    using kernels::simd::FlashStorage;
    const auto k = static_cast<std::size_t>(i);
    return storage == FlashStorage::kFloat32    ? static_cast<const void*>(&f32[k])
           : storage == FlashStorage::kBFloat16 ? static_cast<const void*>(&bf16[k])
                                                : static_cast<const void*>(&f16[k]);
  }
  float Value(kernels::simd::FlashStorage storage, std::size_t i) const {
    using kernels::simd::FlashStorage;
    return storage == FlashStorage::kFloat32    ? f32[i]
           : storage == FlashStorage::kBFloat16 ? BF16ToFloat(BFloat16{bf16[i]})
                                                : F16ToFloat(Float16{f16[i]});
  }
};

// max |fast - exact| <= 2 max |plain - exact| + 4 float32 roundings of the
// largest |exact| (the rounding floor).
inline void ExpectWithin2x(const std::vector<float>& fast, const std::vector<float>& plain,
                           const std::vector<double>& exact, const char* what) {
  double err = 0, plain_err = 0, mag = 1e-30;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    err = std::max(err, std::abs(fast[i] - exact[i]));
    plain_err = std::max(plain_err, std::abs(plain[i] - exact[i]));
    mag = std::max(mag, std::abs(exact[i]));
  }
  EXPECT_LE(err, 2.0 * plain_err + 4.0 * std::ldexp(mag, -24))
      << what << ": fast " << err << ", plain float32 " << plain_err;
}

// sum_x a[x] b[x] as a plain float32 loop and in float64: the two sides of
// the 2x rule for a dot-product kernel.
struct DotRef {
  float plain = 0;
  double exact = 0;
};
inline DotRef Dot(const float* a, const float* b, Index n) {
  DotRef d;
  for (Index x = 0; x < n; ++x) {
    d.plain += a[x] * b[x];
    d.exact += double(a[x]) * b[x];
  }
  return d;
}

// bfloat16 q [nq, dim] and k [nk, dim] values, packed as the flash paths
// pack them: q pairs [nq, ldq], k^T pairs [dim / 2, ld, 2] with ld = nk
// rounded up to 16 (kFlashPad) and zero columns past nk.
struct Bf16Tile {
  Index nq, nk, dim, ld, ldq;
  std::vector<float> q, k;
  std::vector<std::uint32_t> q_pairs;
  std::vector<std::uint16_t> kt_pairs;
  Bf16Tile(Index nq_, Index nk_, Index dim_) : nq(nq_), nk(nk_), dim(dim_) {
    ld = (nk + 15) / 16 * 16;
    ldq = dim / 2 + 3;  // a row stride wider than the row
    q = Random(nq * dim, 10);
    k = Random(nk * dim, 11);
    for (float& x : q) x = BF16ToFloat(FloatToBF16(x));
    for (float& x : k) x = BF16ToFloat(FloatToBF16(x));
    q_pairs.assign(nq * ldq, 0);
    for (Index i = 0; i < nq; ++i)
      for (Index p = 0; p < dim / 2; ++p) {
        q_pairs[i * ldq + p] = std::uint32_t{FloatToBF16(q[i * dim + 2 * p]).bits} |
                               std::uint32_t{FloatToBF16(q[i * dim + 2 * p + 1]).bits} << 16;
      }
    kt_pairs.assign(dim * ld, 0);
    for (Index j = 0; j < nk; ++j)
      for (Index x = 0; x < dim; ++x) {
        kt_pairs[((x / 2) * ld + j) * 2 + x % 2] = FloatToBF16(k[j * dim + x]).bits;
      }
  }
  // The product (float32 loop and float64) and the 2x check of `fast`.
  void Check(const std::vector<float>& fast, const char* what) const {
    std::vector<float> got, plain;
    std::vector<double> exact;
    for (Index i = 0; i < nq; ++i)
      for (Index j = 0; j < nk; ++j) {
        const DotRef dot = Dot(&q[i * dim], &k[j * dim], dim);
        got.push_back(fast[i * ld + j]);
        plain.push_back(dot.plain);
        exact.push_back(dot.exact);
      }
    ExpectWithin2x(got, plain, exact, what);
  }
};

}  // namespace posenc::test
