// Scalar reference kernels for rotary position embedding (RoPE): plain loops,
// the executable specification the SIMD kernels are tested against. Paper and
// conventions: include/posenc/rope.h.
//
// Two pieces, both per token: RopeTrig (cos/sin of one position's angles,
// attention factor included) and RopeRotateRow (rotates one head_dim row with
// given cos/sin), each in two numerics (RopeMath: kAccurate in float64, kHF
// Hugging Face's float32 recipe), described above each function.
// dtypes: float32, float64, bfloat16, float16 storage. Valid positions:
// |p| <= 2^24 - 1. Arguments are validated by src/core/rope.cc.
#pragma once

#include <cstdint>

#include "posenc/dtype.h"

namespace posenc::kernels::scalar {

enum class RopeMath : std::uint8_t { kAccurate, kHF };
enum class RopePairs : std::uint8_t { kHalfSplit, kInterleaved };

struct RopeTrigSpec {
  const double* inv_freq = nullptr;  // `half` frequencies (radians per position)
  std::int64_t half = 0;             // rotary_dim / 2
  double attention_factor = 1.0;
  RopeMath math = RopeMath::kAccurate;
  // kHF: dtype cos/sin are cast to (kFloat32: keep float32 values, as
  // RopeRotateRow expects; it casts them to the row's dtype itself).
  DType round_to = DType::kFloat32;
};

// cos[j], sin[j] for j < spec.half at position `pos`, attention factor
// included, in one of two numerics:
//   kAccurate: angle = p * inv_freq in float64, std::cos/std::sin on double
//     (exact range reduction), times attention_factor in float64. Error vs
//     float64 truth: <= 2^-29 rad in the angle for |p| < 2^24, so
//     |cos - truth| <= 3e-9 * attention_factor.
//   kHF: Hugging Face's float32 recipe: angle = float32(float32(p) *
//     float32(inv_freq)); cos/sin of that angle rounded to float32; times
//     float32(attention_factor) in float32; rounded to the activation dtype
//     (HF's cos.to(x.dtype)). Within 1 ulp of torch's float32 cos/sin of the
//     same angle.
void RopeTrig(const RopeTrigSpec& spec, std::int64_t pos, double* cos, double* sin);

struct RopeRowSpec {
  std::int64_t half = 0;      // rotary_dim / 2
  std::int64_t head_dim = 0;  // >= 2 * half
  RopePairs pairs = RopePairs::kHalfSplit;
  RopeMath math = RopeMath::kAccurate;
  DType dtype = DType::kFloat32;  // storage of in and out
};

// Rotates the row at `in` (elements in * k * in_stride, k < head_dim) into
// `out` (stride out_stride). in == out with equal strides works in place.
// cos/sin have spec.half entries (a negated sin gives the inverse rotation).
// Each pair becomes (x, y) -> (x*c - y*s, y*c + x*s); pairs (j, j + half)
// (kHalfSplit) or (2j, 2j+1) (kInterleaved); dims [2*half, head_dim) are
// copied (nothing to do in place).
//   kAccurate: in float64, rounded once to the storage dtype.
//   kHF: cos/sin (float32 values) cast to the storage dtype, then
//     q*cos + rotate_half(q)*sin with each product and the sum rounded to the
//     storage dtype (float32 ops for float32, float64 ops for float64,
//     float32 ops rounded to bf16/f16 for 16-bit types: what torch does on
//     CPU).
void RopeRotateRow(const RopeRowSpec& spec, const double* cos, const double* sin, const void* in,
                   std::int64_t in_stride, void* out, std::int64_t out_stride);

}  // namespace posenc::kernels::scalar
