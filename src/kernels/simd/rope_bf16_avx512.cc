// AVX512-BF16 rotation of bfloat16 RoPE rows (contract in
// rope_bf16_avx512.h). Functions carry their own target attribute, so this
// file compiles with the baseline flags and is only called after a runtime
// CPU check.
#include "kernels/simd/rope_bf16_avx512.h"

#include <atomic>
#include <cstring>

#include "posenc/dtype.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define POSENC_HAVE_AVX512BF16 1
#endif

namespace posenc::kernels::simd {
namespace {
std::atomic<bool> g_enabled{true};
}  // namespace

void SetRopeBf16HardwareEnabled(bool enabled) { g_enabled.store(enabled); }

#if POSENC_HAVE_AVX512BF16

#define POSENC_AVX512BF16_ATTR \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,fma")))

bool RopeBf16HardwareAvailable() {
  static const bool cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512bf16");
  return cpu && g_enabled.load(std::memory_order_relaxed);
}

namespace {

POSENC_AVX512BF16_ATTR inline __m512 LoadBf16(const char* p, __mmask16 m) {
  const __m256i bits = _mm256_maskz_loadu_epi16(m, p);
  // The maskz forms (all lanes) instead of _mm512_cvtepu16_epi32 /
  // _mm512_slli_epi32: GCC 12 warns (-Wmaybe-uninitialized) on the
  // _mm512_undefined_epi32() inside the unmasked ones.
  const __mmask16 all = 0xffff;
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, _mm512_maskz_cvtepu16_epi32(all, bits), 16));
}

// Stores the lanes of v selected by m as bfloat16, rounded to nearest even.
POSENC_AVX512BF16_ATTR inline void StoreBf16(__m512 v, char* p, __mmask16 m) {
  // fpclass 0x20: denormal; those lanes need the exact conversion (the
  // instruction flushes them to zero).
  if (__builtin_expect(_mm512_mask_fpclass_ps_mask(m, v, 0x20) != 0, 0)) {
    alignas(64) float tmp[16];
    _mm512_store_ps(tmp, v);
    for (int i = 0; i < 16; ++i) {
      if ((m >> i) & 1) {
        const BFloat16 b = FloatToBF16(tmp[i]);
        std::memcpy(p + 2 * i, &b, 2);
      }
    }
    return;
  }
  const __m256bh r = _mm512_cvtneps_pbh(v);
  _mm256_mask_storeu_epi16(p, m, reinterpret_cast<__m256i>(r));
}

POSENC_AVX512BF16_ATTR inline __mmask16 Mask(std::int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xffff)
                         : static_cast<__mmask16>((1u << remaining) - 1u);
}

POSENC_AVX512BF16_ATTR void RowHalfSplit(const float* c, const float* s, const char* in, char* out,
                                         std::int64_t half) {
  const std::int64_t yo = 2 * half;
  for (std::int64_t j = 0; j < half; j += 16) {
    const __mmask16 m = Mask(half - j);
    const __m512 x = LoadBf16(in + 2 * j, m);
    const __m512 y = LoadBf16(in + yo + 2 * j, m);
    const __m512 vc = _mm512_maskz_loadu_ps(m, c + j);
    const __m512 vs = _mm512_maskz_loadu_ps(m, s + j);
    StoreBf16(_mm512_fnmadd_ps(y, vs, _mm512_mul_ps(x, vc)), out + 2 * j, m);
    StoreBf16(_mm512_fmadd_ps(x, vs, _mm512_mul_ps(y, vc)), out + yo + 2 * j, m);
  }
}

POSENC_AVX512BF16_ATTR void RowInterleaved(const float* c, const float* s, const char* in,
                                           char* out, std::int64_t half) {
  const std::int64_t n = 2 * half;
  for (std::int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = Mask(n - j);
    const __m512 v = LoadBf16(in + 2 * j, m);
    // (1, 0, 3, 2) in every 128 bits; maskz form for the GCC 12 warning above.
    const __m512 swapped = _mm512_maskz_permute_ps(static_cast<__mmask16>(0xffff), v, 0xB1);
    const __m512 r = _mm512_fmadd_ps(swapped, _mm512_maskz_loadu_ps(m, s + j),
                                     _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, c + j)));
    StoreBf16(r, out + 2 * j, m);
  }
}

}  // namespace

POSENC_AVX512BF16_ATTR void RotateRowsBf16Avx512(const float* c, const float* s,
                                                 std::int64_t cs_step, const char* in,
                                                 std::int64_t in_step, char* out,
                                                 std::int64_t out_step, std::int64_t n,
                                                 std::int64_t half, std::int64_t tail_bytes,
                                                 RopeBf16Pairs pairs) {
  constexpr std::int64_t kPrefetchRows = 8;  // as RotateRows in rope-inl.h
  const std::int64_t rot_bytes = 4 * half;
  const std::int64_t row_bytes = rot_bytes + tail_bytes;
  for (std::int64_t i = 0; i < n; ++i) {
    const char* pi = in + i * in_step;
    char* po = out + i * out_step;
    if (i + kPrefetchRows < n) {
      const char* ahead = pi + kPrefetchRows * in_step;
      for (std::int64_t off = 0; off < row_bytes; off += 64) _mm_prefetch(ahead + off, _MM_HINT_T0);
      if (pi != po) {
        char* ahead_out = po + kPrefetchRows * out_step;
        for (std::int64_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(ahead_out + off, 1);
      }
    }
    if (pairs == RopeBf16Pairs::kHalfSplit) {
      RowHalfSplit(c + i * cs_step, s + i * cs_step, pi, po, half);
    } else {
      RowInterleaved(c + i * cs_step, s + i * cs_step, pi, po, half);
    }
    if (tail_bytes > 0 && pi != po) std::memcpy(po + rot_bytes, pi + rot_bytes, tail_bytes);
  }
}

#else  // not x86-64 GCC/Clang: never available

bool RopeBf16HardwareAvailable() { return false; }
void RotateRowsBf16Avx512(const float*, const float*, std::int64_t, const char*, std::int64_t,
                          char*, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                          RopeBf16Pairs) {}

#endif

}  // namespace posenc::kernels::simd
