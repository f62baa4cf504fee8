// libFuzzer target: the public validation of ApplyRope / ApplyRopeQK
// (include/posenc/rope.h) on random TensorViews over a guarded buffer.
// Property: every call either throws posenc::InvalidArgument, or returns
// having read only inside the arena (the guard pages fault otherwise) and
// written only the bytes of its output elements (ByteSnapshot). Any other
// exception, a sanitizer report or a fault is a crash.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "fuzz_util.h"
#include "posenc/context.h"
#include "posenc/error.h"
#include "posenc/positions.h"
#include "posenc/rope.h"
#include "view_maker.h"

namespace {

using namespace posenc;
using posenc::fuzz::ViewMaker;

constexpr std::size_t kArenaBytes = std::size_t{16} << 10;
constexpr __int128 kMaxWork = std::int64_t{1} << 11;  // elements per call (keeps runs fast)

const Context& PickContext(FuzzedDataProvider& fdp) {
  static const Context contexts[] = {Context(1, Backend::kScalar), Context(1, Backend::kSimd),
                                     Context(2, Backend::kAuto)};
  return contexts[fdp.ConsumeIntegralInRange<int>(0, 2)];
}

// a * b, or `fallback` where the product overflows (raw sizes are huge).
std::int64_t Times(std::int64_t a, std::int64_t b, std::int64_t fallback) {
  std::int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? fallback : r;
}

std::int64_t Small(FuzzedDataProvider& fdp, ViewMaker& vm, std::int64_t lo, std::int64_t hi) {
  return fdp.ConsumeIntegralInRange<int>(0, 31) == 0 ? vm.Raw()
                                                     : fdp.ConsumeIntegralInRange(lo, hi);
}

RopeParams FuzzParams(FuzzedDataProvider& fdp, ViewMaker& vm, std::int64_t head_dim) {
  RopeParams p;
  p.head_dim = fdp.ConsumeIntegralInRange<int>(0, 15) == 0 ? vm.Raw() : head_dim;
  p.rotary_dim = fdp.ConsumeBool() ? 0 : Small(fdp, vm, 0, head_dim);
  p.theta = fdp.ConsumeBool() ? 10000.0 : fdp.ConsumeFloatingPoint<double>();
  p.pairing = fdp.ConsumeBool() ? RopePairing::kHalfSplit : RopePairing::kInterleaved;
  p.numerics = fdp.ConsumeBool() ? RopeNumerics::kAccurate : RopeNumerics::kHF;
  if (fdp.ConsumeIntegralInRange<int>(0, 7) == 0) {
    const auto n = fdp.ConsumeIntegralInRange<std::size_t>(0, 40);
    for (std::size_t i = 0; i < n; ++i) {
      p.frequencies.inv_freq.push_back(fdp.ConsumeBool() ? fdp.ConsumeProbability<double>()
                                                         : fdp.ConsumeFloatingPoint<double>());
    }
    p.frequencies.attention_factor = fdp.ConsumeBool() ? 1.0 : fdp.ConsumeFloatingPoint<double>();
  }
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static posenc::fuzz::GuardedArena arena(kArenaBytes);
  std::memset(arena.data(), 0x3c, arena.size());  // finite in every dtype
  FuzzedDataProvider fdp(data, size);
  ViewMaker vm(fdp, arena);

  const std::int64_t batch = Small(fdp, vm, 1, 3), seq = Small(fdp, vm, 1, 9);
  const std::int64_t heads = Small(fdp, vm, 1, 4), kv_heads = Small(fdp, vm, 1, 4);
  const std::int64_t head_dim = 2 * fdp.ConsumeIntegralInRange<std::int64_t>(1, 20);
  const AttentionLayout layout =
      fdp.ConsumeBool() ? AttentionLayout::kBSHD : AttentionLayout::kBHSD;
  const auto shape = [&](std::int64_t h) {
    return layout == AttentionLayout::kBSHD ? std::array<std::int64_t, 4>{batch, seq, h, head_dim}
                                            : std::array<std::int64_t, 4>{batch, h, seq, head_dim};
  };
  const RopeParams params = FuzzParams(fdp, vm, head_dim);

  // Positions: an offset or ids (shared or per row, sometimes a wrong count).
  std::vector<std::int64_t> ids;
  Positions positions = Positions::Offset(fdp.ConsumeBool() ? Small(fdp, vm, 0, 100) : vm.Raw());
  if (fdp.ConsumeBool()) {
    std::int64_t count = fdp.ConsumeBool() ? seq : Times(batch, seq, seq);
    if (fdp.ConsumeIntegralInRange<int>(0, 15) == 0) count = Small(fdp, vm, 0, 40);
    if (count < 0 || count > 4096) count = 1;
    for (std::int64_t i = 0; i < count; ++i) {
      ids.push_back(fdp.ConsumeIntegralInRange<int>(0, 7) == 0
                        ? vm.Raw()
                        : fdp.ConsumeIntegralInRange(0, 500));
    }
    positions = Positions::Ids(ids.data(), count);
    if (fdp.ConsumeIntegralInRange<int>(0, 31) == 0) positions.ids = nullptr;
  }
  const RopeDirection direction =
      fdp.ConsumeBool() ? RopeDirection::kForward : RopeDirection::kInverse;
  const Context& ctx = PickContext(fdp);

  const TensorView x = vm.Make(shape(heads), vm.PickDType());
  const int form = fdp.ConsumeIntegralInRange<int>(0, 3);  // 0 in place, 1 out, 2 QK, 3 QK out
  TensorView out =
      form == 1 ? vm.Make(shape(heads), fdp.ConsumeBool() ? x.dtype : vm.PickDType()) : x;
  const TensorView k = vm.Make(shape(kv_heads), vm.PickDType());
  TensorView k_out = form == 3 ? vm.Make(shape(kv_heads), k.dtype) : k;
  if (form == 3) out = vm.Make(shape(heads), x.dtype);

  // The caller's side of the contract: views inside the buffer. Calls whose
  // work is large but valid are skipped (they are slow, not interesting).
  const std::byte* lo = arena.data();
  const std::byte* hi = arena.data() + arena.size();
  for (const TensorView* v : std::initializer_list<const TensorView*>{&x, &out, &k, &k_out}) {
    if (!posenc::fuzz::ViewInside(*v, lo, hi) || posenc::fuzz::ElementCount(*v) > kMaxWork) {
      return -1;
    }
  }

  posenc::fuzz::ByteSnapshot snapshot(arena);
  try {
    switch (form) {
      case 0:
        ApplyRope(params, x, layout, positions, direction, nullptr, ctx);
        break;
      case 1:
        ApplyRope(params, x, layout, positions, direction, &out, ctx);
        break;
      case 2:
        ApplyRopeQK(params, x, k, layout, positions, direction, ctx);
        break;
      default:
        ApplyRopeQK(params, x, k, layout, positions, direction, &out, &k_out, ctx);
        break;
    }
  } catch (const InvalidArgument&) {
    snapshot.Check("a rejected call");  // nothing may be written before the error
    return 0;
  }
  const std::size_t slots = arena.size();
  FUZZ_CHECK(posenc::fuzz::ElementCount(out) <= static_cast<__int128>(slots),
             "an accepted output view has more elements than the buffer has bytes (aliasing)");
  snapshot.AllowWrites(out);
  if (form >= 2) {
    FUZZ_CHECK(posenc::fuzz::ElementCount(k_out) <= static_cast<__int128>(slots),
               "an accepted k output aliases");
    snapshot.AllowWrites(k_out);
  }
  snapshot.Check("ApplyRope");
  return 0;
}
