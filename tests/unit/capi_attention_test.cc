// The C API's attention (include/posenc/c.h: posenc_scheme, prefill, varlen,
// decode) and KV-cache RoPE entry points (shift, cos/sin cache) against the
// C++ calls they front: bit-identical results on the same inputs for every
// scheme, typed (RoPE params, ALiBi slopes, T5 table) and named (any
// registered scheme, FIRE included), a strided cache of larger capacity,
// GQA and several query tokens; and one clear status + message for every
// missing or wrong scheme setting (nothing silently defaulted).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/c.h"
#include "posenc/fire.h"
#include "posenc/flash_attention.h"
#include "posenc/rope.h"
#include "posenc/t5.h"

namespace posenc {
namespace {

std::vector<float> Ramp(std::size_t n, float scale = 0.01f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * 0.37f) + scale * i;
  return v;
}

posenc_tensor CTensor(const void* data, posenc_dtype dtype, std::vector<int64_t> shape) {
  posenc_tensor t;
  EXPECT_EQ(posenc_tensor_contiguous(const_cast<void*>(data), dtype,
                                     static_cast<int32_t>(shape.size()), shape.data(), &t),
            POSENC_OK)
      << posenc_last_error();
  return t;
}

TensorView View(const std::vector<float>& v, std::initializer_list<std::int64_t> shape) {
  return TensorView::Contiguous(v.data(), DType::kFloat32, shape);
}

void ExpectStatus(posenc_status got, posenc_status want, const std::vector<std::string>& needles) {
  EXPECT_EQ(got, want) << posenc_last_error();
  for (const std::string& n : needles) {
    EXPECT_NE(std::string(posenc_last_error()).find(n), std::string::npos) << posenc_last_error();
  }
}

posenc_scheme_arg Num(const char* n, double x) {
  posenc_scheme_arg a;
  posenc_scheme_arg_init(&a);
  a.name = n;
  a.kind = POSENC_ARG_NUMBER;
  a.number = x;
  return a;
}
posenc_scheme_arg Txt(const char* n, const char* text) {
  posenc_scheme_arg a;
  posenc_scheme_arg_init(&a);
  a.name = n;
  a.kind = POSENC_ARG_TEXT;
  a.text = text;
  return a;
}
posenc_scheme_arg Ten(const char* n, posenc_tensor t) {
  posenc_scheme_arg a;
  posenc_scheme_arg_init(&a);
  a.name = n;
  a.kind = POSENC_ARG_TENSOR;
  a.tensor = t;
  return a;
}

// The schemes every test runs: the C description and the C++ one.
struct Fixture {
  static constexpr int64_t h = 4, d = 8;
  std::vector<float> t5_table = Ramp(32 * h), a_key = Ramp(5 * d), a_value = Ramp(5 * d, -0.01f);
  std::vector<double> slopes = {0.5, 0.25, 0.125, 0.0625};
  posenc_tensor t5_c = CTensor(t5_table.data(), POSENC_FLOAT32, {32, h});
  T5BiasTable t5{T5BucketParams{}, h};
  RopeParams rp;
  posenc_rope_params rope_c;
  FireWeights fire = FireInit(h, 6, 4);  // a scheme added after the C API: passes by name

  struct Case {
    std::string label;
    posenc_scheme scheme;
    std::vector<posenc_scheme_arg> args;
    PositionScheme cpp;
    FlashRopeKeys rope_keys = FlashRopeKeys::kRotate;
  };
  std::vector<Case> cases;

