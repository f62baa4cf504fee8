// bfloat16 dot-product logits of the fused attention (kernels/simd/flash.h,
// FlashTileLogitsBf16): AVX512_BF16's VDPBF16PS (Intel SDM; Cooper Lake,
// Zen 4/5) computes, per float32 lane, acc + a[2i] * b[2i] + a[2i+1] *
// b[2i+1] from 32 bfloat16 pairs, twice the multiply-adds per instruction of
// a float32 FMA. Highway 1.0.3 has no target that emits it (no AVX3_ZEN4;
// ReorderWidenMulAccumulate for bf16 is emulated with two float32 FMAs), so
// this one kernel is written with GCC intrinsics in a function compiled for
// avx512f+avx512bf16 (when it is called: FlashBf16DotAvailable).
//
// Numerics: the products of two bfloat16 values are exact in float32 and
// the instruction rounds once per pair-sum (round to nearest even; inputs
// and outputs below 2^-126 are flushed to zero), so the logits of
// bfloat16 inputs match the float32 kernel's within float32 rounding of
// the reordered sums: |error| <= D * 2^-23 * sum |q_x k_x|.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string_view>

#include "kernels/dassert.h"
#include "kernels/simd/flash.h"
#include "kernels/simd/targets.h"
#include "kernels/simd/x86_features.h"
#include "posenc/dtype.h"

namespace posenc::kernels::simd {
namespace {

// c[r, x0 + 16 v + l] over kRows rows x kVecs vectors of 16 columns
// (16 accumulators at 4 x 4): pairs of a's row broadcast against b's pairs
// of 16 columns. kScaled: the accumulators start at beta[r] * c, else 0.
template <int kRows, int kVecs, bool kScaled>
__attribute__((target("avx512f,avx512bf16"))) inline void Bf16Block(
    const std::uint32_t* a, std::int64_t a_row, std::int64_t a_pair, const std::uint16_t* b,
    std::int64_t pairs, std::int64_t ldb, std::int64_t x0, const float* beta, float* c,
    std::int64_t ldc) {
  __m512 acc[kRows][kVecs];
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVecs; ++v) {
      if constexpr (kScaled) {
        acc[r][v] =
            _mm512_mul_ps(_mm512_set1_ps(beta[r]), _mm512_loadu_ps(c + r * ldc + x0 + 16 * v));
      } else {
        acc[r][v] = _mm512_setzero_ps();
      }
    }
  }
  for (std::int64_t t = 0; t < pairs; ++t) {
    __m512bh bv[kVecs];
    for (int v = 0; v < kVecs; ++v) {
      bv[v] = (__m512bh)_mm512_loadu_si512(b + t * 2 * ldb + 2 * (x0 + 16 * v));
    }
    for (int r = 0; r < kRows; ++r) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * a_row + t * a_pair]));
      for (int v = 0; v < kVecs; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], ar, bv[v]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVecs; ++v) _mm512_storeu_ps(c + r * ldc + x0 + 16 * v, acc[r][v]);
}

template <int kRows, bool kScaled>
__attribute__((target("avx512f,avx512bf16"))) void Bf16Rows(const std::uint32_t* a,
                                                            std::int64_t a_row, std::int64_t a_pair,
                                                            const std::uint16_t* b,
                                                            std::int64_t pairs, std::int64_t ldb,
                                                            std::int64_t cols, const float* beta,
                                                            float* c, std::int64_t ldc) {
  std::int64_t x = 0;
  if constexpr (kRows <= 4) {
    for (; x + 64 <= cols; x += 64) {
      Bf16Block<kRows, 4, kScaled>(a, a_row, a_pair, b, pairs, ldb, x, beta, c, ldc);
    }
  }
  for (; x + 32 <= cols; x += 32) {
    Bf16Block<kRows, 2, kScaled>(a, a_row, a_pair, b, pairs, ldb, x, beta, c, ldc);
  }
  for (; x < cols; x += 16) {
    Bf16Block<kRows, 1, kScaled>(a, a_row, a_pair, b, pairs, ldb, x, beta, c, ldc);
  }
}

