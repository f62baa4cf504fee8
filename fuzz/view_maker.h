// Random TensorViews over a GuardedArena for the validation fuzzers
// (fuzz_rope_views.cc, fuzz_flash_views.cc). Most views are well formed
// (a permutation of a padded contiguous layout, sizes shared with the other
// tensors of the call) so that the kernels behind the validation run; a
// share are perturbed (a size or stride from raw fuzz bytes, another dtype
// or rank, an offset that overlaps another view) to exercise every check.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "fuzz_util.h"
#include "posenc/tensor.h"

namespace posenc::fuzz {

class ViewMaker {
 public:
  ViewMaker(FuzzedDataProvider& fdp, const GuardedArena& arena) : fdp_(fdp), arena_(arena) {}

  DType PickDType() {
    static constexpr DType kAll[] = {DType::kFloat32, DType::kFloat64, DType::kBFloat16,
                                     DType::kFloat16};
    return kAll[fdp_.ConsumeIntegralInRange<int>(0, 3)];
  }

  // A view of logical shape `shape` (rank = shape size) in the arena.
  template <std::size_t N>
  TensorView Make(const std::array<std::int64_t, N>& shape, DType dtype) {
    TensorView v;
    v.dtype = dtype;
    v.rank = static_cast<int>(N);
    for (std::size_t d = 0; d < N; ++d) v.shape[d] = shape[d];
    const int mode = fdp_.ConsumeIntegralInRange<int>(0, 15);
    if (mode == 15) {  // raw: any rank, sizes and strides
      v.rank = fdp_.ConsumeIntegralInRange<int>(-1, kMaxRank + 1);
      for (int d = 0; d < kMaxRank; ++d) {
        v.shape[d] = Raw();
        v.strides[d] = Raw();
      }
    } else {
      if (mode == 14) v.shape[fdp_.ConsumeIntegralInRange<std::size_t>(0, N - 1)] = Raw();
      // Strides: dims in a random order, each with optional padding.
      std::array<int, N> order{};
      for (std::size_t d = 0; d < N; ++d) order[d] = static_cast<int>(d);
      if (fdp_.ConsumeBool()) {
        for (std::size_t i = N; i > 1; --i) {
          std::swap(order[i - 1], order[fdp_.ConsumeIntegralInRange<std::size_t>(0, i - 1)]);
        }
      }
      std::int64_t stride = 1;
      for (std::size_t i = N; i-- > 0;) {
        const int d = order[i];
        v.strides[d] = stride;
        const std::int64_t pad = fdp_.ConsumeIntegralInRange<std::int64_t>(0, 3) == 3
                                     ? fdp_.ConsumeIntegralInRange<std::int64_t>(0, 5)
                                     : 0;
        if (v.shape[d] > 0 && stride > 0 && v.shape[d] < (std::int64_t{1} << 30) &&
            stride < (std::int64_t{1} << 30)) {
          stride = stride * v.shape[d] + pad;
        }
      }
      if (mode == 13) v.strides[fdp_.ConsumeIntegralInRange<std::size_t>(0, N - 1)] = Raw();
      if (mode == 12) v.strides[fdp_.ConsumeIntegralInRange<std::size_t>(0, N - 1)] = 0;
    }
    const std::size_t es = DTypeSize(dtype);
    const std::size_t slots = arena_.size() / es;
    // Place the view at the end of the arena or at a random element offset.
    __int128 last = 0;
    bool sane = v.rank >= 1 && v.rank <= kMaxRank;
    for (int d = 0; sane && d < v.rank; ++d) {
      sane = v.shape[d] >= 1 && v.strides[d] >= 0 && v.shape[d] < (std::int64_t{1} << 31) &&
             v.strides[d] < (std::int64_t{1} << 31);
      if (sane) last += static_cast<__int128>(v.shape[d] - 1) * v.strides[d];
    }
    std::size_t at = fdp_.ConsumeIntegralInRange<std::size_t>(0, slots - 1);
    if (sane && fdp_.ConsumeBool() && last < static_cast<__int128>(slots)) {
      at = slots - 1 - static_cast<std::size_t>(last);  // flush with the trailing guard
    }
    v.data = arena_.data() + at * es;
    if (fdp_.ConsumeIntegralInRange<int>(0, 63) == 0) v.data = nullptr;
    return v;
  }

  std::int64_t Raw() {
    switch (fdp_.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
        return fdp_.ConsumeIntegral<std::int64_t>();
      case 1:
        return fdp_.ConsumeIntegralInRange<std::int64_t>(-2, 70000);
      case 2:
        return std::int64_t{1} << fdp_.ConsumeIntegralInRange<int>(0, 62);
      default:
        return (std::int64_t{1} << fdp_.ConsumeIntegralInRange<int>(0, 62)) - 1;
    }
  }

 private:
  FuzzedDataProvider& fdp_;
  const GuardedArena& arena_;
};

}  // namespace posenc::fuzz