  Fixture() {
    std::copy(t5_table.begin(), t5_table.end(), t5.data());
    rp.head_dim = d;
    rp.theta = 100.0;
    rp.pairing = RopePairing::kInterleaved;
    posenc_rope_params_init(&rope_c);
    rope_c.head_dim = d;
    rope_c.theta = 100.0;
    rope_c.pairing = POSENC_PAIRING_INTERLEAVED;
    fire.threshold = 3.0;
    const auto typed = [&](posenc_scheme_kind kind) {
      posenc_scheme s;
      posenc_scheme_init(&s);
      s.kind = kind;
      return s;
    };
    const auto named = [&](const char* name) {
      posenc_scheme s = typed(POSENC_SCHEME_NAMED);
      s.name = name;
      return s;
    };
    cases.push_back({"none", typed(POSENC_SCHEME_NONE), {}, PositionScheme::None()});
    for (const bool pre : {false, true}) {
      posenc_scheme s = typed(POSENC_SCHEME_ROPE);
      s.rope = &rope_c;
      s.rope_keys = pre ? POSENC_ROPE_KEYS_PRE_ROTATED : POSENC_ROPE_KEYS_ROTATE;
      const FlashRopeKeys keys = pre ? FlashRopeKeys::kPreRotated : FlashRopeKeys::kRotate;
      cases.push_back({pre ? "rope pre_rotated" : "rope", s, {}, RopeScheme(rp), keys});
      cases.push_back({pre ? "named rope pre_rotated" : "named rope",
                       named("rope"),
                       {Num("theta", 100.0), Txt("pairing", "interleaved"),
                        Txt("rope_keys", pre ? "pre_rotated" : "rotate")},
                       RopeScheme(rp),
                       keys});
    }
    posenc_scheme alibi = typed(POSENC_SCHEME_ALIBI);
    alibi.alibi_slopes = slopes.data();
    alibi.num_alibi_slopes = h;
    cases.push_back({"alibi", alibi, {}, AlibiScheme(slopes)});
    posenc_scheme t5s = typed(POSENC_SCHEME_T5);
    t5s.t5_table = &t5_c;
    t5s.t5_max_distance = 128;
    t5s.t5_direction = POSENC_T5_BIDIRECTIONAL;
    cases.push_back({"t5", t5s, {}, T5Scheme(t5)});
    cases.push_back({"named shaw",
                     named("shaw"),
                     {Num("clip", 2), Ten("a_key", CTensor(a_key.data(), POSENC_FLOAT32, {5, d})),
                      Ten("a_value", CTensor(a_value.data(), POSENC_FLOAT32, {5, d}))},
                     ShawScheme(ShawParams{2, d}, View(a_key, {5, d}), View(a_value, {5, d}))});
    cases.push_back({"named fire",
                     named("fire"),
                     {Ten("w1", CTensor(fire.w1.data(), POSENC_FLOAT64, {6})),
                      Ten("b1", CTensor(fire.b1.data(), POSENC_FLOAT64, {6})),
                      Ten("w2", CTensor(fire.w2.data(), POSENC_FLOAT64, {h, 6})),
                      Ten("b2", CTensor(fire.b2.data(), POSENC_FLOAT64, {h})),
                      Ten("c", CTensor(&fire.c, POSENC_FLOAT64, {1})),
                      Ten("threshold", CTensor(&fire.threshold, POSENC_FLOAT64, {1}))},
                     FireScheme(fire.View())});
    for (Case& c : cases) {
      c.scheme.args = c.args.data();
      c.scheme.num_args = static_cast<int64_t>(c.args.size());
    }
  }
};

TEST(CApiAttention, PrefillEverySchemeMatchesCpp) {
  Fixture f;
  const int64_t b = 1, sq = 5, sk = 7, h = Fixture::h, hkv = 2, d = Fixture::d;
  const std::vector<float> q = Ramp(b * sq * h * d), k = Ramp(b * sk * hkv * d, -0.02f),
                           v = Ramp(b * sk * hkv * d, 0.03f);
  const posenc_tensor qt = CTensor(q.data(), POSENC_FLOAT32, {b, sq, h, d});
  const posenc_tensor kt = CTensor(k.data(), POSENC_FLOAT32, {b, sk, hkv, d});
  const posenc_tensor vt = CTensor(v.data(), POSENC_FLOAT32, {b, sk, hkv, d});
  posenc_context* ctx = nullptr;
  ASSERT_EQ(posenc_context_create(2, POSENC_BACKEND_AUTO, &ctx), POSENC_OK);
  const std::vector<int64_t> query_ids = {6, 2, 5, 6, 4};
  posenc_positions query_pos, key_pos;
  ASSERT_EQ(posenc_positions_ids(query_ids.data(), sq, &query_pos), POSENC_OK);
  ASSERT_EQ(posenc_positions_offset(0, &key_pos), POSENC_OK);
  for (const Fixture::Case& c : f.cases) {
    for (const bool explicit_pos : {false, true}) {
      SCOPED_TRACE(c.label + (explicit_pos ? " with explicit positions" : ""));
      std::vector<float> out(b * sq * h * d), out_cpp(out.size());
      const posenc_tensor ot = CTensor(out.data(), POSENC_FLOAT32, {b, sq, h, d});
      posenc_attention_params p;
      posenc_attention_params_init(&p);
      p.scheme = &c.scheme;
      p.query_tile = 2;
      p.key_tile = 3;
      if (explicit_pos) {
        p.query_positions = &query_pos;
        p.key_positions = &key_pos;
      }
      ASSERT_EQ(posenc_flash_attention(ctx, &p, &qt, &kt, &vt, &ot), POSENC_OK)
          << posenc_last_error();
      AttentionParams ap;
      ap.scheme = c.cpp;
      if (explicit_pos) {
        ap.query_positions = Positions::Ids(query_ids.data(), sq);
        ap.key_positions = Positions::Offset(0);
      }
      FlashAttentionOptions o;
      o.query_tile = 2;
      o.key_tile = 3;
      o.rope_keys = c.rope_keys;
      FlashAttention(ap, View(q, {b, sq, h, d}), View(k, {b, sk, hkv, d}), View(v, {b, sk, hkv, d}),
                     View(out_cpp, {b, sq, h, d}), o, Context(2));
      EXPECT_EQ(out, out_cpp);
    }
  }
  // Varlen: two sequences, ALiBi by max_bias.
  std::vector<float> out(sq * h * d), out_cpp(out.size());
  const std::vector<int64_t> cu_q = {0, 2, 5}, cu_k = {0, 3, 7};
  const posenc_scheme_arg mb = Num("max_bias", 4.0);
  posenc_scheme alibi;
  posenc_scheme_init(&alibi);
  alibi.kind = POSENC_SCHEME_NAMED;
  alibi.name = "alibi";
  alibi.args = &mb;
  alibi.num_args = 1;
  posenc_attention_params p;
  posenc_attention_params_init(&p);
  p.scheme = &alibi;
  const posenc_tensor q3 = CTensor(q.data(), POSENC_FLOAT32, {sq, h, d});
  const posenc_tensor k3 = CTensor(k.data(), POSENC_FLOAT32, {sk, hkv, d});
  const posenc_tensor v3 = CTensor(v.data(), POSENC_FLOAT32, {sk, hkv, d});
  const posenc_tensor o3 = CTensor(out.data(), POSENC_FLOAT32, {sq, h, d});
  ASSERT_EQ(posenc_flash_attention_varlen(ctx, &p, &q3, &k3, &v3, &o3, cu_q.data(), cu_k.data(), 2),
            POSENC_OK)
      << posenc_last_error();
  AttentionParams ap;
  AlibiParams alp;
  alp.num_heads = h;
  alp.max_bias = 4.0;
  ap.scheme = AlibiScheme(AlibiSlopes(alp));
  FlashAttentionVarlen(ap, View(q, {sq, h, d}), View(k, {sk, hkv, d}), View(v, {sk, hkv, d}),
                       View(out_cpp, {sq, h, d}), cu_q, cu_k, FlashAttentionOptions{}, Context(2));
  EXPECT_EQ(out, out_cpp);
  posenc_context_destroy(ctx);
}

// precision = BFLOAT16 on bfloat16 inputs: the same bits as the C++ call
// with FlashPrecision::kBFloat16 (prefill and decode); float32 inputs or an
// unknown value are refused naming "precision".
TEST(CApiAttention, BFloat16PrecisionMatchesCppAndChecksInputs) {
  Fixture f;
  const int64_t b = 1, sq = 5, sk = 37, h = Fixture::h, hkv = 2, d = Fixture::d;
  const auto bf16 = [](const std::vector<float>& x) {
    std::vector<BFloat16> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = FloatToBF16(x[i]);
    return out;
  };
  const std::vector<float> q32 = Ramp(b * sq * h * d), k32 = Ramp(b * sk * hkv * d, -0.02f),
                           v32 = Ramp(b * sk * hkv * d, 0.03f);
  const std::vector<BFloat16> q = bf16(q32), k = bf16(k32), v = bf16(v32);
  const posenc_tensor qt = CTensor(q.data(), POSENC_BFLOAT16, {b, sq, h, d});
  const posenc_tensor kt = CTensor(k.data(), POSENC_BFLOAT16, {b, sk, hkv, d});
  const posenc_tensor vt = CTensor(v.data(), POSENC_BFLOAT16, {b, sk, hkv, d});
  const auto view = [](const void* data, DType dtype, std::initializer_list<std::int64_t> shape) {
    return TensorView::Contiguous(const_cast<void*>(data), dtype, shape);
  };
  for (const Fixture::Case& c : f.cases) {
    SCOPED_TRACE(c.label);
    std::vector<float> out(b * sq * h * d), out_cpp(out.size()), dec(out.size()),
        dec_cpp(out.size());
    const posenc_tensor ot = CTensor(out.data(), POSENC_FLOAT32, {b, sq, h, d});
    const posenc_tensor dt = CTensor(dec.data(), POSENC_FLOAT32, {b, sq, h, d});
    posenc_attention_params p;
    posenc_attention_params_init(&p);
    EXPECT_EQ(p.precision, POSENC_PRECISION_FLOAT32);
    p.scheme = &c.scheme;
    p.precision = POSENC_PRECISION_BFLOAT16;
    ASSERT_EQ(posenc_flash_attention(nullptr, &p, &qt, &kt, &vt, &ot), POSENC_OK)
        << posenc_last_error();
    ASSERT_EQ(posenc_attention_decode(nullptr, &p, &qt, &kt, &vt, &dt, nullptr), POSENC_OK)
        << posenc_last_error();
    AttentionParams ap;
    ap.scheme = c.cpp;
    FlashAttentionOptions o;
    o.rope_keys = c.rope_keys;
    o.precision = FlashPrecision::kBFloat16;
    const TensorView qv = view(q.data(), DType::kBFloat16, {b, sq, h, d});
    const TensorView kv = view(k.data(), DType::kBFloat16, {b, sk, hkv, d});
    const TensorView vv = view(v.data(), DType::kBFloat16, {b, sk, hkv, d});
    FlashAttention(ap, qv, kv, vv, View(out_cpp, {b, sq, h, d}), o);
    FlashAttentionDecode(ap, qv, kv, vv, View(dec_cpp, {b, sq, h, d}), TensorView{}, o);
    EXPECT_EQ(out, out_cpp);
    EXPECT_EQ(dec, dec_cpp);
    // The option takes effect: float32 precision gives other bits.
    p.precision = POSENC_PRECISION_FLOAT32;
    std::vector<float> f32(out.size());
    const posenc_tensor ft = CTensor(f32.data(), POSENC_FLOAT32, {b, sq, h, d});
    ASSERT_EQ(posenc_flash_attention(nullptr, &p, &qt, &kt, &vt, &ft), POSENC_OK);
    EXPECT_NE(f32, out);
  }
  std::vector<float> x32 = Ramp(b * sk * hkv * d), out(b * sq * h * d);
  const posenc_tensor x = CTensor(x32.data(), POSENC_FLOAT32, {b, sk, hkv, d});
  const posenc_tensor ot = CTensor(out.data(), POSENC_FLOAT32, {b, sq, h, d});
  posenc_attention_params p;
  posenc_attention_params_init(&p);
  p.precision = POSENC_PRECISION_BFLOAT16;
  ExpectStatus(posenc_flash_attention(nullptr, &p, &qt, &x, &vt, &ot),
               POSENC_ERROR_INVALID_ARGUMENT,
               {"precision: got bfloat16", "for k of dtype float32", "float32, bfloat16"});
  p.precision = 2;
  ExpectStatus(posenc_flash_attention(nullptr, &p, &qt, &kt, &vt, &ot),
               POSENC_ERROR_INVALID_ARGUMENT, {"precision: got 2", "POSENC_PRECISION_BFLOAT16"});
}

// Decode against a cache of capacity 300 holding sk keys (a strided view),
// GQA 4/2, one and three new tokens, 2 threads: bit-identical to
// posenc::FlashAttentionDecode on the same views, lse included.
TEST(CApiAttention, DecodeEverySchemeMatchesCpp) {
  Fixture f;
  const int64_t b = 2, h = Fixture::h, hkv = 2, d = Fixture::d, cap = 300;
  const std::vector<float> kc = Ramp(b * cap * hkv * d, -0.002f),
                           vc = Ramp(b * cap * hkv * d, 0.003f);
  posenc_context* ctx = nullptr;
  ASSERT_EQ(posenc_context_create(2, POSENC_BACKEND_AUTO, &ctx), POSENC_OK);
  for (const int64_t sq : {1, 3}) {
    for (const int64_t sk : {1, 37, 290}) {
      if (sk < sq) continue;
      const std::vector<float> q = Ramp(b * sq * h * d, 0.02f);
      const int64_t shape_k[4] = {b, sk, hkv, d};
      const int64_t strides_k[4] = {cap * hkv * d, hkv * d, d, 1};
      posenc_tensor kt, vt;
      ASSERT_EQ(posenc_tensor_strided(const_cast<float*>(kc.data()), POSENC_FLOAT32, 4, shape_k,
                                      strides_k, &kt),
                POSENC_OK);
      ASSERT_EQ(posenc_tensor_strided(const_cast<float*>(vc.data()), POSENC_FLOAT32, 4, shape_k,
                                      strides_k, &vt),
                POSENC_OK);
      TensorView kv = View(kc, {b, cap, hkv, d}), vv = View(vc, {b, cap, hkv, d});
      kv.shape[1] = vv.shape[1] = sk;
      const posenc_tensor qt = CTensor(q.data(), POSENC_FLOAT32, {b, sq, h, d});
      for (const Fixture::Case& c : f.cases) {
        SCOPED_TRACE(c.label + " sq " + std::to_string(sq) + " sk " + std::to_string(sk));
        std::vector<float> out(b * sq * h * d), out_cpp(out.size()), lse(b * h * sq),
            lse_cpp(lse.size());
        const posenc_tensor ot = CTensor(out.data(), POSENC_FLOAT32, {b, sq, h, d});
        const posenc_tensor lt = CTensor(lse.data(), POSENC_FLOAT32, {b, h, sq});
        posenc_attention_params p;
        posenc_attention_params_init(&p);
        p.scheme = &c.scheme;
        ASSERT_EQ(posenc_attention_decode(ctx, &p, &qt, &kt, &vt, &ot, &lt), POSENC_OK)
            << posenc_last_error();
        AttentionParams ap;
        ap.scheme = c.cpp;
        FlashAttentionOptions o;
        o.rope_keys = c.rope_keys;
        FlashAttentionDecode(ap, View(q, {b, sq, h, d}), kv, vv, View(out_cpp, {b, sq, h, d}),
                             View(lse_cpp, {b, h, sq}), o, Context(2));
        EXPECT_EQ(out, out_cpp);
        EXPECT_EQ(lse, lse_cpp);
        EXPECT_TRUE(std::isfinite(out[0]));
        // The same step through a plan prepared once: identical results.
        posenc_decode_plan* plan = nullptr;
        ASSERT_EQ(posenc_decode_plan_create(&p, h, d, d, &plan), POSENC_OK) << posenc_last_error();
        std::vector<float> out_plan(out.size()), lse_plan(lse.size());
        const posenc_tensor opt = CTensor(out_plan.data(), POSENC_FLOAT32, {b, sq, h, d});
        const posenc_tensor lpt = CTensor(lse_plan.data(), POSENC_FLOAT32, {b, h, sq});
        ASSERT_EQ(posenc_decode_plan_run(ctx, plan, &qt, &kt, &vt, &opt, &lpt, nullptr, nullptr),
                  POSENC_OK)
            << posenc_last_error();
        EXPECT_EQ(out_plan, out_cpp);
        EXPECT_EQ(lse_plan, lse_cpp);
        posenc_decode_plan_destroy(plan);
      }
    }
  }
  posenc_context_destroy(ctx);
}

// A plan copies what it needs when it is made: overwriting the scheme's
// params, slopes and tables afterwards (with NaN) changes nothing; explicit
// positions per run; and its errors.
TEST(CApiAttention, DecodePlanOwnsItsSchemeAndChecksShapes) {
  Fixture f;
  const int64_t b = 1, h = Fixture::h, hkv = 2, d = Fixture::d, sk = 41;
  const std::vector<float> q = Ramp(b * h * d, 0.02f), k = Ramp(b * sk * hkv * d, -0.002f),
                           v = Ramp(b * sk * hkv * d, 0.003f);
  const posenc_tensor qt = CTensor(q.data(), POSENC_FLOAT32, {b, 1, h, d});
  const posenc_tensor kt = CTensor(k.data(), POSENC_FLOAT32, {b, sk, hkv, d});
  const posenc_tensor vt = CTensor(v.data(), POSENC_FLOAT32, {b, sk, hkv, d});
  std::vector<posenc_decode_plan*> plans;
  std::vector<std::vector<float>> before;
  for (const Fixture::Case& c : f.cases) {
    posenc_attention_params p;
    posenc_attention_params_init(&p);
    p.scheme = &c.scheme;
    posenc_decode_plan* plan = nullptr;
    ASSERT_EQ(posenc_decode_plan_create(&p, h, d, d, &plan), POSENC_OK) << posenc_last_error();
    plans.push_back(plan);
    std::vector<float> out(b * h * d);
    const posenc_tensor ot = CTensor(out.data(), POSENC_FLOAT32, {b, 1, h, d});
    ASSERT_EQ(posenc_decode_plan_run(nullptr, plan, &qt, &kt, &vt, &ot, nullptr, nullptr, nullptr),
              POSENC_OK);
    before.push_back(out);
  }
  const float nan = std::nanf("");
  std::fill(f.t5_table.begin(), f.t5_table.end(), nan);
  std::fill(f.a_key.begin(), f.a_key.end(), nan);
  std::fill(f.a_value.begin(), f.a_value.end(), nan);
  std::fill(f.slopes.begin(), f.slopes.end(), std::nan(""));
  std::fill(f.fire.w1.begin(), f.fire.w1.end(), std::nan(""));
  f.rope_c.theta = 2.0;
  f.rope_c.pairing = POSENC_PAIRING_HALF_SPLIT;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    SCOPED_TRACE(f.cases[i].label);
    std::vector<float> out(b * h * d);
    const posenc_tensor ot = CTensor(out.data(), POSENC_FLOAT32, {b, 1, h, d});
    // Explicit positions equal to the defaults: query at Sk - 1, keys at j.
    posenc_positions qp, kp;
    ASSERT_EQ(posenc_positions_offset(sk - 1, &qp), POSENC_OK);
    ASSERT_EQ(posenc_positions_offset(0, &kp), POSENC_OK);
    ASSERT_EQ(posenc_decode_plan_run(nullptr, plans[i], &qt, &kt, &vt, &ot, nullptr, &qp, &kp),
              POSENC_OK)
        << posenc_last_error();
    EXPECT_EQ(out, before[i]);
  }
  // A run whose shapes differ from the plan's; bad plan arguments.
  const std::vector<float> q2 = Ramp(b * 2 * d);
  const posenc_tensor q2t = CTensor(q2.data(), POSENC_FLOAT32, {b, 1, 2, d});
  std::vector<float> out2(b * 2 * d);
  const posenc_tensor o2t = CTensor(out2.data(), POSENC_FLOAT32, {b, 1, 2, d});
  ExpectStatus(
      posenc_decode_plan_run(nullptr, plans[0], &q2t, &kt, &vt, &o2t, nullptr, nullptr, nullptr),
      POSENC_ERROR_INVALID_ARGUMENT, {"q heads: got 2", "the plan's heads (4)"});
  ExpectStatus(
      posenc_decode_plan_run(nullptr, nullptr, &qt, &kt, &vt, &o2t, nullptr, nullptr, nullptr),
      POSENC_ERROR_INVALID_ARGUMENT, {"plan: got NULL"});
  for (posenc_decode_plan* plan : plans) posenc_decode_plan_destroy(plan);
  posenc_decode_plan_destroy(nullptr);
  posenc_attention_params p;
  posenc_attention_params_init(&p);
  posenc_decode_plan* plan = nullptr;
  ExpectStatus(posenc_decode_plan_create(&p, 0, d, d, &plan), POSENC_ERROR_INVALID_ARGUMENT,
               {"heads: got 0", "[1, 65536]"});
  EXPECT_EQ(plan, nullptr);
  ExpectStatus(posenc_decode_plan_create(&p, h, d, d, nullptr), POSENC_ERROR_INVALID_ARGUMENT,
               {"out: got NULL"});
  posenc_scheme s;
  posenc_scheme_init(&s);
  s.kind = POSENC_SCHEME_ROPE;
  s.rope = &f.rope_c;
  p.scheme = &s;  // rope_keys left unset
  ExpectStatus(posenc_decode_plan_create(&p, h, d, d, &plan), POSENC_ERROR_INVALID_ARGUMENT,
               {"rope_keys"});
}

