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

// Stores lo then hi (32 lanes) as bfloat16, rounded to nearest even, with
// one conversion instruction and one 64-byte store.
POSENC_AVX512BF16_ATTR inline void StoreBf16x2(__m512 lo, __m512 hi, char* p) {
  const __mmask16 denormal = _mm512_fpclass_ps_mask(lo, 0x20) | _mm512_fpclass_ps_mask(hi, 0x20);
  if (__builtin_expect(denormal != 0, 0)) {
    StoreBf16Exact(lo, p, kAll);
    StoreBf16Exact(hi, p + 32, kAll);
    return;
  }
  _mm512_storeu_si512(p, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
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

// Pairs j .. j + 31: 32 lanes of each half per conversion and store.
POSENC_AVX512BF16_ATTR inline void HalfSplitChunk32(const float* c, const float* s, const char* in,
                                                    char* out, std::int64_t yo, std::int64_t j) {
  const __m512 x0 = LoadBf16<true>(in + 2 * j, kAll);
  const __m512 x1 = LoadBf16<true>(in + 2 * j + 32, kAll);
  const __m512 y0 = LoadBf16<true>(in + yo + 2 * j, kAll);
  const __m512 y1 = LoadBf16<true>(in + yo + 2 * j + 32, kAll);
  const __m512 c0 = _mm512_loadu_ps(c + j), c1 = _mm512_loadu_ps(c + j + 16);
  const __m512 s0 = _mm512_loadu_ps(s + j), s1 = _mm512_loadu_ps(s + j + 16);
  StoreBf16x2(_mm512_fnmadd_ps(y0, s0, _mm512_mul_ps(x0, c0)),
              _mm512_fnmadd_ps(y1, s1, _mm512_mul_ps(x1, c1)), out + 2 * j);
  StoreBf16x2(_mm512_fmadd_ps(x0, s0, _mm512_mul_ps(y0, c0)),
              _mm512_fmadd_ps(x1, s1, _mm512_mul_ps(y1, c1)), out + yo + 2 * j);
}

POSENC_AVX512BF16_ATTR void RowHalfSplit(const float* c, const float* s, const char* in, char* out,
                                         std::int64_t half) {
  const std::int64_t yo = 2 * half;
  std::int64_t j = 0;
  for (; j + 32 <= half; j += 32) HalfSplitChunk32(c, s, in, out, yo, j);
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

// Lanes j .. j + 31: one conversion and store.
POSENC_AVX512BF16_ATTR inline void InterleavedChunk32(const float* c, const float* s,
                                                      const char* in, char* out, std::int64_t j) {
  const __m512 v0 = LoadBf16<true>(in + 2 * j, kAll);
  const __m512 v1 = LoadBf16<true>(in + 2 * j + 32, kAll);
  const __m512 r0 = _mm512_fmadd_ps(_mm512_maskz_permute_ps(kAll, v0, 0xB1), _mm512_loadu_ps(s + j),
                                    _mm512_mul_ps(v0, _mm512_loadu_ps(c + j)));
  const __m512 r1 =
      _mm512_fmadd_ps(_mm512_maskz_permute_ps(kAll, v1, 0xB1), _mm512_loadu_ps(s + j + 16),
                      _mm512_mul_ps(v1, _mm512_loadu_ps(c + j + 16)));
  StoreBf16x2(r0, r1, out + 2 * j);
}

POSENC_AVX512BF16_ATTR void RowInterleaved(const float* c, const float* s, const char* in,
                                           char* out, std::int64_t half) {
  const std::int64_t n = 2 * half;
  std::int64_t j = 0;
  for (; j + 32 <= n; j += 32) InterleavedChunk32(c, s, in, out, j);
  for (; j + 16 <= n; j += 16) InterleavedChunk<true>(c, s, in, out, j, kAll);
  if (j < n) InterleavedChunk<false>(c, s, in, out, j, Mask(n - j));
}

}  // namespace

POSENC_AVX512BF16_ATTR void RotateRowsBf16Avx512(const float* c, const float* s,
                                                 std::int64_t cs_step, const RopeRowRun& run,
                                                 const RopeRowRun& next, std::int64_t half,
                                                 std::int64_t tail_bytes, RopeBf16Pairs pairs) {
  const std::int64_t rot_bytes = 4 * half;
  const std::int64_t row_bytes = rot_bytes + tail_bytes;
  const std::int64_t ahead = RopePrefetchRows(row_bytes);
  for (std::int64_t i = 0; i < run.n; ++i) {
    const char* pi = run.in + i * run.in_step;
    char* po = run.out + i * run.out_step;
    PrefetchRopeRow(run, next, i, ahead, row_bytes);
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
void RotateRowsBf16Avx512(const float*, const float*, std::int64_t, const RopeRowRun&,
                          const RopeRowRun&, std::int64_t, std::int64_t, RopeBf16Pairs) {}

#endif

}  // namespace posenc::kernels::simd
