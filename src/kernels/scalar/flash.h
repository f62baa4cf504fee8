// Scalar reference kernels of the flash attention tiles and decode rows:
// plain loops over the same padded buffers as the Highway kernels
// (kernels/simd/flash.h, which documents each formula and buffer rule), with
// sequential float32 sums. They run for Backend::kScalar and are what the
// SIMD kernels are tested against (tests/unit/flash_kernels_test.cc).
// dtype float32; -inf marks masked logits and becomes probability 0.
#pragma once

#include <cstdint>

#include "kernels/flash_exp.h"

namespace posenc::kernels::scalar {

// S[i, j] = sum_x Q[i, x] * KT[x, j]: [nq, D] (row stride ldq) x [D, ld].
void FlashTileLogits(const float* q, std::int64_t ldq, const float* kt, std::int64_t nq,
                     std::int64_t dim, std::int64_t ld, float* s);

// row[j] = exp(row[j] - max) (-inf -> 0) for j < n, with the exp `exp`
// names (kernels/flash_exp.h; std::exp for kFloat32); returns the row sum.
float FlashExpRow(float* row, std::int64_t n, float max, FlashExp exp = FlashExp::kFloat32);

// acc[i, :] += sum_j P[i, j] V[j, :] (zero probabilities skipped).
void FlashAccumulatePV(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                       std::int64_t nk, std::int64_t ldv, float* acc);

// acc[i, :] = alpha[i] * acc[i, :] + sum_j P[i, j] V[j, :] (alpha null: 1).
void FlashAccumulatePVScaled(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                             std::int64_t nk, std::int64_t ldv, const float* alpha, float* acc);

// acc[j, :] += sum_i P[i, j] V[i, :] (P read in place, [nq, ldp]).
void FlashAccumulatePTV(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                        std::int64_t nk, std::int64_t ldv, float* acc);

// The backward row: P = exp(s * scale + bias - lse) into s (0 past nk and
// for -inf), dS = P (dp - delta) into dp, for j < ld; exp as FlashExpRow.
void FlashBackwardRow(float* s, float* dp, std::int64_t nk, std::int64_t ld, float scale,
                      const float* bias, float lse, float delta, FlashExp exp = FlashExp::kFloat32);

// dst[j] += src[j] for j < n.
void FlashAddRow(float* dst, const float* src, std::int64_t n);

// lse[i] = m[i] + float(log(double(l[i]))) where l[i] > 0, -inf elsewhere.
void FlashLogSumExp(const float* m, const float* l, std::int64_t n, float* lse);

// out[r] = sum_x a[r * lda + x] * b[r * ldb + x] for r < n, x < dim, in
// float64 (each product exact): 16 partial sums, sum k over the x = k
// (mod 16) in increasing x, then halved: s[k] += s[k + w] for k < w, w = 8,
// 4, 2, 1 (the order the SIMD kernel keeps on every target).
void FlashRowDotsF64(const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                     std::int64_t n, std::int64_t dim, double* out);

// row[j] = row[j] * scale + bias[j] for j < nk (bias may be null), -inf for
// nk <= j < ld; returns the row max.
float FlashScaleRow(float* row, std::int64_t nk, std::int64_t ld, float scale, const float* bias);

// Decode logits: s[r, j] = q_r . k_j for r < rows, j < nk (key rows ldk_rows
// apart), zeros in [nk, lds).
void FlashDecodeLogits(const float* q, std::int64_t ldq, std::int64_t rows, const float* k,
                       std::int64_t ldk_rows, std::int64_t nk, std::int64_t dim, float* s,
                       std::int64_t lds);

// acc[i, :] = alpha[i] acc[i, :] + sum_j P[i, j] V[j, :], value rows ldvr
// apart, for i < nq.
void FlashAccumulatePVRows(const float* p, std::int64_t ldp, const float* v, std::int64_t ldvr,
                           std::int64_t nq, std::int64_t nk, std::int64_t ldv, const float* alpha,
                           float* acc);

}  // namespace posenc::kernels::scalar
