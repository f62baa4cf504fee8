// Reports which Highway target the SIMD kernels dispatch to on this CPU.
#include <hwy/highway.h>
#include <hwy/targets.h>

#include "posenc/context.h"

namespace posenc {

std::string_view SimdTargetName() {
  // Lower bit values are better targets; dispatch picks the best one that
  // is both compiled (HWY_TARGETS) and supported by the CPU.
  const std::int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  if (targets == 0) return hwy::TargetName(HWY_STATIC_TARGET);
  return hwy::TargetName(targets & -targets);
}

}  // namespace posenc