template <bool kScaled>
__attribute__((target("avx512f,avx512bf16"))) void Bf16MatMul(
    const std::uint32_t* a, std::int64_t a_row, std::int64_t a_pair, std::int64_t rows,
    const std::uint16_t* b, std::int64_t pairs, std::int64_t ldb, std::int64_t cols,
    const float* beta, float* c, std::int64_t ldc) {
  std::int64_t r = 0;
  // Narrow C (the head dims 32 and 48): 8 rows x 2 vectors keep 16
  // accumulators busy per pair of B loads, where 4 x 1 would issue more
  // loads (B and the broadcasts of A) than dot products.
  if (cols < 64) {
    for (; r + 8 <= rows; r += 8) {
      Bf16Rows<8, kScaled>(a + r * a_row, a_row, a_pair, b, pairs, ldb, cols,
                           kScaled ? beta + r : nullptr, c + r * ldc, ldc);
    }
  }
  for (; r + 4 <= rows; r += 4) {
    Bf16Rows<4, kScaled>(a + r * a_row, a_row, a_pair, b, pairs, ldb, cols,
                         kScaled ? beta + r : nullptr, c + r * ldc, ldc);
  }
  for (; r < rows; ++r) {
    Bf16Rows<1, kScaled>(a + r * a_row, a_row, a_pair, b, pairs, ldb, cols,
                         kScaled ? beta + r : nullptr, c + r * ldc, ldc);
  }
}

// dst[x] = bfloat16(src[x]), x < n, by VCVTNEPS2BF16 (round to nearest even).
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void RowToBf16Avx512(const float* src,
                                                                            std::int64_t n,
                                                                            std::uint16_t* dst) {
  std::int64_t x = 0;
  for (; x + 16 <= n; x += 16) {
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + x));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + x), (__m256i)v);
  }
  for (; x < n; ++x) dst[x] = FloatToBF16(src[x]).bits;  // the tail (< 16): same rounding
}

// dst[2x] = bfloat16(even[x]), dst[2x + 1] = bfloat16(odd[x]) (0 when odd
// is null), x < n: VCVTNE2PS2BF16 and one word permutation per 16 columns.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void InterleaveBf16Avx512(
    const float* even, const float* odd, std::int64_t n, std::uint16_t* dst) {
  const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24,
                                         8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (std::int64_t x = 0; x < n; x += 16) {
    const std::int64_t left = std::min<std::int64_t>(16, n - x);
    const __mmask16 m = static_cast<__mmask16>((1u << left) - 1u);
    const __m512 e = _mm512_maskz_loadu_ps(m, even + x);
    const __m512 o = odd != nullptr ? _mm512_maskz_loadu_ps(m, odd + x) : _mm512_setzero_ps();
    const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(o, e);  // words 0-15: even, 16-31: odd
    const __m512i pairs = _mm512_permutexvar_epi16(order, both);
    const __mmask32 m2 = left == 16 ? ~__mmask32{0} : (__mmask32{1} << (2 * left)) - 1u;
    _mm512_mask_storeu_epi16(dst + 2 * x, m2, pairs);
  }
}

std::uint16_t Bf16Bits(float x) { return FloatToBF16(x).bits; }  // nearest even
float Bf16Value(std::uint16_t bits) { return BF16ToFloat(BFloat16{bits}); }

