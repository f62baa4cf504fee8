// RoPE rotation of bfloat16 rows with the AVX512-BF16 conversion
// instruction (vcvtne2ps2bf16), for CPUs that have it (Zen 4/5, Sapphire
// Rapids and later). Called by the AVX3 target of kernels/simd/rope-inl.h
// instead of its portable rounding, which costs ~10 instructions per vector
// and made bfloat16 RoPE compute-bound (0.6 of the memory bandwidth).
//
// Why hand-written intrinsics: Highway 1.0.3 has no AVX3_ZEN4 target and its
// DemoteTo(bf16) truncates instead of rounding to nearest even.
//
// Contract: bit-identical to RotateRow<Store::kBF16> (kAccurate numerics)
// of rope-inl.h: the same float32 FMA formula per lane, then round to
// nearest even with NaN quieted ((bits >> 16) | 0x40, like the instruction
// and posenc/dtype.h). The instruction flushes denormal results to zero;
// a 16-lane chunk with a denormal result is rounded by the exact scalar
// conversion instead. Arguments are the caller's (asserted there).
#pragma once

#include <cstdint>

#include "kernels/simd/rope_rows.h"

namespace posenc::kernels::simd {

enum class RopeBf16Pairs : std::uint8_t { kHalfSplit, kInterleaved };

// True when this CPU executes AVX512-BF16 (and AVX-512 F/BW/VL/DQ) and the
// fast path is enabled (SetRopeBf16HardwareEnabled).
bool RopeBf16HardwareAvailable();

// Tests switch the hardware path off to test the portable AVX3 rounding on
// the same machine. Not thread-safe against running kernels.
void SetRopeBf16HardwareEnabled(bool enabled);

// Rotates the bfloat16 rows of `run` like RotateRows of rope-inl.h: row i
// uses the cos/sin float32 rows c/s + i * cs_step; tail_bytes past the
// rotary part are copied when out of place; the prefetch runs on into
// `next` (rope_rows.h). c/s in RotateRow's layout (see rope-inl.h).
void RotateRowsBf16Avx512(const float* c, const float* s, std::int64_t cs_step,
                          const RopeRowRun& run, const RopeRowRun& next, std::int64_t half,
                          std::int64_t tail_bytes, RopeBf16Pairs pairs);

}  // namespace posenc::kernels::simd
