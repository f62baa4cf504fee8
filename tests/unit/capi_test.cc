// The C API (include/posenc/c.h, src/capi/) against the C++ API it fronts:
// every entry point gives bit-identical results to the C++ call on the same
// inputs (RoPE in/out of place, ids/offset, both layouts, bf16, q+k, varlen,
// cos/sin, default frequencies, config + GGUF loading, sinusoidal, ALiBi,
// T5, fused attention with every scheme it passes by name), statuses and
// messages for bad input, the thread-local last error, and the exception
// barrier (bad_alloc, foreign exceptions).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "capi/c_api_internal.h"
#include "posenc/alibi.h"
#include "posenc/c.h"
#include "posenc/fire.h"
#include "posenc/flash_attention.h"
#include "posenc/model_config.h"
#include "posenc/rope.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5.h"
#include "posenc/version.h"
#include "test_util.h"

namespace posenc {
namespace {

std::vector<float> Ramp(std::size_t n, float scale = 0.01f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * 0.37f) + scale * i;
  return v;
}

posenc_tensor CTensor(void* data, posenc_dtype dtype, std::vector<int64_t> shape) {
  posenc_tensor t;
  EXPECT_EQ(
      posenc_tensor_contiguous(data, dtype, static_cast<int32_t>(shape.size()), shape.data(), &t),
      POSENC_OK);
  return t;
}

void ExpectStatus(posenc_status got, posenc_status want, const std::vector<std::string>& needles) {
  EXPECT_EQ(got, want) << posenc_last_error();
  for (const std::string& n : needles) {
    EXPECT_NE(std::string(posenc_last_error()).find(n), std::string::npos) << posenc_last_error();
  }
}

TEST(CApi, VersionAndStatusNames) {
  EXPECT_STREQ(posenc_version(), POSENC_VERSION_STRING);
  EXPECT_STREQ(posenc_status_name(POSENC_ERROR_CONFIG), "config");
  EXPECT_STREQ(posenc_status_name(static_cast<posenc_status>(42)), "unknown");
}

TEST(CApi, RopeApplyMatchesCpp) {
  const int64_t b = 2, s = 5, h = 3, d = 16;
  const std::vector<float> x = Ramp(static_cast<std::size_t>(b * s * h * d));
  const std::vector<int64_t> ids = {3, 1, 4, 1, 5};
  for (const auto layout : {POSENC_LAYOUT_BSHD, POSENC_LAYOUT_BHSD}) {
    for (const bool use_ids : {true, false}) {
      posenc_rope_params p;
      posenc_rope_params_init(&p);
      p.head_dim = d;
      p.rotary_dim = 8;
      p.theta = 500000.0;
      p.pairing = POSENC_PAIRING_INTERLEAVED;
      p.numerics = POSENC_NUMERICS_HF;
      posenc_positions pos{use_ids ? ids.data() : nullptr, use_ids ? s : 0, 7};
      std::vector<float> c_in = x, c_out(x.size()), cpp = x;
      const std::vector<int64_t> shape = layout == POSENC_LAYOUT_BSHD
                                             ? std::vector<int64_t>{b, s, h, d}
                                             : std::vector<int64_t>{b, h, s, d};
      const posenc_tensor in = CTensor(c_in.data(), POSENC_FLOAT32, shape);
      const posenc_tensor out = CTensor(c_out.data(), POSENC_FLOAT32, shape);
      ASSERT_EQ(posenc_rope_apply(nullptr, &p, &in, layout, &pos, POSENC_DIRECTION_FORWARD, &out),
                POSENC_OK)
          << posenc_last_error();
      RopeParams rp;
      rp.head_dim = d;
      rp.rotary_dim = 8;
      rp.theta = 500000.0;
      rp.pairing = RopePairing::kInterleaved;
      rp.numerics = RopeNumerics::kHF;
      const auto al = static_cast<AttentionLayout>(layout);
      const TensorView v = al == AttentionLayout::kBSHD
                               ? TensorView::Contiguous(cpp.data(), DType::kFloat32, {b, s, h, d})
                               : TensorView::Contiguous(cpp.data(), DType::kFloat32, {b, h, s, d});
      ApplyRope(rp, v, al, use_ids ? Positions::Ids(ids.data(), s) : Positions::Offset(7));
      EXPECT_EQ(c_out, cpp);
      EXPECT_EQ(c_in, x);  // out of place: input untouched
      ASSERT_EQ(
          posenc_rope_apply(nullptr, &p, &in, layout, &pos, POSENC_DIRECTION_FORWARD, nullptr),
          POSENC_OK);
      EXPECT_EQ(c_in, cpp);  // in place
      ASSERT_EQ(
          posenc_rope_apply(nullptr, &p, &in, layout, &pos, POSENC_DIRECTION_INVERSE, nullptr),
          POSENC_OK);
      for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(c_in[i], x[i], 1e-5) << i;
    }
  }
}

TEST(CApi, RopeQkBf16VarlenCosSinAndFrequenciesMatchCpp) {
  const int64_t s = 6, d = 8;
  std::vector<std::uint16_t> q(static_cast<std::size_t>(s * 2 * d)),
      k(static_cast<std::size_t>(s * d));
  const std::vector<float> src = Ramp(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = FloatToBF16(src[i]).bits;
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = FloatToBF16(-src[i]).bits;
  std::vector<std::uint16_t> q_cpp = q, k_cpp = k;
  posenc_rope_params p;
  posenc_rope_params_init(&p);
  p.head_dim = d;
  const posenc_positions pos{nullptr, 0, 100};
  const posenc_tensor qt = CTensor(q.data(), POSENC_BFLOAT16, {1, s, 2, d});
  const posenc_tensor kt = CTensor(k.data(), POSENC_BFLOAT16, {1, s, 1, d});
  ASSERT_EQ(posenc_rope_apply_qk(nullptr, &p, &qt, &kt, POSENC_LAYOUT_BSHD, &pos,
                                 POSENC_DIRECTION_FORWARD, nullptr, nullptr),
            POSENC_OK)
      << posenc_last_error();
  RopeParams rp;
  rp.head_dim = d;
  ApplyRopeQK(rp, TensorView::Contiguous(q_cpp.data(), DType::kBFloat16, {1, s, 2, d}),
              TensorView::Contiguous(k_cpp.data(), DType::kBFloat16, {1, s, 1, d}),
              AttentionLayout::kBSHD, Positions::Offset(100));
  EXPECT_EQ(q, q_cpp);
  EXPECT_EQ(k, k_cpp);

  std::vector<float> x = Ramp(static_cast<std::size_t>(7 * 2 * d)), x_cpp = x;
  const std::vector<int64_t> cu = {0, 3, 3, 7}, offsets = {5, 0, 9};
  const posenc_tensor xt = CTensor(x.data(), POSENC_FLOAT32, {7, 2, d});
  ASSERT_EQ(posenc_rope_apply_varlen(nullptr, &p, &xt, cu.data(), 3, offsets.data(),
                                     POSENC_DIRECTION_FORWARD, nullptr),
            POSENC_OK)
      << posenc_last_error();
  ApplyRopeVarlen(rp, TensorView::Contiguous(x_cpp.data(), DType::kFloat32, {7, 2, d}), cu.data(),
                  3, offsets.data());
  EXPECT_EQ(x, x_cpp);

  std::vector<double> cos(4 * d), sin(4 * d), cos_cpp(4 * d), sin_cpp(4 * d);
  const posenc_tensor ct = CTensor(cos.data(), POSENC_FLOAT64, {4, d}),
                      st = CTensor(sin.data(), POSENC_FLOAT64, {4, d});
  ASSERT_EQ(posenc_rope_cos_sin(nullptr, &p, &pos, 4, &ct, &st), POSENC_OK);
  RopeCosSin(rp, Positions::Offset(100), 4,
             TensorView::Contiguous(cos_cpp.data(), DType::kFloat64, {4, d}),
             TensorView::Contiguous(sin_cpp.data(), DType::kFloat64, {4, d}));
  EXPECT_EQ(cos, cos_cpp);
  EXPECT_EQ(sin, sin_cpp);

  std::vector<double> inv(4);
  ASSERT_EQ(posenc_rope_default_inv_freq(8, 10000.0, POSENC_NUMERICS_HF, inv.data(), 4), POSENC_OK);
  EXPECT_EQ(inv, RopeDefaultFrequencies(8, 10000.0, RopeNumerics::kHF).inv_freq);
  ExpectStatus(posenc_rope_default_inv_freq(8, 10000.0, POSENC_NUMERICS_HF, inv.data(), 3),
               POSENC_ERROR_INVALID_ARGUMENT, {"capacity: got 3", "at least rotary_dim/2 = 4"});
}

TEST(CApi, RopeFromConfigReadsJsonAndGguf) {
  for (const std::string rel : {"examples/configs/llama-3.1-8b.json",
                                "tests/golden/gguf/b_llama31_8b_llama3_rope_freqs.gguf"}) {
    SCOPED_TRACE(rel);
    const std::string path = test::SourcePath(rel);
    posenc_model_rope m;
    ASSERT_EQ(posenc_rope_from_config(path.c_str(), 0, nullptr, POSENC_NUMERICS_HF, &m, nullptr, 0),
              POSENC_OK)
        << posenc_last_error();
    EXPECT_EQ(m.params.inv_freq_count, 64);
    EXPECT_EQ(m.params.inv_freq, nullptr);
    std::vector<double> inv(64);
    ASSERT_EQ(posenc_rope_from_config(path.c_str(), 0, "", POSENC_NUMERICS_HF, &m, inv.data(), 64),
              POSENC_OK);
    const ModelConfig cfg = LoadModelConfig(path);
    EXPECT_EQ(inv, ModelRopeScaling(cfg, "", 0).frequencies.inv_freq);
    EXPECT_EQ(m.params.inv_freq, inv.data());
    EXPECT_EQ(m.params.head_dim, 128);
    EXPECT_EQ(m.max_position_embeddings, 131072);
    EXPECT_STREQ(m.model_type, "llama");
    EXPECT_EQ(m.is_alibi, 0);
    // The params drive posenc_rope_apply directly.
    std::vector<float> x = Ramp(2 * 128), x_cpp = x;
    const posenc_tensor xt = CTensor(x.data(), POSENC_FLOAT32, {1, 2, 1, 128});
    const posenc_positions pos{nullptr, 0, 3};
    ASSERT_EQ(posenc_rope_apply(nullptr, &m.params, &xt, POSENC_LAYOUT_BSHD, &pos,
                                POSENC_DIRECTION_FORWARD, nullptr),
              POSENC_OK)
        << posenc_last_error();
    RopeParams rp = ModelRopeParams(cfg, "", 0);
    rp.pairing = cfg.pairing;
    ApplyRope(rp, TensorView::Contiguous(x_cpp.data(), DType::kFloat32, {1, 2, 1, 128}),
              AttentionLayout::kBSHD, Positions::Offset(3));
    EXPECT_EQ(x, x_cpp);
    ExpectStatus(
        posenc_rope_from_config(path.c_str(), 0, "", POSENC_NUMERICS_HF, &m, inv.data(), 10),
        POSENC_ERROR_INVALID_ARGUMENT, {"capacity: got 10", "64"});
  }
  posenc_model_rope m;
  const std::string bloom = test::SourcePath("tests/golden/gguf/f_bloom_alibi.gguf");
  ASSERT_EQ(posenc_rope_from_config(bloom.c_str(), 0, nullptr, POSENC_NUMERICS_HF, &m, nullptr, 0),
            POSENC_OK);
  EXPECT_EQ(m.is_alibi, 1);
  EXPECT_EQ(m.alibi_heads, 32);
  const std::string broken = test::SourcePath("tests/golden/gguf/h_nkv_2pow40.gguf");
  ExpectStatus(
      posenc_rope_from_config(broken.c_str(), 0, nullptr, POSENC_NUMERICS_HF, &m, nullptr, 0),
      POSENC_ERROR_IO, {"h_nkv_2pow40.gguf", "header.n_kv"});
  const std::string layers = test::SourcePath("examples/configs/gemma-3-4b.json");
  ExpectStatus(
      posenc_rope_from_config(layers.c_str(), 0, "nope", POSENC_NUMERICS_HF, &m, nullptr, 0),
      POSENC_ERROR_INVALID_ARGUMENT, {"layer_type: got nope", "sliding_attention"});
}

TEST(CApi, TablesSlopesTilesAndBucketsMatchCpp) {
  std::vector<float> pe(10 * 12), pe_cpp(10 * 12);
  const posenc_tensor t = CTensor(pe.data(), POSENC_FLOAT32, {10, 12});
  ASSERT_EQ(posenc_sinusoidal_table(nullptr, 12, 10000.0, POSENC_SINUSOIDAL_SPLIT, 4, 10, &t),
            POSENC_OK);
  SinusoidalParams sp;
  sp.dim = 12;
  sp.layout = SinusoidalLayout::kSplit;
  SinusoidalTable(sp, 4, 10, TensorView::Contiguous(pe_cpp.data(), DType::kFloat32, {10, 12}));
  EXPECT_EQ(pe, pe_cpp);

  std::vector<double> slopes(12);
  ASSERT_EQ(posenc_alibi_slopes(12, 8.0, POSENC_ALIBI_BLOOM_FLOAT32, slopes.data(), 12), POSENC_OK);
  AlibiParams ap;
  ap.num_heads = 12;
  ap.convention = AlibiSlopeConvention::kBloomFloat32;
  EXPECT_EQ(slopes, AlibiSlopes(ap));
  std::vector<float> tile(3 * 5), tile_cpp(3 * 5);
  const posenc_tensor tt = CTensor(tile.data(), POSENC_FLOAT32, {3, 5});
  ASSERT_EQ(posenc_alibi_bias_tile(nullptr, slopes.data(), 12, 8, 10, POSENC_ALIBI_CAUSAL, 4, 2, 5,
                                   3, 8, &tt),
            POSENC_OK)
      << posenc_last_error();
  AlibiBiasTile(slopes, AlibiGeometry{8, 10, AlibiForm::kCausal}, AlibiTile{4, 2, 5, 3, 8},
                TensorView::Contiguous(tile_cpp.data(), DType::kFloat32, {3, 5}));
  EXPECT_EQ(tile, tile_cpp);

  std::vector<int64_t> buckets(40);
  ASSERT_EQ(posenc_t5_buckets(32, 128, POSENC_T5_CAUSAL, -20, 40, buckets.data()), POSENC_OK);
  T5BucketParams tp;
  tp.direction = T5Direction::kCausal;
  EXPECT_EQ(buckets, T5Buckets(tp, -20, 40));
  ExpectStatus(posenc_t5_buckets(3, 128, POSENC_T5_BIDIRECTIONAL, 0, 4, buckets.data()),
               POSENC_ERROR_INVALID_ARGUMENT, {"num_buckets: got 3"});
}

// Fused attention through the C API with scheme name + named arguments,
// against posenc::FlashAttention with the PositionScheme built in C++.
TEST(CApi, FlashAttentionSchemesByNameMatchCpp) {
  const int64_t b = 1, sq = 5, sk = 7, h = 4, hkv = 2, d = 8;
  const std::vector<float> q = Ramp(static_cast<std::size_t>(b * sq * h * d)),
                           k = Ramp(static_cast<std::size_t>(b * sk * hkv * d), -0.02f),
                           v = Ramp(static_cast<std::size_t>(b * sk * hkv * d), 0.03f);
  std::vector<float> t5_table = Ramp(32 * h), a_key = Ramp(5 * d), a_value = Ramp(5 * d, -0.01f);
  std::vector<double> slopes = {0.5, 0.25, 0.125, 0.0625};
  const posenc_tensor qt = CTensor(const_cast<float*>(q.data()), POSENC_FLOAT32, {b, sq, h, d});
  const posenc_tensor kt = CTensor(const_cast<float*>(k.data()), POSENC_FLOAT32, {b, sk, hkv, d});
  const posenc_tensor vt = CTensor(const_cast<float*>(v.data()), POSENC_FLOAT32, {b, sk, hkv, d});
  T5BucketParams t5p;
  T5BiasTable t5(t5p, h);
  std::copy(t5_table.begin(), t5_table.end(), t5.data());
  const TensorView ak = TensorView::Contiguous(a_key.data(), DType::kFloat32, {5, d});
  const TensorView av = TensorView::Contiguous(a_value.data(), DType::kFloat32, {5, d});
  RopeParams rp;
  rp.head_dim = d;
  rp.theta = 100.0;
  FireWeights fire = FireInit(h, 6, 4);  // a scheme added after the C API: passes by name
  fire.threshold = 3.0;
  struct Case {
    const char* name;
    std::vector<posenc_scheme_arg> args;
    PositionScheme scheme;
  };
  const auto num = [](const char* n, double x) {
    posenc_scheme_arg a{};
    a.name = n;
    a.kind = POSENC_ARG_NUMBER;
    a.number = x;
    return a;
  };
  const auto ten = [](const char* n, posenc_tensor t) {
    posenc_scheme_arg a{};
    a.name = n;
    a.kind = POSENC_ARG_TENSOR;
    a.tensor = t;
    return a;
  };
  const std::vector<Case> cases = {
      {"none", {}, PositionScheme::None()},
      {"rope", {num("theta", 100.0)}, PositionScheme::FromRope(rp)},
      {"alibi",
       {ten("slopes", CTensor(slopes.data(), POSENC_FLOAT64, {h}))},
       PositionScheme::FromAlibi(slopes)},
      {"t5",
       {ten("table", CTensor(t5_table.data(), POSENC_FLOAT32, {32, h}))},
       PositionScheme::FromT5(t5)},
      {"shaw",
       {num("clip", 2), ten("a_key", CTensor(a_key.data(), POSENC_FLOAT32, {5, d})),
        ten("a_value", CTensor(a_value.data(), POSENC_FLOAT32, {5, d}))},
       PositionScheme::FromShaw(ShawParams{2, d}, ak, av)},
      {"fire",
       {ten("w1", CTensor(fire.w1.data(), POSENC_FLOAT64, {6})),
        ten("b1", CTensor(fire.b1.data(), POSENC_FLOAT64, {6})),
        ten("w2", CTensor(fire.w2.data(), POSENC_FLOAT64, {h, 6})),
        ten("b2", CTensor(fire.b2.data(), POSENC_FLOAT64, {h})),
        ten("c", CTensor(&fire.c, POSENC_FLOAT64, {1})),
        ten("threshold", CTensor(&fire.threshold, POSENC_FLOAT64, {1}))},
       FireScheme(fire.View())},
  };
  posenc_context* ctx = nullptr;
  ASSERT_EQ(posenc_context_create(2, POSENC_BACKEND_AUTO, &ctx), POSENC_OK);
  const std::vector<int64_t> query_ids = {6, 2, 5, 6, 4};
  const posenc_positions query_pos{query_ids.data(), sq, 0}, key_pos{nullptr, 0, 0};
  for (const Case& c : cases)
    for (const bool explicit_pos : {false, true}) {
      SCOPED_TRACE(std::string(c.name) + (explicit_pos ? " with explicit positions" : ""));
      std::vector<float> out(static_cast<std::size_t>(b * sq * h * d)), out_cpp(out.size());
      const posenc_tensor ot = CTensor(out.data(), POSENC_FLOAT32, {b, sq, h, d});
      posenc_attention_params p;
      posenc_attention_params_init(&p);
      p.scheme = c.name;
      p.scheme_args = c.args.data();
      p.num_scheme_args = static_cast<int64_t>(c.args.size());
      p.query_tile = 2;
      p.key_tile = 3;
      if (explicit_pos) {
        p.query_positions = &query_pos;
        p.key_positions = &key_pos;
      }
      ASSERT_EQ(posenc_flash_attention(ctx, &p, &qt, &kt, &vt, &ot), POSENC_OK)
          << posenc_last_error();
      AttentionParams ap;
      ap.scheme = c.scheme;
      if (explicit_pos) {
        ap.query_positions = Positions::Ids(query_ids.data(), sq);
        ap.key_positions = Positions::Offset(0);
      }
      FlashAttentionOptions o;
      o.query_tile = 2;
      o.key_tile = 3;
      FlashAttention(ap, TensorView::Contiguous(q.data(), DType::kFloat32, {b, sq, h, d}),
                     TensorView::Contiguous(k.data(), DType::kFloat32, {b, sk, hkv, d}),
                     TensorView::Contiguous(v.data(), DType::kFloat32, {b, sk, hkv, d}),
                     TensorView::Contiguous(out_cpp.data(), DType::kFloat32, {b, sq, h, d}), o,
                     Context(2));
      EXPECT_EQ(out, out_cpp);
    }
  // Varlen: two sequences, ALiBi by max_bias.
  std::vector<float> out(static_cast<std::size_t>(sq * h * d)), out_cpp(out.size());
  const std::vector<int64_t> cu_q = {0, 2, 5}, cu_k = {0, 3, 7};
  posenc_attention_params p;
  posenc_attention_params_init(&p);
  p.scheme = "alibi";
  const posenc_scheme_arg mb = num("max_bias", 4.0);
  p.scheme_args = &mb;
  p.num_scheme_args = 1;
  const posenc_tensor q3 = CTensor(const_cast<float*>(q.data()), POSENC_FLOAT32, {sq, h, d});
  const posenc_tensor k3 = CTensor(const_cast<float*>(k.data()), POSENC_FLOAT32, {sk, hkv, d});
  const posenc_tensor v3 = CTensor(const_cast<float*>(v.data()), POSENC_FLOAT32, {sk, hkv, d});
  const posenc_tensor o3 = CTensor(out.data(), POSENC_FLOAT32, {sq, h, d});
  ASSERT_EQ(posenc_flash_attention_varlen(ctx, &p, &q3, &k3, &v3, &o3, cu_q.data(), cu_k.data(), 2),
            POSENC_OK)
      << posenc_last_error();
  AttentionParams ap;
  AlibiParams alp;
  alp.num_heads = h;
  alp.max_bias = 4.0;
  ap.scheme = PositionScheme::FromAlibi(AlibiSlopes(alp));
  FlashAttentionVarlen(ap, TensorView::Contiguous(q.data(), DType::kFloat32, {sq, h, d}),
                       TensorView::Contiguous(k.data(), DType::kFloat32, {sk, hkv, d}),
                       TensorView::Contiguous(v.data(), DType::kFloat32, {sk, hkv, d}),
                       TensorView::Contiguous(out_cpp.data(), DType::kFloat32, {sq, h, d}), cu_q,
                       cu_k, FlashAttentionOptions{}, Context(2));
  EXPECT_EQ(out, out_cpp);
  // Bad scheme arguments.
  const posenc_scheme_arg bad = num("thetta", 1.0);
  p.scheme = "rope";
  p.scheme_args = &bad;
  ExpectStatus(posenc_flash_attention(ctx, &p, &qt, &kt, &vt, &qt), POSENC_ERROR_INVALID_ARGUMENT,
               {"scheme_args[0].name: got thetta", "rope arguments: head_dim, rotary_dim, theta"});
  p.scheme = "sinusoidal";
  p.num_scheme_args = 0;
  ExpectStatus(posenc_flash_attention(ctx, &p, &qt, &kt, &vt, &qt), POSENC_ERROR_INVALID_ARGUMENT,
               {"scheme: got sinusoidal"});
  p.scheme = "t5";
  ExpectStatus(posenc_flash_attention(ctx, &p, &qt, &kt, &vt, &qt), POSENC_ERROR_INVALID_ARGUMENT,
               {"scheme.t5.table: got nothing"});
  posenc_context_destroy(ctx);
}

TEST(CApi, BadInputGivesStatusAndMessage) {
  posenc_rope_params p;
  posenc_rope_params_init(&p);
  p.head_dim = 8;
  p.rotary_dim = 3;
  std::vector<float> x(16);
  const posenc_tensor xt = CTensor(x.data(), POSENC_FLOAT32, {1, 2, 1, 8});
  const posenc_positions pos{nullptr, 0, 0};
  ExpectStatus(posenc_rope_apply(nullptr, &p, &xt, POSENC_LAYOUT_BSHD, &pos,
                                 POSENC_DIRECTION_FORWARD, nullptr),
               POSENC_ERROR_INVALID_ARGUMENT, {"rotary_dim: got 3"});
  p.rotary_dim = 0;
  ExpectStatus(posenc_rope_apply(nullptr, &p, nullptr, POSENC_LAYOUT_BSHD, &pos,
                                 POSENC_DIRECTION_FORWARD, nullptr),
               POSENC_ERROR_INVALID_ARGUMENT, {"x: got NULL"});
  ExpectStatus(posenc_rope_apply(nullptr, &p, &xt, static_cast<posenc_layout>(7), &pos,
                                 POSENC_DIRECTION_FORWARD, nullptr),
               POSENC_ERROR_INVALID_ARGUMENT, {"layout: got 7", "POSENC_LAYOUT_BSHD"});
  p.inv_freq_count = 4;
  ExpectStatus(posenc_rope_apply(nullptr, &p, &xt, POSENC_LAYOUT_BSHD, &pos,
                                 POSENC_DIRECTION_FORWARD, nullptr),
               POSENC_ERROR_INVALID_ARGUMENT, {"params.inv_freq: got NULL with inv_freq_count 4"});
  posenc_tensor bad = xt;
  bad.dtype = static_cast<posenc_dtype>(9);
  ExpectStatus(posenc_sinusoidal_table(nullptr, 8, 10000.0, POSENC_SINUSOIDAL_SPLIT, 0, 2, &bad),
               POSENC_ERROR_INVALID_ARGUMENT, {"out.dtype: got 9"});
  posenc_context* ctx = nullptr;
  ExpectStatus(posenc_context_create(-1, POSENC_BACKEND_AUTO, &ctx), POSENC_ERROR_INVALID_ARGUMENT,
               {"-1"});
  EXPECT_EQ(ctx, nullptr);
  posenc_context_destroy(nullptr);
}

TEST(CApi, LastErrorIsThreadLocal) {
  std::vector<int64_t> b(4);
  ASSERT_NE(posenc_t5_buckets(3, 128, POSENC_T5_BIDIRECTIONAL, 0, 4, b.data()), POSENC_OK);
  const std::string mine = posenc_last_error();
  std::string other;
  std::thread t([&] {
    other = posenc_last_error();  // nothing failed on this thread yet
    posenc_alibi_slopes(0, 8.0, POSENC_ALIBI_REFERENCE, nullptr, 0);
  });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(posenc_last_error(), mine);
}

TEST(CApi, GuardCatchesEveryException) {
  using capi::Guard;
  EXPECT_EQ(Guard([] { throw std::bad_alloc(); }), POSENC_ERROR_OUT_OF_MEMORY);
  EXPECT_STREQ(posenc_last_error(), "out of memory");
  EXPECT_EQ(Guard([] { throw std::logic_error("boom"); }), POSENC_ERROR_INTERNAL);
  EXPECT_STREQ(posenc_last_error(), "boom");
  EXPECT_EQ(Guard([] { throw 42; }), POSENC_ERROR_INTERNAL);
  EXPECT_STREQ(posenc_last_error(), "unknown exception");
  EXPECT_EQ(Guard([] { throw ConfigError("c"); }), POSENC_ERROR_CONFIG);
  EXPECT_EQ(Guard([] { throw IoError("i"); }), POSENC_ERROR_IO);
  EXPECT_EQ(Guard([] {}), POSENC_OK);
}

}  // namespace
}  // namespace posenc