// posenc_attention_decode reuses the plan its thread made for the same
// params: the key is the params' contents, not their addresses. Changing a
// slope, a T5 entry or RoPE's theta in place between calls (the same
// pointers) gives the new scheme's result, as a fresh C++ call does; six
// schemes in turn (more than the cache's four slots) each stay right.
TEST(CApiAttention, DecodeWithoutPlanFollowsSchemeContents) {
  Fixture f;
  const int64_t b = 1, h = Fixture::h, hkv = 2, d = Fixture::d, sk = 77;
  const std::vector<float> q = Ramp(b * h * d, 0.02f), k = Ramp(b * sk * hkv * d, -0.002f),
                           v = Ramp(b * sk * hkv * d, 0.003f);
  const posenc_tensor qt = CTensor(q.data(), POSENC_FLOAT32, {b, 1, h, d});
  const posenc_tensor kt = CTensor(k.data(), POSENC_FLOAT32, {b, sk, hkv, d});
  const posenc_tensor vt = CTensor(v.data(), POSENC_FLOAT32, {b, sk, hkv, d});
  const auto run = [&](const Fixture::Case& c) {
    std::vector<float> out(b * h * d), out_cpp(out.size());
    const posenc_tensor ot = CTensor(out.data(), POSENC_FLOAT32, {b, 1, h, d});
    posenc_attention_params p;
    posenc_attention_params_init(&p);
    p.scheme = &c.scheme;
    EXPECT_EQ(posenc_attention_decode(nullptr, &p, &qt, &kt, &vt, &ot, nullptr), POSENC_OK)
        << posenc_last_error();
    AttentionParams ap;
    ap.scheme = c.cpp;
    FlashAttentionOptions o;
    o.rope_keys = c.rope_keys;
    FlashAttentionDecode(ap, View(q, {b, 1, h, d}), View(k, {b, sk, hkv, d}),
                         View(v, {b, sk, hkv, d}), View(out_cpp, {b, 1, h, d}), TensorView{}, o);
    EXPECT_EQ(out, out_cpp) << c.label;
    return out;
  };
  for (int round = 0; round < 2; ++round) {
    for (const Fixture::Case& c : f.cases) run(c);
  }
  const auto find = [&](const std::string& label) -> Fixture::Case& {
    for (Fixture::Case& c : f.cases) {
      if (c.label.rfind(label, 0) == 0) return c;
    }
    ADD_FAILURE() << label;
    return f.cases[0];
  };
  // In place: the C scheme and the C++ one read the same buffers, except
  // the copies the C++ schemes took (slopes, RoPE params): rebuilt here.
  Fixture::Case& alibi = find("alibi");
  const std::vector<float> alibi_before = run(alibi);
  f.slopes[1] *= 3.0;
  alibi.cpp = AlibiScheme(f.slopes);
  EXPECT_NE(run(alibi), alibi_before);
  Fixture::Case& t5 = find("t5");
  const std::vector<float> t5_before = run(t5);
  f.t5_table[5] += 2.0f;
  std::copy(f.t5_table.begin(), f.t5_table.end(), f.t5.data());
  EXPECT_NE(run(t5), t5_before);
  Fixture::Case& rope = find("rope");
  const std::vector<float> rope_before = run(rope);
  f.rope_c.theta = 1000.0;
  RopeParams rp = f.rp;
  rp.theta = 1000.0;
  rope.cpp = RopeScheme(rp);
  EXPECT_NE(run(rope), rope_before);
}

