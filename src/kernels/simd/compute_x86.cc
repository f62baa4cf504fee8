// The 16-bit compute ceilings (kernels/simd/compute.h): AVX512_BF16 dot
// products and AMX bfloat16 tiles. GCC intrinsics in functions compiled for
// the feature (Highway 1.0.3 emits neither instruction); called only when
// kernels/simd/x86_features.h says the CPU (and, for AMX, the kernel's
// permission) allows it.
#include <cstdint>

#include "kernels/simd/compute.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/simd/amx_tiles.h"

namespace posenc::kernels::simd {

volatile float g_compute_sink = 0.0f;

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bf16"))) double ComputeBf16Dot(std::int64_t iterations) {
  constexpr int kAcc = 16;
  __m512 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  // bfloat16 pairs (1.0, 1.0) and (2^-20, 2^-20): acc grows by 2^-19 per step.
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80);
  const __m512bh b = (__m512bh)_mm512_set1_epi32(0x35803580);
  for (std::int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kAcc; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  g_compute_sink = lanes[0] + lanes[15];
  return 2.0 * static_cast<double>(iterations) * kAcc * 32.0;
}

__attribute__((target("amx-tile,amx-bf16"))) double ComputeAmxBf16(std::int64_t iterations) {
  alignas(64) static thread_local std::uint16_t a[2][16 * 32], b[2][16 * 32];
  alignas(64) static thread_local float c[16 * 16];
  for (int t = 0; t < 2; ++t)
    for (int i = 0; i < 16 * 32; ++i) {
      a[t][i] = 0x3f80;  // 1.0
      b[t][i] = 0x3580;  // 2^-20
    }
  LoadAmxTileConfig();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, a[0], 64);
  _tile_loadd(5, a[1], 64);
  _tile_loadd(6, b[0], 64);
  _tile_loadd(7, b[1], 64);
  for (std::int64_t it = 0; it < iterations; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, 64);
  _tile_release();
  g_compute_sink = c[0];
  return 2.0 * static_cast<double>(iterations) * 4 * 16 * 16 * 32;
}
#else
double ComputeBf16Dot(std::int64_t) { return 0.0; }
double ComputeAmxBf16(std::int64_t) { return 0.0; }
#endif

}  // namespace posenc::kernels::simd
