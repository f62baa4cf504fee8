// SIMD (Highway) sinusoidal table kernels (Vaswani et al. 2017; layouts and
// conventions in include/posenc/sinusoidal.h; the executable spec is
// kernels/scalar/sinusoidal.h, whose row description is reused here).
//
// Numerics: angle pos * inv_freq[i] in float64, SinCos of simd_math-inl.h
// (float64 range reduction + fdlibm polynomials, within 4e-16 of the
// float64 angle's sin/cos; runs of consecutive positions use angle addition
// from a directly computed row every 8 rows, within ~1e-15), rounded once to
// the output dtype: float32 tables are within 2^-25 + 1e-15 of float64 truth
// for every position in [0, 2^24). AddSinusoidal adds in float64 and rounds
// once, like the scalar kernel. dtypes: float32, bfloat16, float16 (float64
// tables stay on the scalar kernel); unit column stride, any row stride.
// Arguments are validated by src/core/sinusoidal.cc.
#pragma once

#include <cstdint>

#include "kernels/scalar/sinusoidal.h"
#include "posenc/context.h"
#include "posenc/dtype.h"
#include "posenc/positions.h"

namespace posenc::kernels::simd {

// True when the fast kernel covers an output of `dtype` with `col_stride`.
bool SinusoidalSupported(DType dtype, std::int64_t col_stride);

// out[r, :] = PE(positions.At(0, r, rows)) for r < rows (positions: an
// offset, or `rows` ids).
void SinusoidalRows(const scalar::SinusoidalRowSpec& spec, const Positions& positions,
                    std::int64_t rows, void* out, DType dtype, std::int64_t row_stride,
                    const Context& ctx);

// x[b, s, :] += PE(positions.At(b, s, seq)); x is [batch, seq, dim] with
// element strides stride_batch, stride_seq and 1.
void AddSinusoidalRows(const scalar::SinusoidalRowSpec& spec, const Positions& positions,
                       std::int64_t batch, std::int64_t seq, void* x, DType dtype,
                       std::int64_t stride_batch, std::int64_t stride_seq, const Context& ctx);

// sin/cos of n float64 angles (|a| <= 5e7) with the kernels' SinCos
// (simd_math-inl.h), for its accuracy tests and diagnostics.
void SinCosBatch(const double* angles, std::int64_t n, double* sin, double* cos);

}  // namespace posenc::kernels::simd