// A paged cache through C: the same bits as the C++ call, and its errors.
TEST(CApiAttention, DecodePagedMatchesCppAndChecksTables) {
  Fixture f;
  const int64_t b = 2, h = Fixture::h, hkv = 2, d = Fixture::d, ps = 16, pages = 9, max_pages = 4;
  const std::vector<float> kp = Ramp(pages * ps * hkv * d, -0.002f),
                           vp = Ramp(pages * ps * hkv * d, 0.003f), q = Ramp(b * h * d, 0.02f);
  std::vector<int32_t> table = {3, 0, 7, 5, 8, 1, 2, -1}, lens = {61, 40};
  posenc_kv_pages cache;
  posenc_kv_pages_init(&cache);
  cache.k_pages = CTensor(kp.data(), POSENC_FLOAT32, {pages, ps, hkv, d});
  cache.v_pages = CTensor(vp.data(), POSENC_FLOAT32, {pages, ps, hkv, d});
  cache.block_table = table.data();
  cache.max_pages = max_pages;
  cache.seq_lens = lens.data();
  PagedKVCache cpp;
  cpp.k_pages = View(kp, {pages, ps, hkv, d});
  cpp.v_pages = View(vp, {pages, ps, hkv, d});
  cpp.block_table = table.data();
  cpp.max_pages = max_pages;
  cpp.seq_lens = lens.data();
  const posenc_tensor qt = CTensor(q.data(), POSENC_FLOAT32, {b, 1, h, d});
  std::vector<float> out(b * h * d), out_cpp(out.size()), lse(b * h), lse_cpp(lse.size());
  const posenc_tensor ot = CTensor(out.data(), POSENC_FLOAT32, {b, 1, h, d});
  const posenc_tensor lt = CTensor(lse.data(), POSENC_FLOAT32, {b, h, 1});
  for (const Fixture::Case& c : f.cases) {
    SCOPED_TRACE(c.label);
    posenc_attention_params p;
    posenc_attention_params_init(&p);
    p.scheme = &c.scheme;
    posenc_decode_plan* plan = nullptr;
    ASSERT_EQ(posenc_decode_plan_create(&p, h, d, d, &plan), POSENC_OK) << posenc_last_error();
    ASSERT_EQ(posenc_decode_plan_run_paged(nullptr, plan, &qt, &cache, &ot, &lt, nullptr, nullptr),
              POSENC_OK)
        << posenc_last_error();
    AttentionParams ap;
    ap.scheme = c.cpp;
    FlashAttentionOptions o;
    o.rope_keys = c.rope_keys;
    FlashAttentionDecodePaged(PreparedDecode(ap, h, d, d, o), View(q, {b, 1, h, d}), cpp,
                              View(out_cpp, {b, 1, h, d}), View(lse_cpp, {b, h, 1}), std::nullopt,
                              std::nullopt);
    EXPECT_EQ(out, out_cpp);
    EXPECT_EQ(lse, lse_cpp);
    posenc_decode_plan_destroy(plan);
  }
  posenc_attention_params p;
  posenc_attention_params_init(&p);
  posenc_decode_plan* plan = nullptr;
  ASSERT_EQ(posenc_decode_plan_create(&p, h, d, d, &plan), POSENC_OK);
  table[5] = 9;  // row 1's second page
  ExpectStatus(
      posenc_decode_plan_run_paged(nullptr, plan, &qt, &cache, &ot, nullptr, nullptr, nullptr),
      POSENC_ERROR_INVALID_ARGUMENT, {"cache.block_table[1][1]: got 9", "[0, 9)"});
  table[5] = 1;
  lens[0] = 65;
  ExpectStatus(
      posenc_decode_plan_run_paged(nullptr, plan, &qt, &cache, &ot, nullptr, nullptr, nullptr),
      POSENC_ERROR_INVALID_ARGUMENT, {"cache.seq_lens[0]: got 65", "[1, 64]"});
  lens[0] = 61;
  posenc_kv_pages raw = cache;
  raw.struct_size = 0;
  ExpectStatus(
      posenc_decode_plan_run_paged(nullptr, plan, &qt, &raw, &ot, nullptr, nullptr, nullptr),
      POSENC_ERROR_INVALID_ARGUMENT, {"cache.struct_size", "posenc_kv_pages_init"});
  ExpectStatus(
      posenc_decode_plan_run_paged(nullptr, plan, &qt, nullptr, &ot, nullptr, nullptr, nullptr),
      POSENC_ERROR_INVALID_ARGUMENT, {"cache: got NULL"});
  EXPECT_EQ(
      posenc_decode_plan_run_paged(nullptr, plan, &qt, &cache, &ot, nullptr, nullptr, nullptr),
      POSENC_OK);
  EXPECT_STREQ(posenc_last_error(), "");
  posenc_decode_plan_destroy(plan);
}