// The decode logits of up to 4 query rows against groups of 16 key rows.
// Keys go two at a time: per query row, one accumulator per key along dim
// (VDPBF16PS, 32 products each), then the first level of a transposing
// lane sum for the pair (even/odd lane concatenation + add, vpermt2ps, as
// SumLanesOfEach in flash-inl.h); after 8 pairs three more levels give the
// 16 logits of the row in one vector, lane l the sum of key l's lanes.
// Each key row is loaded once for all the rows (the query rows stay in registers when
// dim <= 128, kSteps = dim / 32 rounded up; kSteps = 0: any dim, q read
// from L1 at each step). Keys at or past `valid` are not read and give 0.
template <int kRows, int kSteps>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) inline void DecodeRowsGroup(
    const std::uint16_t* q, std::int64_t ldq, const std::uint16_t* k, std::int64_t ldk_rows,
    std::int64_t valid, std::int64_t steps, __mmask32 tail, float* s, std::int64_t lds) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  constexpr int kRegs = kSteps == 0 ? 1 : kSteps;
  __m512bh qv[kRows][kRegs];
  if constexpr (kSteps != 0) {
    for (int r = 0; r < kRows; ++r) {
      for (int x = 0; x < kSteps; ++x) {
        const __mmask32 m = x + 1 == kSteps ? tail : ~__mmask32{0};
        qv[r][x] = (__m512bh)_mm512_maskz_loadu_epi16(m, q + r * ldq + 32 * x);
      }
    }
  }
  const std::int64_t n = kSteps == 0 ? steps : kSteps;
  __m512 level[kRows][8];  // the pairs' first-level sums
  for (int p = 0; p < 8; ++p) {
    __m512 a[kRows][2];
    for (int r = 0; r < kRows; ++r) a[r][0] = a[r][1] = _mm512_setzero_ps();
    const bool has0 = 2 * p < valid, has1 = 2 * p + 1 < valid;
    const std::uint16_t* k0 = k + 2 * p * ldk_rows;
    for (std::int64_t x = 0; x < n; ++x) {
      const __mmask32 m = x + 1 == n ? tail : ~__mmask32{0};
      const __m512bh kx0 = (__m512bh)_mm512_maskz_loadu_epi16(has0 ? m : 0, k0 + 32 * x);
      const __m512bh kx1 = (__m512bh)_mm512_maskz_loadu_epi16(has1 ? m : 0, k0 + ldk_rows + 32 * x);
      for (int r = 0; r < kRows; ++r) {
        __m512bh qx;
        if constexpr (kSteps != 0) {
          qx = qv[r][x];
        } else {
          qx = (__m512bh)_mm512_maskz_loadu_epi16(m, q + r * ldq + 32 * x);
        }
        a[r][0] = _mm512_dpbf16_ps(a[r][0], qx, kx0);
        a[r][1] = _mm512_dpbf16_ps(a[r][1], qx, kx1);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      level[r][p] = _mm512_add_ps(_mm512_permutex2var_ps(a[r][0], even, a[r][1]),
                                  _mm512_permutex2var_ps(a[r][0], odd, a[r][1]));
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int w = 4; w >= 1; w /= 2) {
      for (int i = 0; i < w; ++i) {
        level[r][i] =
            _mm512_add_ps(_mm512_permutex2var_ps(level[r][2 * i], even, level[r][2 * i + 1]),
                          _mm512_permutex2var_ps(level[r][2 * i], odd, level[r][2 * i + 1]));
      }
    }
    _mm512_storeu_ps(s + r * lds, level[r][0]);
  }
}

template <int kRows, int kSteps>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void DecodeRows(
    const std::uint16_t* q, std::int64_t ldq, const std::uint16_t* k, std::int64_t ldk_rows,
    std::int64_t nk, std::int64_t steps, __mmask32 tail, float* s, std::int64_t lds) {
  for (std::int64_t j0 = 0; j0 < nk; j0 += 16) {
    DecodeRowsGroup<kRows, kSteps>(q, ldq, k + j0 * ldk_rows, ldk_rows, nk - j0, steps, tail,
                                   s + j0, lds);
  }
}

template <int kRows>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void DecodeRowsAnyDim(
    const std::uint16_t* q, std::int64_t ldq, const std::uint16_t* k, std::int64_t ldk_rows,
    std::int64_t nk, std::int64_t dim, float* s, std::int64_t lds) {
  const std::int64_t steps = (dim + 31) / 32;
  const __mmask32 tail = dim % 32 == 0 ? ~__mmask32{0} : (__mmask32{1} << (dim % 32)) - 1;
  switch (steps) {
    case 1:
      return DecodeRows<kRows, 1>(q, ldq, k, ldk_rows, nk, steps, tail, s, lds);
    case 2:
      return DecodeRows<kRows, 2>(q, ldq, k, ldk_rows, nk, steps, tail, s, lds);
    case 3:
      return DecodeRows<kRows, 3>(q, ldq, k, ldk_rows, nk, steps, tail, s, lds);
    case 4:
      return DecodeRows<kRows, 4>(q, ldq, k, ldk_rows, nk, steps, tail, s, lds);
    default:
      return DecodeRows<kRows, 0>(q, ldq, k, ldk_rows, nk, steps, tail, s, lds);
  }
}

}  // namespace

