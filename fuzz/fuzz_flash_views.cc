// libFuzzer target: the public validation of FlashAttention,
// FlashAttentionWithLse, FlashAttentionBackward and FlashAttentionDecode
// (include/posenc/flash_attention.h) on random TensorViews over a guarded
// buffer, with random masks, windows, scales, positions, tiles and schemes
// (none, absolute, RoPE, ALiBi, T5, Shaw; Transformer-XL / DeBERTa must be
// rejected). Property: every call either throws posenc::InvalidArgument
// having written nothing, or returns having read only inside the arena (the
// guard pages fault otherwise) and written only its output elements.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "fuzz_util.h"
#include "posenc/attention.h"
#include "posenc/context.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"
#include "posenc/t5.h"
#include "view_maker.h"

namespace {

using namespace posenc;
using posenc::fuzz::ViewMaker;

constexpr std::size_t kArenaBytes = std::size_t{32} << 10;
constexpr __int128 kMaxWork = std::int64_t{1} << 18;  // q elements x (k + v) elements

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

std::optional<Positions> FuzzPositions(FuzzedDataProvider& fdp, ViewMaker& vm,
                                       std::vector<std::int64_t>& ids, std::int64_t batch,
                                       std::int64_t seq) {
  switch (fdp.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
    case 1:
      return std::nullopt;
    case 2:
      return Positions::Offset(fdp.ConsumeBool() ? Small(fdp, vm, 0, 50) : vm.Raw());
    default: {
      std::int64_t count = fdp.ConsumeBool() ? seq : Times(batch, seq, seq);
      if (fdp.ConsumeIntegralInRange<int>(0, 15) == 0) count = Small(fdp, vm, 0, 40);
      if (count < 0 || count > 4096) count = 1;
      ids.clear();
      for (std::int64_t i = 0; i < count; ++i) {
        ids.push_back(fdp.ConsumeIntegralInRange<int>(0, 7) == 0
                          ? vm.Raw()
                          : fdp.ConsumeIntegralInRange(0, 60));
      }
      return Positions::Ids(ids.data(), count);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static posenc::fuzz::GuardedArena arena(kArenaBytes);
  std::memset(arena.data(), 0x3c, arena.size());  // finite in every dtype
  FuzzedDataProvider fdp(data, size);
  ViewMaker vm(fdp, arena);

  const std::int64_t B = Small(fdp, vm, 1, 2), Sq = Small(fdp, vm, 1, 12),
                     Sk = Small(fdp, vm, 1, 12);
  const std::int64_t Hkv = Small(fdp, vm, 1, 2);
  const std::int64_t H = fdp.ConsumeBool() ? Hkv : Times(Hkv, Small(fdp, vm, 1, 3), Hkv);
  const std::int64_t D = Times(2, Small(fdp, vm, 1, 8), 2);
  const std::int64_t Dv = fdp.ConsumeBool() ? D : Small(fdp, vm, 1, 9);

  AttentionParams params;
  params.layout = fdp.ConsumeBool() ? AttentionLayout::kBSHD : AttentionLayout::kBHSD;
  params.mask = fdp.ConsumeBool() ? AttentionMask::kCausal : AttentionMask::kBidirectional;
  if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0) params.sliding_window = Small(fdp, vm, 0, 8);
  if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0) params.scale = fdp.ConsumeFloatingPoint<double>();
  std::vector<std::int64_t> qids, kids;
  params.query_positions = FuzzPositions(fdp, vm, qids, B, Sq);
  params.key_positions = FuzzPositions(fdp, vm, kids, B, Sk);

  const auto shape = [&](std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d) {
    return params.layout == AttentionLayout::kBSHD ? std::array<std::int64_t, 4>{b, s, h, d}
                                                   : std::array<std::int64_t, 4>{b, h, s, d};
  };
  // Scheme (T5 table and Shaw tables live as long as the call).
  std::optional<T5BiasTable> t5;
  TensorView a_key, a_value;
  const int kind = fdp.ConsumeIntegralInRange<int>(0, 7);
  try {
    switch (kind) {
      case 0:
        break;
      case 1:
        params.scheme = AbsoluteScheme();
        break;
      case 2: {
        RopeParams rp;
        rp.head_dim = fdp.ConsumeIntegralInRange<int>(0, 7) == 0 ? vm.Raw() : D;
        const std::int64_t pairs = Small(fdp, vm, 1, std::max<std::int64_t>(1, D / 2));
        rp.rotary_dim = fdp.ConsumeBool() ? 0 : Times(2, pairs, 2);
        rp.pairing = fdp.ConsumeBool() ? RopePairing::kHalfSplit : RopePairing::kInterleaved;
        rp.numerics = fdp.ConsumeBool() ? RopeNumerics::kAccurate : RopeNumerics::kHF;
        params.scheme = RopeScheme(rp);
        break;
      }
      case 3: {
        std::vector<double> slopes;
        const std::int64_t n = fdp.ConsumeBool() ? H : Small(fdp, vm, 0, 6);
        for (std::int64_t h = 0; h < n && h < 64; ++h) {
          slopes.push_back(fdp.ConsumeBool() ? fdp.ConsumeProbability<double>()
                                             : fdp.ConsumeFloatingPoint<double>());
        }
        params.scheme = AlibiScheme(std::move(slopes));
        break;
      }
      case 4: {
        const T5BucketParams tp{
            Small(fdp, vm, 2, 40), Small(fdp, vm, 1, 200),
            fdp.ConsumeBool() ? T5Direction::kCausal : T5Direction::kBidirectional};
        t5.emplace(tp, fdp.ConsumeBool() ? H : Small(fdp, vm, 1, 5));
        t5->InitNormal(7, 0.5);
        params.scheme = T5Scheme(*t5);
        break;
      }
      case 5: {
        ShawParams sp{Small(fdp, vm, 0, 6), fdp.ConsumeBool() ? D : Small(fdp, vm, 1, 9)};
        const std::int64_t rows = Times(2, sp.clip, 0) + (sp.clip < 0 ? 0 : 1);
        a_key = vm.Make(std::array<std::int64_t, 2>{rows, D},
                        fdp.ConsumeBool() ? DType::kFloat32 : vm.PickDType());
        a_value = vm.Make(std::array<std::int64_t, 2>{rows, Dv}, a_key.dtype);
        params.scheme = ShawScheme(sp, a_key, a_value);
        break;
      }
      case 6:
        params.scheme = PositionScheme::Registered("transformer_xl");
        break;
      default:
        params.scheme = PositionScheme::Registered("deberta");
        break;
    }
  } catch (const InvalidArgument&) {
    return 0;  // a scheme constructor rejected its own arguments
  }

  FlashAttentionOptions options;
  options.query_tile = Small(fdp, vm, 1, 16);
  options.key_tile = Small(fdp, vm, 1, 16);
  options.rope_keys = fdp.ConsumeBool() ? FlashRopeKeys::kRotate : FlashRopeKeys::kPreRotated;
  const Context& ctx = PickContext(fdp);

  const DType dt = vm.PickDType();
  const auto pick = [&] {
    return fdp.ConsumeIntegralInRange<int>(0, 3) == 0 ? vm.PickDType() : dt;
  };
  const TensorView q = vm.Make(shape(B, Sq, H, D), pick());
  const TensorView k = vm.Make(shape(B, Sk, Hkv, D), pick());
  const TensorView v = vm.Make(shape(B, Sk, Hkv, Dv), pick());
  const TensorView out = vm.Make(shape(B, Sq, H, Dv), pick());
  // forward, with lse, backward, decode (lse optional)
  const int call = fdp.ConsumeIntegralInRange<int>(0, 3);
  TensorView lse, dout, g_table, g_a_key, g_a_value;
  AttentionGrads grads;
  std::vector<const TensorView*> outputs = {&out};
  if (call >= 1) {
    lse = vm.Make(std::array<std::int64_t, 3>{B, H, Sq},
                  fdp.ConsumeBool() ? DType::kFloat32 : vm.PickDType());
    if (call >= 2 && fdp.ConsumeBool()) lse.data = nullptr;  // recompute it / no lse
    if (call == 1 || (call == 3 && lse.data != nullptr)) outputs.push_back(&lse);
  }
  if (call == 2) {
    dout = vm.Make(shape(B, Sq, H, Dv), pick());
    grads.dq = vm.Make(shape(B, Sq, H, D), pick());
    grads.dk = vm.Make(shape(B, Sk, Hkv, D), pick());
    grads.dv = vm.Make(shape(B, Sk, Hkv, Dv), pick());
    outputs = {&grads.dq, &grads.dk, &grads.dv};
    if (kind == 4 && fdp.ConsumeBool()) {
      g_table =
          vm.Make(std::array<std::int64_t, 2>{t5->num_buckets(), t5->heads()}, DType::kFloat32);
      grads.scheme.Set("table", g_table);
      outputs.push_back(&g_table);
    }
    if (kind == 5 && fdp.ConsumeBool()) {
      g_a_key = vm.Make(std::array<std::int64_t, 2>{a_key.shape[0], a_key.shape[1]}, pick());
      g_a_value = vm.Make(std::array<std::int64_t, 2>{a_value.shape[0], a_value.shape[1]}, pick());
      grads.scheme.Set("a_key", g_a_key).Set("a_value", g_a_value);
      outputs.push_back(&g_a_key);
      outputs.push_back(&g_a_value);
    }
  }

  // The caller's side of the contract: views inside the buffer; calls whose
  // work is large but valid are skipped (slow, not interesting).
  const std::byte* lo = arena.data();
  const std::byte* hi = arena.data() + arena.size();
  std::vector<const TensorView*> all = {&q, &k, &v, &out};
  if (call >= 1 && lse.data != nullptr) all.push_back(&lse);
  if (call == 2) {
    for (const TensorView* t : {&dout, &grads.dq, &grads.dk, &grads.dv}) all.push_back(t);
  }
  if (kind == 5) {
    all.push_back(&a_key);
    all.push_back(&a_value);
  }
  for (const TensorView* t : outputs) all.push_back(t);
  for (const TensorView* t : all) {
    if (!posenc::fuzz::ViewInside(*t, lo, hi)) return -1;
  }
  using posenc::fuzz::ElementCount;
  if (ElementCount(q) * (ElementCount(k) + ElementCount(v)) > kMaxWork) return -1;

  posenc::fuzz::ByteSnapshot snapshot(arena);
  try {
    switch (call) {
      case 0:
        FlashAttention(params, q, k, v, out, options, ctx);
        break;
      case 1:
        FlashAttentionWithLse(params, q, k, v, out, lse, options, ctx);
        break;
      case 3:
        FlashAttentionDecode(params, q, k, v, out, lse.data != nullptr ? lse : TensorView{},
                             options, ctx);
        break;
      default:
        FlashAttentionBackward(params, q, k, v, out, dout, lse, grads, options, ctx);
        break;
    }
  } catch (const InvalidArgument&) {
    snapshot.Check("a rejected call");
    return 0;
  }
  for (const TensorView* t : outputs) {
    FUZZ_CHECK(ElementCount(*t) <= static_cast<__int128>(arena.size()),
               "an accepted output view has more elements than the buffer has bytes (aliasing)");
    snapshot.AllowWrites(*t);
  }
  snapshot.Check("flash attention");
  return 0;
}