// Shift of a RoPE cache and RoPE through a cos/sin cache, against C++.
TEST(CApiAttention, CacheRopeEntryPointsMatchCpp) {
  const int64_t s = 6, hkv = 2, d = 16;
  posenc_rope_params pc;
  posenc_rope_params_init(&pc);
  pc.head_dim = d;
  pc.pairing = POSENC_PAIRING_HALF_SPLIT;
  RopeParams rp;
  rp.head_dim = d;
  std::vector<float> k = Ramp(s * hkv * d), k_cpp = k;
  const posenc_tensor kt = CTensor(k.data(), POSENC_FLOAT32, {1, s, hkv, d});
  ASSERT_EQ(posenc_rope_shift_keys(nullptr, &pc, &kt, POSENC_LAYOUT_BSHD, -3), POSENC_OK)
      << posenc_last_error();
  ShiftRopeKeys(rp, View(k_cpp, {1, s, hkv, d}), AttentionLayout::kBSHD, -3);
  EXPECT_EQ(k, k_cpp);
  // The cos/sin cache for 64 positions, then x rotated at ids through it.
  std::vector<float> cache(64 * d), cache_cpp(cache.size());
  const posenc_tensor ct = CTensor(cache.data(), POSENC_FLOAT32, {64, d});
  ASSERT_EQ(posenc_rope_cos_sin_cache(nullptr, &pc, &ct), POSENC_OK) << posenc_last_error();
  RopeCosSinCache(rp, View(cache_cpp, {64, d}));
  EXPECT_EQ(cache, cache_cpp);
  const std::vector<float> x = Ramp(s * hkv * d, 0.05f);
  std::vector<float> out(x.size()), out_cpp(x.size());
  const std::vector<int64_t> ids = {0, 5, 63, 7, 7, 1};
  posenc_positions pos;
  ASSERT_EQ(posenc_positions_ids(ids.data(), s, &pos), POSENC_OK);
  const posenc_tensor xt = CTensor(x.data(), POSENC_FLOAT32, {1, s, hkv, d});
  const posenc_tensor ot = CTensor(out.data(), POSENC_FLOAT32, {1, s, hkv, d});
  ASSERT_EQ(posenc_rope_apply_with_cache(nullptr, &pc, &xt, POSENC_LAYOUT_BSHD, &pos, &ct,
                                         POSENC_DIRECTION_FORWARD, &ot),
            POSENC_OK)
      << posenc_last_error();
  const TensorView ov = View(out_cpp, {1, s, hkv, d});
  ApplyRopeWithCache(rp, View(x, {1, s, hkv, d}), AttentionLayout::kBSHD,
                     Positions::Ids(ids.data(), s), View(cache_cpp, {64, d}),
                     RopeDirection::kForward, &ov);
  EXPECT_EQ(out, out_cpp);
  // A position past the cache is an error naming it, and nothing is written.
  const std::vector<int64_t> far = {0, 1, 2, 3, 4, 64};
  posenc_positions far_pos;
  ASSERT_EQ(posenc_positions_ids(far.data(), s, &far_pos), POSENC_OK);
  ExpectStatus(posenc_rope_apply_with_cache(nullptr, &pc, &xt, POSENC_LAYOUT_BSHD, &far_pos, &ct,
                                            POSENC_DIRECTION_FORWARD, &ot),
               POSENC_ERROR_INVALID_ARGUMENT, {"64"});
  ExpectStatus(posenc_rope_shift_keys(nullptr, &pc, &kt, POSENC_LAYOUT_BSHD, int64_t{1} << 40),
               POSENC_ERROR_INVALID_ARGUMENT, {"delta"});
}

