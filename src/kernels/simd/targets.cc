// Reports which Highway target the SIMD kernels dispatch to on this CPU.
#include "kernels/simd/targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/targets.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/targets.h>

#include "posenc/context.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::kernels::simd {
namespace HWY_NAMESPACE {

// The name of the target this copy of the function was compiled for.
const char* ThisTargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace posenc::kernels::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc {
namespace kernels::simd {

HWY_EXPORT(ThisTargetName);

std::int64_t CompiledTargets() { return HWY_TARGETS; }

std::string_view DispatchedTargetName() { return HWY_DYNAMIC_DISPATCH(ThisTargetName)(); }

}  // namespace kernels::simd

std::string_view SimdTargetName() {
  // Lower bit values are better targets; dispatch picks the best one that
  // is both compiled (HWY_TARGETS) and supported by the CPU.
  const std::int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  if (targets == 0) return hwy::TargetName(HWY_STATIC_TARGET);
  return hwy::TargetName(targets & -targets);
}

}  // namespace posenc
#endif  // HWY_ONCE
