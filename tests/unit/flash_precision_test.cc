// FlashPrecision::kBFloat16 (include/posenc/flash_attention.h): P rounded to
// bfloat16 before P . V, dS before dQ = dS K and dK = dS^T Q, float32 sums.
//
// What is checked here, per scheme (none, ALiBi, T5, Shaw, RoPE rotated in
// the kernel), GQA, odd sizes and tiles, bfloat16 inputs:
//  - the error of every output against the float64 oracle stays within the
//    bfloat16 rounding of P and dS: max |error| <= 2^-6 max |oracle| (each
//    rounded entry is off by at most 2^-9 of itself; a broken pairing,
//    offset or stride gives O(1) errors);
//  - the rounding takes effect: O, dQ, dK, dV move away from the float32
//    precision's result by more than 4x its own (float32) error;
//  - the fast path (VDPBF16PS where the CPU has AVX512_BF16, on every
//    compiled Highway target) and Backend::kScalar (float32 loops over the
//    same rounded operands) agree: their mean difference is under a tenth of
//    the mean error, which is what rare rounding flips of P (a float32 P one
//    ulp apart across exp implementations) allow;
//  - both ways of running the products (VDPBF16PS on bfloat16 pairs, or
//    float32 FMAs on P and dS rounded in place: FlashBf16Dots) pass the
//    same checks, including the training shape's 64 x 64 tiles at head dim 32;
//  - decode rounds P the same way;
//  - bad input: bfloat16 with float32 inputs or dout, an unknown value.
// The error rule against torch's own bfloat16 eager attention is measured in
// python/tests/test_attention_precision.py.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "flash_backward_fixture.h"
#include "kernels/simd/flash.h"
#include "simd_target_fixture.h"

