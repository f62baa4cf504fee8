// Which Highway targets the SIMD kernels were compiled for, and which one a
// dispatching call picks now. Used by SimdTargetName(), `posenc bench` and
// the tests that run every fast kernel on every compiled target.
//
// Compiled targets (src/CMakeLists.txt, Highway 1.0.3 defaults with Debian's
// baseline flags): AVX3 (AVX-512F/BW/DQ/VL), AVX2 (+FMA, F16C), SSE4 and the
// SCALAR fallback (the static target of an -march=x86-64 build). SSSE3 is
// disabled (HWY_DISABLED_TARGETS) to save compile time: a CPU without SSE4.1
// runs the SCALAR target. Highway 1.0.3 has no AVX3_ZEN4; AVX3_DL is not
// requested because no kernel here uses its extra instructions.
#pragma once

#include <cstdint>
#include <string_view>

namespace posenc::kernels::simd {

// Bit mask (Highway's HWY_* target bits) of the targets compiled in.
std::int64_t CompiledTargets();

// Name of the target that HWY_DYNAMIC_DISPATCH selects at this moment (it
// honours hwy::SetSupportedTargetsForTest, so tests can check that a forced
// target really ran).
std::string_view DispatchedTargetName();

}  // namespace posenc::kernels::simd
