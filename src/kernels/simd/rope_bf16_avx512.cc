// AVX512-BF16 rotation of bfloat16 RoPE rows (contract in
// rope_bf16_avx512.h). Functions carry their own target attribute, so this
// file compiles with the baseline flags and is only called after a runtime
// CPU check.
#include "kernels/simd/rope_bf16_avx512.h"

#include <algorithm>
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
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512bf16");
  return cpu && g_enabled.load(std::memory_order_relaxed);
}

namespace {

constexpr __mmask16 kAll = 0xffff;

// 16 bfloat16 values at p (the lanes of m; the others 0) as float32. kFull:
// plain loads and stores (masked stores are slow on AMD); else masked ones
// for the tail of a row.
template <bool kFull>
POSENC_AVX512BF16_ATTR inline __m512 LoadBf16(const char* p, __mmask16 m) {
  const __m256i bits = kFull ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                             : _mm256_maskz_loadu_epi16(m, p);
  // The maskz forms (all lanes) instead of _mm512_cvtepu16_epi32 /
  // _mm512_slli_epi32: GCC 12 warns (-Wmaybe-uninitialized) on the
  // _mm512_undefined_epi32() inside the unmasked ones.
  return _mm512_castsi512_ps(
      _mm512_maskz_slli_epi32(kAll, _mm512_maskz_cvtepu16_epi32(kAll, bits), 16));
}

template <bool kFull>
POSENC_AVX512BF16_ATTR inline __m512 LoadF32(const float* p, __mmask16 m) {
  return kFull ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}

// The lanes of v selected by m, rounded one by one with the exact scalar
// conversion (the denormal case, which the instruction flushes to zero).
POSENC_AVX512BF16_ATTR inline void StoreBf16Exact(__m512 v, char* p, __mmask16 m) {
  alignas(64) float tmp[16];
  _mm512_store_ps(tmp, v);
  for (int i = 0; i < 16; ++i) {
    if ((m >> i) & 1) {
      const BFloat16 b = FloatToBF16(tmp[i]);
      std::memcpy(p + 2 * i, &b, 2);
    }
  }
}

// Stores the lanes of v selected by m as bfloat16, rounded to nearest even.
template <bool kFull>
POSENC_AVX512BF16_ATTR inline void StoreBf16(__m512 v, char* p, __mmask16 m) {
  // fpclass 0x20: denormal lanes.
  if (__builtin_expect(_mm512_mask_fpclass_ps_mask(m, v, 0x20) != 0, 0)) {
    StoreBf16Exact(v, p, m);
    return;
  }
  const __m256i r = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
  if (kFull) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), r);
  } else {
    _mm256_mask_storeu_epi16(p, m, r);
  }
}

POSENC_AVX512BF16_ATTR inline __mmask16 Mask(std::int64_t remaining) {
  return static_cast<__mmask16>((1u << remaining) - 1u);  // remaining in [1, 15]
}

template <bool kFull>
POSENC_AVX512BF16_ATTR inline void HalfSplitChunk(const float* c, const float* s, const char* in,
                                                  char* out, std::int64_t yo, std::int64_t j,
                                                  __mmask16 m) {
  const __m512 x = LoadBf16<kFull>(in + 2 * j, m);
  const __m512 y = LoadBf16<kFull>(in + yo + 2 * j, m);
  const __m512 vc = LoadF32<kFull>(c + j, m);
  const __m512 vs = LoadF32<kFull>(s + j, m);
  StoreBf16<kFull>(_mm512_fnmadd_ps(y, vs, _mm512_mul_ps(x, vc)), out + 2 * j, m);
  StoreBf16<kFull>(_mm512_fmadd_ps(x, vs, _mm512_mul_ps(y, vc)), out + yo + 2 * j, m);
}

POSENC_AVX512BF16_ATTR void RowHalfSplit(const float* c, const float* s, const char* in, char* out,
                                         std::int64_t half) {
  const std::int64_t yo = 2 * half;
  std::int64_t j = 0;
  for (; j + 16 <= half; j += 16) HalfSplitChunk<true>(c, s, in, out, yo, j, kAll);
  if (j < half) HalfSplitChunk<false>(c, s, in, out, yo, j, Mask(half - j));
}

template <bool kFull>
POSENC_AVX512BF16_ATTR inline void InterleavedChunk(const float* c, const float* s, const char* in,
                                                    char* out, std::int64_t j, __mmask16 m) {
  const __m512 v = LoadBf16<kFull>(in + 2 * j, m);
  // (1, 0, 3, 2) in every 128 bits; maskz form for the GCC 12 warning above.
  const __m512 swapped = _mm512_maskz_permute_ps(kAll, v, 0xB1);
  const __m512 r = _mm512_fmadd_ps(swapped, LoadF32<kFull>(s + j, m),
                                   _mm512_mul_ps(v, LoadF32<kFull>(c + j, m)));
  StoreBf16<kFull>(r, out + 2 * j, m);
}

POSENC_AVX512BF16_ATTR void RowInterleaved(const float* c, const float* s, const char* in,
                                           char* out, std::int64_t half) {
  const std::int64_t n = 2 * half;
  std::int64_t j = 0;
  for (; j + 16 <= n; j += 16) InterleavedChunk<true>(c, s, in, out, j, kAll);
  if (j < n) InterleavedChunk<false>(c, s, in, out, j, Mask(n - j));
}

}  // namespace

POSENC_AVX512BF16_ATTR void RotateRowsBf16Avx512(const float* c, const float* s,
                                                 std::int64_t cs_step, const char* in,
                                                 std::int64_t in_step, char* out,
                                                 std::int64_t out_step, std::int64_t n,
                                                 std::int64_t half, std::int64_t tail_bytes,
                                                 RopeBf16Pairs pairs) {
  constexpr std::int64_t kPrefetchBytes = 4096;  // as RotateRows in rope-inl.h
  const std::int64_t rot_bytes = 4 * half;
  const std::int64_t row_bytes = rot_bytes + tail_bytes;
  const std::int64_t ahead_rows = std::max<std::int64_t>(2, kPrefetchBytes / row_bytes);
  for (std::int64_t i = 0; i < n; ++i) {
    const char* pi = in + i * in_step;
    char* po = out + i * out_step;
    if (i + ahead_rows < n) {
      const char* ahead = pi + ahead_rows * in_step;
      for (std::int64_t off = 0; off < row_bytes; off += 64) _mm_prefetch(ahead + off, _MM_HINT_T0);
      if (pi != po) {
        char* ahead_out = po + ahead_rows * out_step;
        for (std::int64_t off = 0; off < row_bytes; off += 64)
          __builtin_prefetch(ahead_out + off, 1);
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
