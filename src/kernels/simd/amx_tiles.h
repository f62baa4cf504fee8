// The AMX tile configuration shared by the AMX kernels (compute_x86.cc,
// flash_amx.cc): palette 1, all eight tiles 16 rows x 64 bytes (a 16 x 16
// float32 accumulator, or 16 rows of 32 bfloat16 / 16 bfloat16 pairs).
// Intel SDM vol. 1 ch. 3 ("Intel AMX"), LDTILECFG's 64-byte memory format.
// Only call on a thread of a process that AmxAvailable() granted
// (kernels/simd/x86_features.h).
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace posenc::kernels::simd {

struct alignas(64) AmxTileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  std::uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
static_assert(sizeof(AmxTileConfig) == 64);

#if defined(__x86_64__)
__attribute__((target("amx-tile"))) inline void LoadAmxTileConfig() {
  static const AmxTileConfig config;
  _tile_loadconfig(&config);
}
#endif

}  // namespace posenc::kernels::simd
