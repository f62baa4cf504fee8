// Runs a parameterised test once per compiled Highway target the CPU
// supports: SetUp forces dispatch to the target (hwy::SetSupportedTargetsForTest)
// and checks that it took effect. Shared by every fast-vs-scalar test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include "kernels/simd/targets.h"

namespace posenc::test {

// Compiled targets this CPU supports, best first (one bit each).
inline std::vector<std::int64_t> SimdTargets() {
  std::vector<std::int64_t> out;
  for (std::int64_t bits = hwy::SupportedTargets() & kernels::simd::CompiledTargets(); bits != 0;
       bits &= bits - 1) {
    out.push_back(bits & -bits);
  }
  return out;
}

class PerSimdTarget : public testing::TestWithParam<std::int64_t> {
 protected:
  void SetUp() override {
    hwy::SetSupportedTargetsForTest(GetParam());
    ASSERT_EQ(kernels::simd::DispatchedTargetName(), hwy::TargetName(GetParam()));
  }
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

inline std::string SimdTargetParamName(const testing::TestParamInfo<std::int64_t>& info) {
  return hwy::TargetName(info.param);
}

}  // namespace posenc::test

// Instantiates FIXTURE (derived from posenc::test::PerSimdTarget) for every target.
#define POSENC_INSTANTIATE_PER_SIMD_TARGET(FIXTURE)                                            \
  INSTANTIATE_TEST_SUITE_P(Targets, FIXTURE, testing::ValuesIn(::posenc::test::SimdTargets()), \
                           ::posenc::test::SimdTargetParamName)