__attribute__((target("avx512f,avx512bw,avx512bf16"))) void FlashDecodeLogitsBf16(
    const std::uint16_t* q, std::int64_t ldq, std::int64_t rows, const std::uint16_t* k,
    std::int64_t ldk_rows, std::int64_t nk, std::int64_t dim, float* s, std::int64_t lds) {
  std::int64_t r = 0;
  for (; r + 4 <= rows; r += 4)
    DecodeRowsAnyDim<4>(q + r * ldq, ldq, k, ldk_rows, nk, dim, s + r * lds, lds);
  switch (rows - r) {
    case 3:
      return DecodeRowsAnyDim<3>(q + r * ldq, ldq, k, ldk_rows, nk, dim, s + r * lds, lds);
    case 2:
      return DecodeRowsAnyDim<2>(q + r * ldq, ldq, k, ldk_rows, nk, dim, s + r * lds, lds);
    case 1:
      return DecodeRowsAnyDim<1>(q + r * ldq, ldq, k, ldk_rows, nk, dim, s + r * lds, lds);
    default:
      return;
  }
}

// Called only when the CPU has AVX512_BF16 and Highway's dispatch currently
// selects an AVX-512 target (so forcing a narrower target in tests also
// disables it).
bool FlashBf16DotAvailable() {
  if (!CpuHasAvx512Bf16()) return false;
  const std::string_view target = DispatchedTargetName();
  return target == "AVX3" || target == "AVX3_DL";
}

namespace {
std::atomic<int> g_bf16_dots{static_cast<int>(FlashBf16Dots::kAuto)};
}  // namespace

void SetFlashBf16Dots(FlashBf16Dots mode) {
  g_bf16_dots.store(static_cast<int>(mode), std::memory_order_relaxed);
}

bool FlashBf16DotPreferred() {
  if (!FlashBf16DotAvailable()) return false;
  switch (static_cast<FlashBf16Dots>(g_bf16_dots.load(std::memory_order_relaxed))) {
    case FlashBf16Dots::kDot:
      return true;
    case FlashBf16Dots::kFloat32:
      return false;
    default:
      return !CpuBf16DotSlow();
  }
}

bool FlashBf16ConvertPreferred() {
  static const bool cpu = CpuHasAvx512Bf16();  // asked once per row pass
  return cpu &&
         g_bf16_dots.load(std::memory_order_relaxed) != static_cast<int>(FlashBf16Dots::kFloat32);
}

bool FlashBf16LogitsPreferred(std::int64_t dim) {
  if (FlashBf16DotPreferred()) return true;
  return FlashBf16DotAvailable() && FlashAmxLogitsAvailable(dim) &&
         g_bf16_dots.load(std::memory_order_relaxed) != static_cast<int>(FlashBf16Dots::kFloat32);
}

bool FlashAmxLogitsAvailable(std::int64_t dim) { return dim % 32 == 0 && AmxAvailable(); }

// Runs the AMX kernel of flash_amx.cc instead where AmxAvailable() and
// dim % 32 == 0 (FlashAmxLogitsAvailable).
void FlashTileLogitsBf16(const std::uint32_t* q_pairs, std::int64_t ldq,
                         const std::uint16_t* kt_pairs, std::int64_t nq, std::int64_t dim,
                         std::int64_t ld, float* s) {
  POSENC_DASSERT(dim % 2 == 0 && ldq >= dim / 2 && ld % kFlashPad == 0 && nq >= 0);
  if (FlashAmxLogitsAvailable(dim)) {
    return FlashTileLogitsAmx(q_pairs, ldq, kt_pairs, nq, dim, ld, s);
  }
  FlashTileLogitsAvx512Bf16(q_pairs, ldq, kt_pairs, nq, dim, ld, s);
}

