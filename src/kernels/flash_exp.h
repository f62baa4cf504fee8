// Which exp computes the attention probabilities P = exp(x - m) of the
// fused attention (FlashExp), shared by the scalar and the Highway kernels
// (kernels/scalar/flash.h, kernels/simd/flash.h), and the scalar form of the
// bfloat16 one. Formulas and error bounds: the comment above FlashExp.
#pragma once

#include <algorithm>
#include <cmath>

namespace posenc::kernels {

// FlashExp::kFloat32: P to ~1 float32 ulp (Cephes expf: a two-constant
// Cody-Waite reduction and a degree-7 form; kernels/simd/flash_softmax-inl.h
// ExpNonPositive, std::exp in the scalar kernels).
// FlashExp::kBFloat16: P that is rounded to bfloat16 before it enters a
// product (FlashPrecision::kBFloat16, FlashAttention-2's bfloat16 P):
//   n = round(y log2 e), r = y - n ln2 (one float32 constant: r off by at
//   most 126 x 1.5e-9), exp(r) ~ c0 + r (c1 + r (c2 + r (c3 + r c4))) on
//   |r| <= ln2 / 2, then 2^n.
// c0..c4 are a minimax fit of the relative error with float32 coefficients
// (Lawson's iteration on 20001 points; 2.7e-6 at most, evaluated in float32
// over 200001 points). Relative error <= 3e-6 for y in [-87, 0] (7e-6 on
// targets without FMA, SSE4 and SCALAR, whose y - n ln2 rounds the product
// first: up to half an ulp of 87; tests/unit/flash_kernels_test.cc,
// Bf16ExpWithinItsBound), against the 2^-9 = 2e-3 of the bfloat16 rounding
// that follows; the unrounded sums l of the forward carry the same, which
// cancels in O = acc / l up to its variation along a row. 9 vector ops per
// 16 lanes on AVX-512 instead of 13 (docs/PERFORMANCE.md, "The training
// shape, seventh pass"). The forward and the backward of one call use the
// same exp, so the backward's P = exp(x - lse) keeps the forward's
// normalisation. The online-softmax rescale alpha keeps kFloat32's exp: it
// compounds over the key tiles.
enum class FlashExp : int { kFloat32 = 0, kBFloat16 = 1 };

// The FlashExp::kBFloat16 coefficients, c0 first.
inline constexpr float kBf16ExpC[5] = {0.9999993f, 0.9999634f, 0.50004363f, 0.16790916f,
                                       0.04145842f};
inline constexpr float kBf16ExpLn2 = 0.693147182f;

// FlashExp::kBFloat16's exp(y) for y <= 0 (clamped to >= -87) in scalar
// float32: the same operations as the Highway kernels' ExpNonPositiveBf16
// (FMAs, 2^n exact), for the scalar backend.
inline float ExpNonPositiveBf16(float y) {
  y = std::max(y, -87.0f);
  const float magic = 12582912.0f;
  const float n = std::fma(y, 1.44269504088896341f, magic) - magic;
  const float r = std::fma(-n, kBf16ExpLn2, y);
  float e = std::fma(kBf16ExpC[4], r, kBf16ExpC[3]);
  e = std::fma(e, r, kBf16ExpC[2]);
  e = std::fma(e, r, kBf16ExpC[1]);
  e = std::fma(e, r, kBf16ExpC[0]);
  return std::ldexp(e, static_cast<int>(n));
}

}  // namespace posenc::kernels
