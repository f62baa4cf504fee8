// x86 matrix features the 16-bit attention paths and the compute ceilings
// choose at run time (kernels/simd/flash_bf16.cc, flash_amx.cc, compute.cc):
//  - AVX512_BF16 (VDPBF16PS: AMD Zen 4/5, Intel Cooper Lake, Sapphire
//    Rapids and later), from CPUID through __builtin_cpu_supports;
//  - AMX-BF16 (TDPBF16PS on 16 x 16 float32 tiles: Intel Sapphire Rapids and
//    later), from CPUID leaf 7 (EDX bits 22 AMX-BF16 and 24 AMX-TILE), and
//    usable only after Linux grants the process the tile data state: the
//    arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) request (Linux
//    5.16+, Documentation/arch/x86/xstate.rst), made once per process, then
//    checked with ARCH_GET_XCOMP_PERM. Without the grant the first tile
//    instruction would kill the process with SIGILL, so no AMX code runs
//    unless AmxAvailable() is true.
// Hand-written (CPUID, syscall) because Highway 1.0.3 knows neither feature.
#pragma once

#include <string>

namespace posenc::kernels::simd {

// The CPU has AVX512F and AVX512_BF16.
bool CpuHasAvx512Bf16();

// The CPU runs VDPBF16PS zmm at half the rate of its float32 FMAs, so the
// bfloat16 products (exact in float32) are faster as float32 FMAs: Intel
// CPUs with AVX512_FP16 (CPUID leaf 7 EDX bit 23: Sapphire Rapids and
// later; no AMD CPU has it). Measured on such a Xeon here: VDPBF16PS 1.27 G
// instructions/s (64 flops each) against 5.3 G FMAs/s (32 flops each), one
// core (docs/PERFORMANCE.md, "bfloat16 dot products on Intel"). AMD Zen 4/5
// run VDPBF16PS at the FMA rate or better.
bool CpuBf16DotSlow();

// The CPU has AMX-TILE and AMX-BF16 and the kernel granted this process the
// tile data state (requested on the first call; cached).
bool AmxAvailable();

// Why AmxAvailable() is what it is, for logs and skipped tests:
// "available", "the CPU has no AMX-TILE/AMX-BF16 (CPUID leaf 7 EDX bits 24,
// 22)", "arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) failed: <errno text>",
// or "not an x86-64 build".
std::string AmxStatus();

}  // namespace posenc::kernels::simd
