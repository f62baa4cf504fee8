// SIMD (Highway) tile kernels of the fused attention (src/attention/flash.cc,
// contract in include/posenc/flash_attention.h): the q . k logits of a tile,
// the exponentials of a softmax row, and the P . V accumulation.
//
// Float32 throughout, FMA where the target has it (AVX3, AVX2); sums are
// reordered relative to a sequential loop (independent accumulators per
// lane), so results differ from the scalar loops by float32 rounding only:
// |error| <= D * 2^-23 * sum |q_x k_x| per logit. exp is Highway's
// hwy/contrib/math Exp (max error ~1 ulp in float32). Buffers are padded by
// the caller to a multiple of kFlashPad columns (zero padding), so the
// kernels have no tail loops. Runtime dispatch to the best compiled target
// (kernels/simd/targets.h); arguments are not validated here.
#pragma once

#include <cstdint>

namespace posenc::kernels::simd {

// Column padding of every buffer passed here (>= the widest vector: 16
// float32 lanes of AVX-512).
inline constexpr std::int64_t kFlashPad = 16;

// s[i * ld + j] = sum_x q[i * dim + x] * kt[x * ld + j], i < nq, j < ld
// (ld a multiple of kFlashPad; kt is the key tile transposed, [dim, ld]).
void FlashTileLogits(const float* q, const float* kt, std::int64_t nq, std::int64_t dim,
                     std::int64_t ld, float* s);

// row[j] = exp(row[j] - max) for j < n (n a multiple of kFlashPad; -inf
// entries become 0); returns the sum of the new row.
float FlashExpRow(float* row, std::int64_t n, float max);

// acc[i * ldv + x] += sum_j p[i * ldp + j] * v[j * ldv + x] for i < nq,
// j < nk, x < ldv (ldv a multiple of kFlashPad).
void FlashAccumulatePV(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                       std::int64_t nk, std::int64_t ldv, float* acc);

}  // namespace posenc::kernels::simd
