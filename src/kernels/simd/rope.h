// SIMD (Highway) RoPE kernels: the rotation of q/k and the cos/sin table.
//
// Same formulas, pairings and conventions as the scalar reference
// (kernels/scalar/rope.h, the executable spec; paper and conventions in
// include/posenc/rope.h). Numerics: above RopeApplySpec and its math and
// cache fields. Pairings: kHalfSplit (j, j + d/2) and kInterleaved (2j, 2j+1);
// partial rotary (dims >= rotary_dim copied or left in place); both layouts
// (any batch/seq/head strides, unit stride along head_dim); several tensors
// (q and k) in one pass sharing the per-token cos/sin; in place or out of
// place; forward or inverse (sin_sign = -1). Valid positions: |p| <= 2^24 - 1
// with max inv_freq <= kMaxFastInvFreq (else the caller uses the scalar
// kernel). Arguments are validated by src/core/rope.cc; this layer only
// asserts.
#pragma once

#include <cstdint>

#include "kernels/scalar/rope.h"
#include "posenc/context.h"
#include "posenc/dtype.h"
#include "posenc/positions.h"
#include "posenc/tensor.h"

namespace posenc::kernels::simd {

// Largest inv_freq the fast path accepts: |angle| <= 2^24 * 2.9 < 5e7 rad
// keeps the Cody-Waite reduction exact (simd_math-inl.h).
inline constexpr double kMaxFastInvFreq = 2.9;

// One tensor of a pass. Strides are in elements; the head_dim stride is 1.
struct RopeTensor {
  const void* in = nullptr;
  void* out = nullptr;  // == in for in place (with equal strides)
  DType dtype = DType::kFloat32;
  std::int64_t heads = 0;
  std::int64_t in_stride_batch = 0, in_stride_seq = 0, in_stride_head = 0;
  std::int64_t out_stride_batch = 0, out_stride_seq = 0, out_stride_head = 0;
};

// A precomputed cos/sin cache ([rows, 2*half]: cos in columns [0, half),
// sin in [half, 2*half)) used instead of inv_freq when data is non-null.
struct RopeCacheSource {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  std::int64_t row_stride = 0, col_stride = 0;  // elements
};

// kAccurate numerics of RopeApply:
//  - cos/sin: angle p * inv_freq[j] in float64, SinCos of simd_math-inl.h
//    (range-reduced in float64, within 4e-16 of the float64 angle's sin/cos),
//    times attention_factor in float64, then rounded to float32. So every
//    cos/sin the rotation uses is within 2^-25 + 1e-15 of float64 truth (the
//    accurate bound is 1e-6) for every |p| < 2^24. Runs of consecutive
//    positions use exact-to-1e-15 angle addition (simd_math-inl.h).
//  - rotation: float32 arithmetic (FMA where the target has it), storage
//    float32 / bfloat16 / float16, rounded once (round to nearest even).
//    Versus the float64 reference: |error| <= (|x| + |y|) * 2^-23 before
//    the storage rounding, so float32 results are within a few ulp and
//    16-bit results within 1 ulp of the storage type.
struct RopeApplySpec {
  const double* inv_freq = nullptr;  // half frequencies (unused with a cache)
  std::int64_t half = 0;             // rotary_dim / 2
  std::int64_t head_dim = 0;
  double attention_factor = 1.0;
  double sin_sign = 1.0;  // -1: inverse rotation
  scalar::RopePairs pairs = scalar::RopePairs::kHalfSplit;
  std::int64_t batch = 0, seq = 0;
  Positions positions;  // validated for [batch, seq]
  // Non-null data: cos/sin of position p are cache row p (validated rows),
  // times sin_sign; attention_factor is not applied (the cache holds it).
  // The cached cos/sin are rounded to float32, then rotated as kAccurate.
  RopeCacheSource cache;
  // kHF: HF's float32 recipe (scalar::RopeTrig / RopeRotateRow kHF); not
  // combined with a cache (the caller keeps that case on the scalar kernel).
  // The scalar kHF recipe step for step: float32 angle float32(p) * inv_freq,
  // cos/sin of it by SinCos (float64, 4e-16) rounded to float32, times the
  // factor in float32, rounded to the storage type; each product and the sum
  // rounded to it, no FMA (-ffp-contract=off). Bit-identical to the scalar
  // kernel unless a float64 cos/sin lies within 4e-16 of a float32 rounding
  // boundary (~1e-8 of values: then 1 ulp of float32 in that cos/sin).
  // Tested bit for bit on every target. Applies to RopeApply only.
  scalar::RopeMath math = scalar::RopeMath::kAccurate;
};

// True when dtype is float32, bfloat16 or float16.
bool RopeFastDType(DType dtype);

// True when the fast kernel covers the call: fast dtypes, at most 2 tensors,
// every inv_freq <= kMaxFastInvFreq (or a cache as the angle source).
bool RopeApplySupported(const RopeApplySpec& spec, const RopeTensor* tensors, int num_tensors);

// Rotates every tensor; one dynamic dispatch, then ctx.ParallelFor over
// (position tile [x batch row] x head group) tasks.
void RopeApply(const RopeApplySpec& spec, const RopeTensor* tensors, int num_tensors,
               const Context& ctx);

// A validated input/output view pair with its attention dims (out == in in
// place).
struct RopeViews {
  const TensorView* in = nullptr;
  const TensorView* out = nullptr;
  const AttentionDims* din = nullptr;
  const AttentionDims* dout = nullptr;
};

// Runs RopeApply and returns true when the fast kernel covers the call
// (RopeApplySupported, unit head_dim stride in and out); else does nothing
// and returns false. spec.batch/seq/positions describe the views.
bool TryRopeApply(const RopeApplySpec& spec, const RopeViews* views, int num_views,
                  const Context& ctx);

// One output table of RopeCosSin: [count, rotary_dim], unit column stride.
struct RopeTableOut {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  std::int64_t row_stride = 0;  // elements
};

struct RopeTableSpec {
  const double* inv_freq = nullptr;
  std::int64_t half = 0;
  double attention_factor = 1.0;
  scalar::RopePairs pairs = scalar::RopePairs::kHalfSplit;
  Positions positions;  // offset + r, or ids[r] (count ids)
  std::int64_t count = 0;
};

bool RopeCosSinSupported(const RopeTableSpec& spec, const RopeTableOut& cos,
                         const RopeTableOut& sin);

// cos/sin tables in HF's column layout (see posenc/rope.h RopeCosSin).
// TryRopeCosSin: runs it and returns true when RopeCosSinSupported and both
// views have unit column stride; else returns false.
bool TryRopeCosSin(const RopeTableSpec& spec, const TensorView& cos, const TensorView& sin,
                   const Context& ctx);
void RopeCosSinTable(const RopeTableSpec& spec, const RopeTableOut& cos, const RopeTableOut& sin,
                     const Context& ctx);

}  // namespace posenc::kernels::simd
