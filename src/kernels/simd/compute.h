// Peak-rate kernels behind the compute ceilings of posenc/bandwidth.h
// (RunComputeKernel; `posenc bench`): each runs `iterations` steps of
// independent multiply-adds held in registers on the calling thread and
// returns the floating-point operations done (2 per multiply-add):
//  - float32 FMA (compute.cc, Highway, best target): 16 (AVX-512; 8 on
//    16-register targets) independent vector accumulators, enough to cover
//    the FMA latency on two pipes, so the loop runs at the FMA issue rate;
//  - bfloat16 dot products (compute_x86.cc, AVX512_BF16 VDPBF16PS: 32
//    multiply-adds per instruction), 16 accumulators;
//  - AMX bfloat16 tiles (compute_x86.cc, TDPBF16PS on four 16 x 16 float32
//    accumulator tiles from two A and two B tiles: 16 x 16 x 32
//    multiply-adds per instruction).
// Arguments are not validated here (src/core/bandwidth.cc does).
#pragma once

#include <cstdint>

namespace posenc::kernels::simd {

// Results are written here so that the loops cannot be optimised away.
extern volatile float g_compute_sink;

double ComputeFloat32Fma(std::int64_t iterations);
// Only when CpuHasAvx512Bf16() (kernels/simd/x86_features.h).
double ComputeBf16Dot(std::int64_t iterations);
// Only when AmxAvailable().
double ComputeAmxBf16(std::int64_t iterations);

}  // namespace posenc::kernels::simd