namespace posenc::flash_test {
namespace {

// Every output of one forward + backward, [B, H, S, D] order.
struct Outputs {
  std::vector<double> out;
  Grads g;
};

Outputs RunFlash(Fixture& f, FlashPrecision precision, Backend backend) {
  const Case& c = f.c;
  FlashAttentionOptions opt;
  opt.query_tile = c.query_tile;
  opt.key_tile = c.key_tile;
  opt.precision = precision;
  const Context ctx(c.threads, backend);
  std::vector<float> out(Z(c.B * c.Sq * c.H * c.Dv), NAN), lse(Z(c.B * c.H * c.Sq), NAN);
  const TensorView out_view =
      AttentionView(out.data(), DType::kFloat32, c.layout, c.B, c.Sq, c.H, c.Dv);
  const TensorView lse_view = TensorView::Contiguous(lse.data(), DType::kFloat32, {c.B, c.H, c.Sq});
  FlashAttentionWithLse(f.params, f.q.view, f.k.view, f.v.view, out_view, lse_view, opt, ctx);
  GradOutputs g(f, DType::kFloat32);
  FlashAttentionBackward(f.params, f.q.view, f.k.view, f.v.view, out_view, f.dout.view, lse_view,
                         g.grads, opt, ctx);
  return {Canonical(out_view, c.layout), g.Values(c.layout)};
}

Outputs Oracle(Fixture& f) {
  const Case& c = f.c;
  std::vector<double> out(Z(c.B * c.Sq * c.H * c.Dv));
  const TensorView out_view =
      AttentionView(out.data(), DType::kFloat64, c.layout, c.B, c.Sq, c.H, c.Dv);
  AttentionReference(f.params, f.q.view, f.k.view, f.v.view, out_view);
  GradOutputs g(f, DType::kFloat64);
  AttentionReferenceBackward(f.params, f.q.view, f.k.view, f.v.view, f.dout.view, g.grads);
  return {Canonical(out_view, c.layout), g.Values(c.layout)};
}

double MeanErr(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += std::abs(a[i] - b[i]);
  return a.empty() ? 0.0 : sum / static_cast<double>(a.size());
}

struct Named {
  const char* name;
  const std::vector<double>* bf16;
  const std::vector<double>* f32;
  const std::vector<double>* oracle;
  bool rounded;  // P or dS enters this output's products
};

std::vector<Named> Each(const Outputs& bf16, const Outputs& f32, const Outputs& oracle) {
  return {{"out", &bf16.out, &f32.out, &oracle.out, true},
          {"dq", &bf16.g.dq, &f32.g.dq, &oracle.g.dq, true},
          {"dk", &bf16.g.dk, &f32.g.dk, &oracle.g.dk, true},
          {"dv", &bf16.g.dv, &f32.g.dv, &oracle.g.dv, true},
          {"t5 table", &bf16.g.t5, &f32.g.t5, &oracle.g.t5, false},
          {"shaw a_key", &bf16.g.a_key, &f32.g.a_key, &oracle.g.a_key, false},
          {"shaw a_value", &bf16.g.a_value, &f32.g.a_value, &oracle.g.a_value, false}};
}

// The checks of the header for one case; `backend` is the fast path's.
void CheckPrecision(const Case& c, Backend backend) {
  SCOPED_TRACE(c.name);
  Fixture f(c);
  const Outputs oracle = Oracle(f);
  const Outputs f32 = RunFlash(f, FlashPrecision::kFloat32, backend);
  const Outputs fast = RunFlash(f, FlashPrecision::kBFloat16, backend);
  const Outputs scalar = RunFlash(f, FlashPrecision::kBFloat16, Backend::kScalar);
  const std::vector<Named> fast_each = Each(fast, f32, oracle);
  const std::vector<Named> scalar_each = Each(scalar, f32, oracle);
  for (std::size_t n = 0; n < fast_each.size(); ++n) {
    const Named& o = fast_each[n];
    if (o.oracle->empty()) continue;
    SCOPED_TRACE(o.name);
    const double bound = std::ldexp(MaxAbs(*o.oracle), -6) + 1e-6;
    const double err = MaxErr(*o.bf16, *o.oracle), mean = MeanErr(*o.bf16, *o.oracle);
    EXPECT_LE(err, bound);
    EXPECT_LE(MaxErr(*scalar_each[n].bf16, *o.oracle), bound);
    for (double x : *o.bf16) ASSERT_TRUE(std::isfinite(x));
    // + float32 noise: the table gradients (not rounded) differ by their sums' order only.
    EXPECT_LE(MeanErr(*o.bf16, *scalar_each[n].bf16), 0.1 * mean + 1e-6 * (1 + MaxAbs(*o.oracle)));
    if (o.rounded) {
      EXPECT_GT(mean, 4.0 * MeanErr(*o.f32, *o.oracle));
    }
  }
}

Case PrecisionCase(const char* name, Kind kind, AttentionMask mask) {
  Case c = Make(name, kind, mask);
  c.dtype = DType::kBFloat16;
  c.H = 4;
  c.Hkv = 2;
  c.Sq = c.Sk = 45;
  c.D = c.Dv = 48;
  c.query_tile = 16;
  c.key_tile = 13;  // odd: P's pairs along the keys end in a half pair
  return c;
}

TEST(FlashPrecision, BFloat16EveryScheme) {
  for (Kind kind : {Kind::kNone, Kind::kAlibi, Kind::kT5, Kind::kShaw, Kind::kRope}) {
    CheckPrecision(PrecisionCase(KindName(kind).data(), kind, kCausal), Backend::kAuto);
  }
  Case c = PrecisionCase("bidirectional window, bhsd, odd query tile", Kind::kAlibi, kBidir);
  c.layout = AttentionLayout::kBHSD;
  c.window = 17;
  c.query_tile = 7;  // odd: P^T and dS^T pairs along the queries end in a half pair
  CheckPrecision(c, Backend::kAuto);
}

TEST(FlashPrecision, BFloat16LongRows) {
  // Rows of 2048 keys (optimised builds; the sanitizer build runs 300).
  Case c = PrecisionCase("long", Kind::kAlibi, kCausal);
  c.H = c.Hkv = 1;
  c.D = c.Dv = 64;
  c.query_tile = c.key_tile = 64;
#ifdef NDEBUG
  c.Sq = c.Sk = 2048;
#else
  c.Sq = c.Sk = 300;
#endif
  CheckPrecision(c, Backend::kAuto);
}

// Runs the engines with one way of computing the bfloat16 products
// (kernels/simd/flash.h FlashBf16Dots) and restores kAuto.
struct Bf16DotsMode {
  explicit Bf16DotsMode(kernels::simd::FlashBf16Dots mode) {
    kernels::simd::SetFlashBf16Dots(mode);
  }
  ~Bf16DotsMode() { kernels::simd::SetFlashBf16Dots(kernels::simd::FlashBf16Dots::kAuto); }
  Bf16DotsMode(const Bf16DotsMode&) = delete;
  Bf16DotsMode& operator=(const Bf16DotsMode&) = delete;
};

TEST(FlashPrecision, BothWaysOfTheBfloat16Products) {
  // VDPBF16PS on bfloat16 pairs (kDot, where the CPU has AVX512_BF16; AMD's
  // choice) and float32 FMAs on P and dS rounded in place (kFloat32; Intel's
  // choice, CpuBf16DotSlow): the same checks on every scheme, and on the
  // training shape's tiles (64 x 64, head dim 32: the narrow rows' blocks
  // and the diagonal bands).
  using kernels::simd::FlashBf16Dots;
  for (FlashBf16Dots mode : {FlashBf16Dots::kDot, FlashBf16Dots::kFloat32}) {
    const Bf16DotsMode scoped(mode);
    SCOPED_TRACE(mode == FlashBf16Dots::kDot ? "VDPBF16PS" : "float32 FMAs");
    for (Kind kind : {Kind::kNone, Kind::kAlibi, Kind::kT5, Kind::kShaw, Kind::kRope}) {
      CheckPrecision(PrecisionCase(KindName(kind).data(), kind, kCausal), Backend::kAuto);
    }
    Case c = PrecisionCase("training tiles", Kind::kAlibi, kCausal);
    c.B = 3;
    c.Sq = c.Sk = 150;
    c.D = c.Dv = 32;
    c.query_tile = c.key_tile = 64;
    CheckPrecision(c, Backend::kAuto);
  }
}

TEST(FlashPrecision, UnitTasksGiveThePhasedBits) {
  // 8 units (B 4 x Hkv 2): on one thread the engines run one task per unit
  // (kUnitsPerThread), on three the phased tasks; every output the same bits.
  for (Kind kind : {Kind::kNone, Kind::kAlibi, Kind::kT5, Kind::kShaw, Kind::kRope}) {
    Case c = PrecisionCase(KindName(kind).data(), kind, kCausal);
    c.B = 4;
    Fixture f(c);
    const Outputs one = RunFlash(f, FlashPrecision::kBFloat16, Backend::kAuto);
    f.c.threads = 3;
    const Outputs three = RunFlash(f, FlashPrecision::kBFloat16, Backend::kAuto);
    SCOPED_TRACE(c.name);
    EXPECT_EQ(one.out, three.out);
    EXPECT_EQ(one.g.dq, three.g.dq);
    EXPECT_EQ(one.g.dk, three.g.dk);
    EXPECT_EQ(one.g.dv, three.g.dv);
  }
}

TEST(FlashPrecision, DecodeRoundsP) {
  Case c = PrecisionCase("decode", Kind::kAlibi, kCausal);
  c.Sq = 3;
  c.Sk = 700;
  Fixture f(c);
  const Outputs oracle = Oracle(f);
  std::vector<double> results[2];
  for (int bf16 = 0; bf16 < 2; ++bf16) {
    FlashAttentionOptions opt;
    opt.precision = bf16 ? FlashPrecision::kBFloat16 : FlashPrecision::kFloat32;
    std::vector<float> out(Z(c.B * c.Sq * c.H * c.Dv), NAN);
    const TensorView view =
        AttentionView(out.data(), DType::kFloat32, c.layout, c.B, c.Sq, c.H, c.Dv);
    FlashAttentionDecode(f.params, f.q.view, f.k.view, f.v.view, view, TensorView{}, opt);
    results[bf16] = Canonical(view, c.layout);
  }
  EXPECT_LE(MaxErr(results[1], oracle.out), std::ldexp(MaxAbs(oracle.out), -6));
  EXPECT_GT(MeanErr(results[1], oracle.out), 4.0 * MeanErr(results[0], oracle.out));
}

TEST(FlashPrecision, BadInput) {
  EXPECT_EQ(ParseFlashPrecision("bfloat16"), FlashPrecision::kBFloat16);
  EXPECT_EQ(FlashPrecisionName(FlashPrecision::kBFloat16), "bfloat16");
  ExpectInvalid([] { ParseFlashPrecision("fp8"); }, "precision: got fp8, expected one of float32");
  FlashAttentionOptions opt;
  opt.precision = static_cast<FlashPrecision>(7);
  ExpectInvalid([&] { ValidateFlashAttentionOptions(opt); }, "precision: got 7");
  opt.precision = FlashPrecision::kBFloat16;
  Case c = Make("float32 inputs", Kind::kNone, kCausal);
  Fixture f32(c);
  std::vector<float> out(Z(c.B * c.Sq * c.H * c.Dv));
  const TensorView ov = AttentionView(out.data(), DType::kFloat32, c.layout, c.B, c.Sq, c.H, c.Dv);
  ExpectInvalid([&] { FlashAttention(f32.params, f32.q.view, f32.k.view, f32.v.view, ov, opt); },
                "precision: got bfloat16, expected float32 for q of dtype float32");
  ExpectInvalid(
      [&] {
        FlashAttentionDecode(f32.params, f32.q.view, f32.k.view, f32.v.view, ov, TensorView{}, opt);
      },
      "precision: got bfloat16");
  // bfloat16 q, k, v but a float32 dout.
  c.dtype = DType::kBFloat16;
  Fixture f(c);
  Tensor dout32(DType::kFloat32, c.layout, c.B, c.Sq, c.H, c.Dv, 14);
  GradOutputs g(f, DType::kFloat32);
  ExpectInvalid(
      [&] {
        FlashAttentionBackward(f.params, f.q.view, f.k.view, f.v.view, ov, dout32.view,
                               TensorView{}, g.grads, opt);
      },
      "expected float32 for dout of dtype float32");
}

// Runs once per compiled Highway target (tests/unit/simd_target_fixture.h).
class FlashPrecisionSimdTarget : public test::PerSimdTarget {};

TEST_P(FlashPrecisionSimdTarget, MatchesScalarBackend) {
  for (Kind kind : {Kind::kT5, Kind::kRope}) {
    Case c = PrecisionCase(KindName(kind).data(), kind, kBidir);
    c.Sq = 19;
    c.query_tile = 7;
    CheckPrecision(c, Backend::kSimd);
  }
}
POSENC_INSTANTIATE_PER_SIMD_TARGET(FlashPrecisionSimdTarget);

}  // namespace
}  // namespace posenc::flash_test
