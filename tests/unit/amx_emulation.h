// A software model of the AMX instructions that posenc's AMX kernels use, for
// tests on CPUs without AMX (flash_amx_emulated_test.cc). Include it, then
// the kernel's .cc, in one translation unit: after <immintrin.h> it redefines
// the intrinsic names (_tile_loadconfig, _tile_loadd, _tile_stored,
// _tile_zero, _tile_dpbf16ps, _tile_release) as calls into this model, so
// the kernel's own source runs unchanged, instruction for instruction.
//
// Semantics follow the Intel SDM, vol. 1 ch. 3 "Intel AMX" and the
// instruction pages of LDTILECFG, TILELOADD, TILESTORED, TILEZERO, TDPBF16PS
// and TILERELEASE:
//  - LDTILECFG reads the 64-byte configuration: byte 0 palette (0: release
//    all; 1: 8 tiles of at most 16 rows x 64 bytes), byte 1 start_row,
//    bytes 16..31 colsb of tiles 0-7 (uint16), bytes 48..55 their rows; a
//    nonzero reserved byte (2..15, 32..47, 56..63), rows > 16, colsb > 64 or
//    a tile with exactly one of rows / colsb zero is #GP; a nonzero
//    start_row (the restart state after an interrupt, which no kernel here
//    sets) is reported too; loading zeroes every tile;
//  - TILELOADD copies rows[t] rows of colsb[t] bytes from base + r * stride
//    and zeroes the rest of the tile; TILESTORED writes the same rectangle;
//  - TDPBF16PS: for m < rows(dst), k < colsb(a) / 4, n < colsb(dst) / 4:
//      dst[m].f32[n] += f32(a[m].bf16[2k]) * f32(b[k].bf16[2n])
//      dst[m].f32[n] += f32(a[m].bf16[2k + 1]) * f32(b[k].bf16[2n + 1])
//    each addition rounded to nearest even in float32, denormal inputs read
//    as zero and denormal results flushed to zero; #UD unless
//    rows(dst) == rows(a), colsb(dst) == colsb(b), colsb(a) == 4 rows(b),
//    colsb(dst) is a multiple of 4, and the three tiles are distinct.
// Any use outside these rules (no configuration loaded, an unconfigured or
// out-of-range tile, mismatched shapes) is counted in Errors() with its
// reason in LastError() rather than modelled: a test asserts none happened.
// Memory is accessed exactly where the hardware would access it, so a
// sanitizer build catches an out-of-bounds tile load or store.
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "posenc/dtype.h"

