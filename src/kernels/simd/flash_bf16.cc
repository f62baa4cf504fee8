// bfloat16 dot-product logits of the fused attention (kernels/simd/flash.h,
// FlashTileLogitsBf16, which runs the AMX kernel of flash_amx.cc instead
// where AmxAvailable() and dim % 32 == 0): AVX512_BF16's VDPBF16PS (Intel SDM; Cooper Lake,
// Zen 4/5) computes, per float32 lane, acc + a[2i] * b[2i] + a[2i+1] *
// b[2i+1] from 32 bfloat16 pairs, twice the multiply-adds per instruction
// of a float32 FMA. Highway 1.0.3 has no target that emits it (no
// AVX3_ZEN4; ReorderWidenMulAccumulate for bf16 is emulated with two float32
// FMAs), so this one kernel is written with GCC intrinsics in a function
// compiled for avx512f+avx512bf16 and is called only when the CPU has
// AVX512_BF16 and Highway's dispatch currently selects an AVX-512 target (so
// forcing a narrower target in tests also disables it).
//
// Numerics: the products of two bfloat16 values are exact in float32 and
// the instruction rounds once per pair-sum (round to nearest even; inputs
// and outputs below 2^-126 are flushed to zero), so the logits of
// bfloat16 inputs match the float32 kernel's within float32 rounding of
// the reordered sums: |error| <= D * 2^-23 * sum |q_x k_x|.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "kernels/simd/flash.h"
#include "kernels/simd/targets.h"
#include "kernels/simd/x86_features.h"

namespace posenc::kernels::simd {
namespace {

// 4 query rows x 4 vectors of 16 keys per step (16 accumulators).
template <int kRows, int kVecs>
__attribute__((target("avx512f,avx512bf16"))) inline void Bf16Block(
    const std::uint32_t* q, std::int64_t ldq, const std::uint16_t* kt, std::int64_t pairs,
    std::int64_t ld, std::int64_t j, float* s) {
  __m512 a[kRows][kVecs];
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kVecs; ++c) a[r][c] = _mm512_setzero_ps();
  for (std::int64_t x = 0; x < pairs; ++x) {
    __m512bh k[kVecs];
    for (int c = 0; c < kVecs; ++c) {
      k[c] = (__m512bh)_mm512_loadu_si512(kt + x * 2 * ld + 2 * (j + 16 * c));
    }
    for (int r = 0; r < kRows; ++r) {
      const __m512bh qx = (__m512bh)_mm512_set1_epi32(static_cast<int>(q[r * ldq + x]));
      for (int c = 0; c < kVecs; ++c) a[r][c] = _mm512_dpbf16_ps(a[r][c], qx, k[c]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kVecs; ++c) _mm512_storeu_ps(s + r * ld + j + 16 * c, a[r][c]);
}

template <int kRows>
__attribute__((target("avx512f,avx512bf16"))) void Bf16Rows(const std::uint32_t* q,
                                                            std::int64_t ldq,
                                                            const std::uint16_t* kt,
                                                            std::int64_t pairs, std::int64_t ld,
                                                            float* s) {
  std::int64_t j = 0;
  for (; j + 64 <= ld; j += 64) Bf16Block<kRows, 4>(q, ldq, kt, pairs, ld, j, s);
  for (; j < ld; j += 16) Bf16Block<kRows, 1>(q, ldq, kt, pairs, ld, j, s);
}

// Lane l of the result = sum of the lanes of a[l], l < 16: four levels of
// even/odd lane concatenation + add (vpermt2ps), as SumLanesOfEach in
// flash-inl.h.
__attribute__((target("avx512f"))) inline __m512 SumLanesOf16(__m512 (&a)[16]) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (int n = 16; n > 1; n /= 2) {
    for (int i = 0; i < n / 2; ++i) {
      a[i] = _mm512_add_ps(_mm512_permutex2var_ps(a[2 * i], even, a[2 * i + 1]),
                           _mm512_permutex2var_ps(a[2 * i], odd, a[2 * i + 1]));
    }
  }
  return a[0];
}

}  // namespace

namespace {

// One group of kKeys <= 16 keys against one query row: kKeys accumulators
// (unrolled, held in registers), then the transposing lane sum.
template <int kKeys>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) inline __m512 DecodeGroup(
    const std::uint16_t* q, const std::uint16_t* k, std::int64_t ldk_rows, std::int64_t dim) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int jj = 0; jj < 16; ++jj) acc[jj] = _mm512_setzero_ps();
  const std::int64_t steps = (dim + 31) / 32;
  const __mmask32 tail = dim % 32 == 0 ? ~__mmask32{0} : (__mmask32{1} << (dim % 32)) - 1;
  for (std::int64_t x = 0; x < steps; ++x) {
    const __mmask32 m = x + 1 == steps ? tail : ~__mmask32{0};
    const __m512bh qv = (__m512bh)_mm512_maskz_loadu_epi16(m, q + 32 * x);
#pragma GCC unroll 16
    for (int jj = 0; jj < kKeys; ++jj) {
      acc[jj] = _mm512_dpbf16_ps(acc[jj], qv,
                                 (__m512bh)_mm512_maskz_loadu_epi16(m, k + jj * ldk_rows + 32 * x));
    }
  }
  return SumLanesOf16(acc);
}

}  // namespace