// Every missing or wrong scheme setting: a status and a message naming it.
TEST(CApiAttention, SchemeSettingsAreRequired) {
  Fixture f;
  const int64_t h = Fixture::h, d = Fixture::d;
  const std::vector<float> q = Ramp(h * d), k = Ramp(3 * h * d), v = Ramp(3 * h * d);
  std::vector<float> out(h * d);
  const posenc_tensor qt = CTensor(q.data(), POSENC_FLOAT32, {1, 1, h, d});
  const posenc_tensor kt = CTensor(k.data(), POSENC_FLOAT32, {1, 3, h, d});
  const posenc_tensor vt = CTensor(v.data(), POSENC_FLOAT32, {1, 3, h, d});
  const posenc_tensor ot = CTensor(out.data(), POSENC_FLOAT32, {1, 1, h, d});
  posenc_attention_params p;
  posenc_attention_params_init(&p);
  const auto expect = [&](const posenc_scheme& s, const std::vector<std::string>& needles) {
    p.scheme = &s;
    ExpectStatus(posenc_attention_decode(nullptr, &p, &qt, &kt, &vt, &ot, nullptr),
                 POSENC_ERROR_INVALID_ARGUMENT, needles);
    ExpectStatus(posenc_flash_attention(nullptr, &p, &qt, &kt, &vt, &ot),
                 POSENC_ERROR_INVALID_ARGUMENT, needles);
  };
  posenc_scheme s;
  posenc_scheme_init(&s);
  s.kind = POSENC_SCHEME_ROPE;
  expect(s, {"scheme.rope: got NULL"});
  s.rope = &f.rope_c;
  expect(s, {"scheme.rope_keys: got -1", "POSENC_ROPE_KEYS_PRE_ROTATED"});
  posenc_rope_params unpaired;
  posenc_rope_params_init(&unpaired);
  unpaired.head_dim = d;
  s.rope = &unpaired;
  s.rope_keys = POSENC_ROPE_KEYS_PRE_ROTATED;
  expect(s, {"pairing"});
  posenc_scheme_init(&s);
  s.kind = POSENC_SCHEME_T5;
  s.t5_table = &f.t5_c;
  s.t5_max_distance = 128;
  expect(s, {"scheme.t5_direction: got -1", "POSENC_T5_CAUSAL"});
  s.t5_direction = POSENC_T5_CAUSAL;
  s.t5_max_distance = 0;
  expect(s, {"scheme.t5_max_distance: got 0"});
  posenc_scheme_init(&s);
  s.kind = POSENC_SCHEME_ALIBI;
  s.alibi_slopes = f.slopes.data();
  s.num_alibi_slopes = 0;
  expect(s, {"scheme.num_alibi_slopes: got 0"});
  s.num_alibi_slopes = 3;  // H = 4 query heads
  expect(s, {"3"});
  posenc_scheme_init(&s);
  s.kind = 9;
  expect(s, {"scheme.kind: got 9", "POSENC_SCHEME_NAMED (4)"});
  s.kind = POSENC_SCHEME_NAMED;
  expect(s, {"scheme.name: got NULL"});
  s.name = "sinusoidal";
  expect(s, {"scheme.name: got sinusoidal"});
  s.name = "rope";
  const std::vector<posenc_scheme_arg> no_pairing = {Txt("rope_keys", "rotate")};
  s.args = no_pairing.data();
  s.num_args = 1;
  expect(s, {"scheme.args: got no pairing", "interleaved"});
  const std::vector<posenc_scheme_arg> no_keys = {Txt("pairing", "half_split")};
  s.args = no_keys.data();
  expect(s, {"scheme.args: got no rope_keys", "pre_rotated"});
  const std::vector<posenc_scheme_arg> typo = {Num("thetta", 1.0)};
  s.args = typo.data();
  expect(s, {"scheme.args[0].name: got thetta", "rope arguments: head_dim, rotary_dim, theta"});
  posenc_scheme_arg raw{};  // not initialised: struct_size 0
  raw.name = "theta";
  s.args = &raw;
  expect(s, {"scheme.args[0].struct_size: got 0"});
  s.name = "t5";
  s.num_args = 0;
  expect(s, {"scheme.t5.table: got nothing"});
  posenc_scheme zero{};
  expect(zero, {"scheme.struct_size: got 0"});
  // Decode takes 1..16 new tokens; the struct of the params is checked too.
  p.scheme = nullptr;
  std::vector<float> q17(17 * h * d), o17(q17.size());
  const posenc_tensor q17t = CTensor(q17.data(), POSENC_FLOAT32, {1, 17, h, d});
  const posenc_tensor o17t = CTensor(o17.data(), POSENC_FLOAT32, {1, 17, h, d});
  std::vector<float> k20(20 * h * d);
  const posenc_tensor k20t = CTensor(k20.data(), POSENC_FLOAT32, {1, 20, h, d});
  ExpectStatus(posenc_attention_decode(nullptr, &p, &q17t, &k20t, &k20t, &o17t, nullptr),
               POSENC_ERROR_INVALID_ARGUMENT, {"q.shape[seq]: got 17", "1 to 16"});
  p.struct_size = 8;
  ExpectStatus(posenc_attention_decode(nullptr, &p, &qt, &kt, &vt, &ot, nullptr),
               POSENC_ERROR_INVALID_ARGUMENT, {"params.struct_size: got 8"});
}

}  // namespace
}  // namespace posenc