namespace posenc::amx_emulation {

struct State {
  bool configured = false;
  std::uint8_t rows[8] = {};
  std::uint16_t colsb[8] = {};
  alignas(64) std::uint8_t tile[8][16][64] = {};
  int errors = 0;
  std::string last_error;
};

inline State& ThreadState() {
  thread_local State state;  // the tile state is per thread, as in hardware
  return state;
}

inline int Errors() { return ThreadState().errors; }
inline const std::string& LastError() { return ThreadState().last_error; }
inline void ResetErrors() {
  ThreadState().errors = 0;
  ThreadState().last_error.clear();
}

inline void Fail(const std::string& what) {
  ++ThreadState().errors;
  ThreadState().last_error = what;
}

inline bool Usable(int t, const char* op) {
  State& s = ThreadState();
  if (!s.configured) {
    Fail(std::string(op) + ": no tile configuration loaded");
    return false;
  }
  if (t < 0 || t > 7 || s.rows[t] == 0) {
    Fail(std::string(op) + ": tile " + std::to_string(t) + " is not configured");
    return false;
  }
  return true;
}

inline void LoadConfig(const void* config) {
  State& s = ThreadState();
  const auto* bytes = static_cast<const std::uint8_t*>(config);
  std::memset(s.tile, 0, sizeof(s.tile));
  s.configured = false;
  if (bytes[0] == 0) return;  // palette 0: the init state
  if (bytes[0] != 1) return Fail("LDTILECFG: palette " + std::to_string(bytes[0]));
  if (bytes[1] != 0) return Fail("LDTILECFG: start_row " + std::to_string(bytes[1]));
  for (int i = 2; i < 16; ++i) {
    if (bytes[i] != 0) return Fail("LDTILECFG: reserved byte " + std::to_string(i) + " set");
  }
  for (int t = 0; t < 16; ++t) {
    std::uint16_t colsb;
    std::memcpy(&colsb, bytes + 16 + 2 * t, 2);
    const std::uint8_t rows = bytes[48 + t];
    if (t >= 8) {
      if (rows != 0 || colsb != 0) return Fail("LDTILECFG: tile " + std::to_string(t) + " set");
      continue;
    }
    if (rows > 16 || colsb > 64 || (rows == 0) != (colsb == 0)) {
      return Fail("LDTILECFG: tile " + std::to_string(t) + " rows " + std::to_string(rows) +
                  " colsb " + std::to_string(colsb));
    }
    s.rows[t] = rows;
    s.colsb[t] = colsb;
  }
  s.configured = true;
}

inline void Release() {
  State& s = ThreadState();
  std::memset(s.tile, 0, sizeof(s.tile));
  s.configured = false;
}

inline void Zero(int t) {
  if (Usable(t, "TILEZERO")) std::memset(ThreadState().tile[t], 0, sizeof(ThreadState().tile[t]));
}

inline void Load(int t, const void* base, long stride) {
  if (!Usable(t, "TILELOADD")) return;
  State& s = ThreadState();
  std::memset(s.tile[t], 0, sizeof(s.tile[t]));
  const auto* p = static_cast<const std::uint8_t*>(base);
  for (int r = 0; r < s.rows[t]; ++r) std::memcpy(s.tile[t][r], p + r * stride, s.colsb[t]);
}

inline void Store(int t, void* base, long stride) {
  if (!Usable(t, "TILESTORED")) return;
  State& s = ThreadState();
  auto* p = static_cast<std::uint8_t*>(base);
  for (int r = 0; r < s.rows[t]; ++r) std::memcpy(p + r * stride, s.tile[t][r], s.colsb[t]);
}

// Denormals as zero: DAZ for inputs, FTZ for results.
inline float FlushDenormal(float f) {
  return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f;
}

// The bfloat16 at `at` (possibly unaligned) as float32, DAZ.
inline float Bf16Daz(const std::uint8_t* at) {
  BFloat16 v;
  std::memcpy(&v.bits, at, 2);
  return FlushDenormal(BF16ToFloat(v));
}

inline void DotBf16(int dst, int a, int b) {
  if (!Usable(dst, "TDPBF16PS") || !Usable(a, "TDPBF16PS") || !Usable(b, "TDPBF16PS")) return;
  State& s = ThreadState();
  if (dst == a || dst == b || a == b) return Fail("TDPBF16PS: tiles not distinct");
  if (s.rows[dst] != s.rows[a] || s.colsb[dst] != s.colsb[b] || s.colsb[a] != 4 * s.rows[b] ||
      s.colsb[dst] % 4 != 0) {
    return Fail("TDPBF16PS: shapes do not match");
  }
  for (int m = 0; m < s.rows[dst]; ++m) {
    for (int n = 0; n < s.colsb[dst] / 4; ++n) {
      float acc;
      std::memcpy(&acc, &s.tile[dst][m][4 * n], 4);
      for (int k = 0; k < s.colsb[a] / 4; ++k) {
        for (int e = 0; e < 2; ++e) {
          const float x = Bf16Daz(&s.tile[a][m][4 * k + 2 * e]);
          const float y = Bf16Daz(&s.tile[b][k][4 * n + 2 * e]);
          acc = FlushDenormal(acc + x * y);  // the product of two bfloat16 values is exact
        }
      }
      std::memcpy(&s.tile[dst][m][4 * n], &acc, 4);
    }
  }
}

}  // namespace posenc::amx_emulation

#undef _tile_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbf16ps
#define _tile_loadconfig(config) ::posenc::amx_emulation::LoadConfig(config)
#define _tile_release() ::posenc::amx_emulation::Release()
#define _tile_loadd(t, base, stride) ::posenc::amx_emulation::Load(t, base, stride)
#define _tile_stored(t, base, stride) ::posenc::amx_emulation::Store(t, base, stride)
#define _tile_zero(t) ::posenc::amx_emulation::Zero(t)
#define _tile_dpbf16ps(dst, a, b) ::posenc::amx_emulation::DotBf16(dst, a, b)

#endif  // defined(__x86_64__)