__attribute__((target("avx512f,avx512bw,avx512bf16"))) void FlashDecodeLogitsBf16(
    const std::uint16_t* q, std::int64_t ldq, std::int64_t rows, const std::uint16_t* k,
    std::int64_t ldk_rows, std::int64_t nk, std::int64_t dim, float* s, std::int64_t lds) {
  std::int64_t j0 = 0;
  for (; j0 + 16 <= nk; j0 += 16) {
    for (std::int64_t r = 0; r < rows; ++r) {
      _mm512_storeu_ps(s + r * lds + j0,
                       DecodeGroup<16>(q + r * ldq, k + j0 * ldk_rows, ldk_rows, dim));
    }
  }
  if (j0 < nk) {  // the last keys of the cache, one at a time (rows past nk are not read)
    for (std::int64_t r = 0; r < rows; ++r) {
      alignas(64) float lanes[16] = {};
      for (std::int64_t j = j0; j < nk; ++j) {
        const __m512 one = DecodeGroup<1>(q + r * ldq, k + j * ldk_rows, ldk_rows, dim);
        lanes[j - j0] = _mm512_cvtss_f32(one);
      }
      _mm512_storeu_ps(s + r * lds + j0, _mm512_load_ps(lanes));
    }
  }
}

bool FlashBf16DotAvailable() {
  if (!CpuHasAvx512Bf16()) return false;
  const std::string_view target = DispatchedTargetName();
  return target == "AVX3" || target == "AVX3_DL";
}

bool FlashAmxLogitsAvailable(std::int64_t dim) { return dim % 32 == 0 && AmxAvailable(); }

void FlashTileLogitsBf16(const std::uint32_t* q_pairs, std::int64_t ldq,
                         const std::uint16_t* kt_pairs, std::int64_t nq, std::int64_t dim,
                         std::int64_t ld, float* s) {
  if (FlashAmxLogitsAvailable(dim)) {
    return FlashTileLogitsAmx(q_pairs, ldq, kt_pairs, nq, dim, ld, s);
  }
  FlashTileLogitsAvx512Bf16(q_pairs, ldq, kt_pairs, nq, dim, ld, s);
}

void FlashTileLogitsAvx512Bf16(const std::uint32_t* q_pairs, std::int64_t ldq,
                               const std::uint16_t* kt_pairs, std::int64_t nq, std::int64_t dim,
                               std::int64_t ld, float* s) {
  const std::int64_t pairs = dim / 2;
  std::int64_t i = 0;
  for (; i + 4 <= nq; i += 4) {
    Bf16Rows<4>(q_pairs + i * ldq, ldq, kt_pairs, pairs, ld, s + i * ld);
  }
  for (; i < nq; ++i) Bf16Rows<1>(q_pairs + i * ldq, ldq, kt_pairs, pairs, ld, s + i * ld);
}

}  // namespace posenc::kernels::simd
