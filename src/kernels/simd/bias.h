// SIMD (Highway) attention-bias kernels: ALiBi (Press et al. 2022) and T5
// relative-position buckets (Raffel et al. 2020). Formulas and conventions:
// include/posenc/alibi.h and include/posenc/t5.h; the executable spec is the
// scalar code of src/core/alibi.cc (FillTile) and src/core/t5.cc
// (T5Bucketer::Bucket, Tile, FillBias), which stays selectable with
// Backend::kScalar. Results are bit-identical to it in every dtype (numerics:
// AlibiRowsSpec, T5BucketSpec and T5TableSpec below).
// Design: both biases depend on key - query only, so the rows of a block are
// windows of one Toeplitz "line" built once (see "Toeplitz layout" below).
// dtypes: float32, float64, bfloat16, float16 outputs with unit column
// stride (any row/head stride). Positions: as the public API (|rel| <=
// 2^24 - 1). Arguments are validated by src/core; these entry points are
// unchecked.
#pragma once

#include <cstdint>

#include "posenc/context.h"
#include "posenc/dtype.h"
#include "posenc/positions.h"

namespace posenc::kernels::simd {

// True when the fast bias kernels cover an output of `dtype` whose columns
// have element stride `col_stride`.
bool BiasSupported(DType dtype, std::int64_t col_stride);

// Mask convention of a bias, kernel-side (mapped from AlibiForm).
enum class BiasMask : std::uint8_t { kCausal, kNone };

// Toeplitz layout (AlibiRows, T5FillRows, T5Tile). Both biases depend on
// (key - query) only, so with consecutive keys k0..k0+cols-1 a run of m
// consecutive query positions p0..p0+m-1 is a Toeplitz block: row r is the
// window [m-1-r, m-1-r+cols) of one "line" of m + cols - 1 values, indexed by
// rel = k0 - p0 - (m-1) + t. Each task builds the line once (vectorised, in
// the output dtype) and writes every row as a copy of its window, so the rows
// cost what a store of their bytes costs. Lines are built per (row tile of
// <= 64 rows) x (column chunk of <= 4096 keys): scratch is bounded (~100 KiB
// of stack, no allocation) and the line work is ~1/64 of the output. Query
// ids that are not consecutive form runs of one row (the line is then the
// row itself, computed directly); T5 key ids that are not consecutive are
// computed element by element.

// ALiBi numerics: bias = 0.0 - slope * |d| (or -infinity for causal future
// keys) in float64, like AlibiBiasValue, then rounded like StoreFromDouble:
// float64 as is; float32 by one round-to-nearest-even; bfloat16/float16 by
// float64 -> float32 -> 16 bits (the scalar path's two roundings, with the
// exact conversions of simd_math-inl.h). Distances are exact in float64.
// Error vs float64 (as the scalar path): float64 output is the float64
// product (0.5 ulp of float64), float32 within 0.5 ulp of it, bfloat16 /
// float16 within 0.5 ulp + 2^-24 relative (float32 first).
//
// ALiBi rows: for head h < num_heads (slope slopes[h]), row r < rows (query
// position query_first + r) and column c < cols (key position key_first + c):
// out[h * head_stride + r * row_stride + c] = AlibiBiasValue(slopes[h], ...),
// strides in elements. Tasks: heads x 64-row tiles, through ctx.
struct AlibiRowsSpec {
  const double* slopes = nullptr;
  std::int64_t num_heads = 0;
  BiasMask mask = BiasMask::kCausal;
  std::int64_t query_first = 0, rows = 0;
  std::int64_t key_first = 0, cols = 0;
};
void AlibiRows(const AlibiRowsSpec& spec, void* out, DType dtype, std::int64_t head_stride,
               std::int64_t row_stride, const Context& ctx);

// What the vector bucket code needs of a validated T5Bucketer; scalar_bucket
// (called with `bucketer`) is the reference used for boundary lanes.
//
// Bucket numerics: n < max_exact -> n; otherwise HF's float32 formula
// trunc(logf(float(n) / float(max_exact)) / float(ln(max_distance /
// max_exact)) * float(nb - max_exact)). The vector path takes the float32
// ratio (the same correctly rounded division), its logarithm in float64
// (Highway Log, <= 4 ulp of float64) rounded to float32, then the same
// float32 division and product. glibc's logf is not correctly rounded (its
// source states 0.82 ulp); ours is within 0.5 ulp + 4 float64 ulps, so the
// two float32 logs differ by at most 2 ulps (2^-22 relative) and the
// pre-truncation value s by < 2^-21 relative; any lane whose s lies within
// 2^-19 * max(s, 1) of an integer (and below the cap) is recomputed by the
// scalar reference itself (scalar_bucket). Buckets are therefore identical
// to T5Bucketer::Bucket for every input (tested densely and at the bucket
// boundaries up to |rel| = 2^24 - 1).
enum class T5Sign : std::uint8_t { kBidirectional, kCausal };
struct T5BucketSpec {
  T5Sign sign = T5Sign::kBidirectional;
  std::int64_t nb = 0;         // half_buckets(): num_buckets/2 or num_buckets
  std::int64_t max_exact = 0;  // nb / 2
  float log_denominator = 0;   // float32(ln(max_distance / max_exact))
  std::int64_t (*scalar_bucket)(const void* bucketer, std::int64_t rel) = nullptr;
  const void* bucketer = nullptr;
};

// out[i] = bucket of rel = first + i, i < count (tests and diagnostics).
void T5BucketRange(const T5BucketSpec& spec, std::int64_t first, std::int64_t count,
                   std::int32_t* out);

// Number of boundary lanes the vector path handed to scalar_bucket over the
// same range (diagnostics: shows the fallback is rare and exercised).
std::int64_t T5BucketFallbacks(const T5BucketSpec& spec, std::int64_t first, std::int64_t count);

// The T5 bias table [num_buckets, heads] float32 row-major.
// Values: table[bucket, head] (float32, vector GatherIndex; lane by lane for
// tables of >= 2^31 entries) rounded to the output dtype as the scalar path
// does; T5Tile's kAdd (BiasTile) adds in the output type. Error vs float64:
// the table's float32 entries, exact in float32/float64 and rounded once to
// 16 bits.
struct T5TableSpec {
  T5BucketSpec buckets;
  const float* table = nullptr;
  std::int64_t num_buckets = 0;
  std::int64_t heads = 0;
};

// Whole bias: out[h * head_stride + r * row_stride + c] = table[bucket(c -
// query_positions.At(0, r, rows)), h] for h < heads, r < rows, c < cols
// (keys at 0..cols-1). Tasks: 64-row tiles x head groups, through ctx.
void T5FillRows(const T5TableSpec& spec, const Positions& query_positions, std::int64_t rows,
                std::int64_t cols, void* out, DType dtype, std::int64_t head_stride,
                std::int64_t row_stride, const Context& ctx);

// T5BiasTable::BiasTile: out[r * ld + c] (= or +=) table[bucket(key_pos[c] -
// query_pos[r]), head] for r < nq, c < nk; out is float32 or float64.
// Runs on the calling thread, allocates nothing.
enum class TileWrite : std::uint8_t { kOverwrite, kAdd };
void T5Tile(const T5TableSpec& spec, std::int64_t head, const std::int64_t* query_pos,
            std::int64_t nq, const std::int64_t* key_pos, std::int64_t nk, void* out, DType dtype,
            std::int64_t ld, TileWrite write);

}  // namespace posenc::kernels::simd