void FlashTileLogitsAvx512Bf16(const std::uint32_t* q_pairs, std::int64_t ldq,
                               const std::uint16_t* kt_pairs, std::int64_t nq, std::int64_t dim,
                               std::int64_t ld, float* s) {
  Bf16MatMul<false>(q_pairs, ldq, 1, nq, kt_pairs, dim / 2, ld, ld, nullptr, s, ld);
}

void FlashMatMulBf16(const std::uint32_t* a, std::int64_t a_row, std::int64_t a_pair,
                     std::int64_t rows, const std::uint16_t* b, std::int64_t pairs,
                     std::int64_t ldb, std::int64_t cols, const float* beta, float* c,
                     std::int64_t ldc, bool simd) {
  POSENC_DASSERT(cols % 16 == 0 && ldb >= cols && ldc >= cols && rows >= 0 && pairs >= 0);
  if (simd && FlashBf16DotAvailable()) {
    if (beta != nullptr) {
      return Bf16MatMul<true>(a, a_row, a_pair, rows, b, pairs, ldb, cols, beta, c, ldc);
    }
    return Bf16MatMul<false>(a, a_row, a_pair, rows, b, pairs, ldb, cols, nullptr, c, ldc);
  }
  // The same products (exact in float32) and float32 sums, pair by pair.
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = c + r * ldc;
    for (std::int64_t x = 0; x < cols; ++x) row[x] = beta != nullptr ? beta[r] * row[x] : 0.0f;
    for (std::int64_t t = 0; t < pairs; ++t) {
      const std::uint32_t pair = a[r * a_row + t * a_pair];
      const float a0 = Bf16Value(static_cast<std::uint16_t>(pair & 0xFFFFu));
      const float a1 = Bf16Value(static_cast<std::uint16_t>(pair >> 16));
      const std::uint16_t* bt = b + t * 2 * ldb;
      for (std::int64_t x = 0; x < cols; ++x) {
        row[x] += a0 * Bf16Value(bt[2 * x]) + a1 * Bf16Value(bt[2 * x + 1]);
      }
    }
  }
}

void FlashPackPairsRows(const float* src, std::int64_t ld, std::int64_t rows, std::int64_t n,
                        std::uint32_t* a, std::int64_t lda, bool simd) {
  POSENC_DASSERT(lda >= (n + 1) / 2 && rows >= 0 && n >= 0);
  const bool avx512 = simd && FlashBf16DotAvailable();
  for (std::int64_t r = 0; r < rows; ++r) {
    // Pair t of a row is bfloat16 elements 2t, 2t + 1 in memory order.
    auto* dst = reinterpret_cast<std::uint16_t*>(a + r * lda);
    const float* row = src + r * ld;
    if (avx512) {
      RowToBf16Avx512(row, n, dst);
    } else {
      for (std::int64_t x = 0; x < n; ++x) dst[x] = Bf16Bits(row[x]);
    }
    if (n % 2 != 0) dst[n] = 0;
  }
}

void FlashPackPairsB(const float* src, std::int64_t ld, std::int64_t n, std::int64_t cols,
                     std::uint16_t* b, std::int64_t ldb, bool simd) {
  POSENC_DASSERT(ldb >= cols && cols >= 0 && n >= 0);
  const bool avx512 = simd && FlashBf16DotAvailable();
  for (std::int64_t t = 0; t < (n + 1) / 2; ++t) {
    std::uint16_t* bt = b + t * 2 * ldb;
    const float* even = src + 2 * t * ld;
    const float* odd = 2 * t + 1 < n ? even + ld : nullptr;
    if (avx512) {
      InterleaveBf16Avx512(even, odd, cols, bt);
    } else {
      for (std::int64_t x = 0; x < cols; ++x) {
        bt[2 * x] = Bf16Bits(even[x]);
        bt[2 * x + 1] = odd != nullptr ? Bf16Bits(odd[x]) : std::uint16_t{0};
      }
    }
    std::fill(bt + 2 * cols, bt + 2 * ldb, std::uint16_t{0});
  }
}

}  // namespace posenc::kernels::simd
