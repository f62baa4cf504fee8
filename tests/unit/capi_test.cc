// The C API (include/posenc/c.h, src/capi/) against the C++ API it fronts:
// every entry point gives bit-identical results to the C++ call on the same
// inputs (RoPE in/out of place, ids/offset, both layouts, bf16, q+k, varlen,
// cos/sin, default frequencies, config + GGUF loading, sinusoidal, ALiBi,
// T5; attention: capi_attention_test.cc), statuses and
// messages for bad input, the thread-local last error, and the exception
// barrier (bad_alloc, foreign exceptions).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "capi/c_api_internal.h"
#include "posenc/alibi.h"
#include "posenc/c.h"
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

posenc_positions COffset(int64_t offset) {
  posenc_positions p;
  EXPECT_EQ(posenc_positions_offset(offset, &p), POSENC_OK) << posenc_last_error();
  return p;
}

posenc_positions CIds(const int64_t* ids, int64_t count) {
  posenc_positions p;
  EXPECT_EQ(posenc_positions_ids(ids, count, &p), POSENC_OK) << posenc_last_error();
  return p;
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
      const posenc_positions pos = use_ids ? CIds(ids.data(), s) : COffset(7);
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
  p.pairing = POSENC_PAIRING_HALF_SPLIT;
  const posenc_positions pos = COffset(100);
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
    posenc_model_rope_init(&m);
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
    EXPECT_EQ(m.num_heads, 32);  // what an engine sizes its caches with
    EXPECT_EQ(m.num_kv_heads, 8);
    EXPECT_EQ(m.head_dim, 128);
    EXPECT_EQ(m.softmax_scale, 0.0);
    EXPECT_EQ(m.num_mrope_sections, 0);
    EXPECT_EQ(m.num_layer_types, 1);
    EXPECT_STREQ(m.layer_types[0], "");
    EXPECT_STREQ(m.format, rel.ends_with(".gguf") ? "gguf" : "config.json");
    EXPECT_EQ(m.num_warnings, static_cast<int32_t>(LoadModelConfig(path).warnings.size()));
    // GGUF llama: interleaved (llama.cpp's converter permuted Q/K); HF: half-split.
    EXPECT_EQ(m.params.pairing,
              rel.ends_with(".gguf") ? POSENC_PAIRING_INTERLEAVED : POSENC_PAIRING_HALF_SPLIT);
    // The params drive posenc_rope_apply directly.
    std::vector<float> x = Ramp(2 * 128), x_cpp = x;
    const posenc_tensor xt = CTensor(x.data(), POSENC_FLOAT32, {1, 2, 1, 128});
    const posenc_positions pos = COffset(3);
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
  posenc_model_rope_init(&m);
  const std::string bloom = test::SourcePath("tests/golden/gguf/f_bloom_alibi.gguf");
  ASSERT_EQ(posenc_rope_from_config(bloom.c_str(), 0, nullptr, POSENC_NUMERICS_HF, &m, nullptr, 0),
            POSENC_OK);
  EXPECT_EQ(m.is_alibi, 1);
  EXPECT_EQ(m.alibi_heads, 32);
  EXPECT_EQ(m.num_heads, 32);
  EXPECT_EQ(m.num_kv_heads, 32);
  EXPECT_GT(m.head_dim, 0);  // hidden / heads: an ALiBi engine needs it too
  EXPECT_EQ(m.num_layer_types, 0);
  const std::string broken = test::SourcePath("tests/golden/gguf/h_nkv_2pow40.gguf");
  ExpectStatus(
      posenc_rope_from_config(broken.c_str(), 0, nullptr, POSENC_NUMERICS_HF, &m, nullptr, 0),
      POSENC_ERROR_IO, {"h_nkv_2pow40.gguf", "header.n_kv"});
  const std::string layers = test::SourcePath("examples/configs/gemma-3-4b.json");
  ExpectStatus(
      posenc_rope_from_config(layers.c_str(), 0, "nope", POSENC_NUMERICS_HF, &m, nullptr, 0),
      POSENC_ERROR_INVALID_ARGUMENT, {"layer_type: got nope", "sliding_attention"});
  EXPECT_EQ(std::string(posenc_last_error()).find("\"\""), std::string::npos);
  ASSERT_EQ(posenc_rope_from_config(layers.c_str(), 0, nullptr, POSENC_NUMERICS_HF, &m, nullptr, 0),
            POSENC_OK);
  EXPECT_EQ(m.num_layer_types, 2);
  EXPECT_STREQ(posenc_last_error(), "");  // cleared by the success
  // M-RoPE sections and DeepSeek's softmax scale reach C callers.
  const std::string vl = test::SourcePath("examples/configs/qwen2-vl-7b-instruct.json");
  ASSERT_EQ(posenc_rope_from_config(vl.c_str(), 0, nullptr, POSENC_NUMERICS_HF, &m, nullptr, 0),
            POSENC_OK)
      << posenc_last_error();
  const ModelConfig vl_cfg = LoadModelConfig(vl);
  const LayerRope& vl_layer = SelectLayerRope(vl_cfg, "");
  ASSERT_EQ(m.num_mrope_sections, static_cast<int32_t>(vl_layer.mrope_section.size()));
  ASSERT_GT(m.num_mrope_sections, 0);
  for (int32_t i = 0; i < m.num_mrope_sections; ++i) {
    EXPECT_EQ(m.mrope_section[i], vl_layer.mrope_section[static_cast<std::size_t>(i)]);
  }
  const std::string ds = test::SourcePath("examples/configs/deepseek-v3.json");
  ASSERT_EQ(posenc_rope_from_config(ds.c_str(), 0, nullptr, POSENC_NUMERICS_HF, &m, nullptr, 0),
            POSENC_OK)
      << posenc_last_error();
  EXPECT_EQ(m.softmax_scale, *LoadModelConfig(ds).deepseek_softmax_scale);
  posenc_model_rope raw{};  // not initialised
  ExpectStatus(
      posenc_rope_from_config(ds.c_str(), 0, nullptr, POSENC_NUMERICS_HF, &raw, nullptr, 0),
      POSENC_ERROR_INVALID_ARGUMENT, {"out.struct_size: got 0", "posenc_model_rope_init"});
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

TEST(CApi, BadInputGivesStatusAndMessage) {
  posenc_rope_params p;
  posenc_rope_params_init(&p);
  p.head_dim = 8;
  std::vector<float> x(16);
  const posenc_tensor xt = CTensor(x.data(), POSENC_FLOAT32, {1, 2, 1, 8});
  const posenc_positions pos = COffset(0);
  ExpectStatus(posenc_rope_apply(nullptr, &p, &xt, POSENC_LAYOUT_BSHD, &pos,
                                 POSENC_DIRECTION_FORWARD, nullptr),
               POSENC_ERROR_INVALID_ARGUMENT, {"params.pairing: got -1", "must be set"});
  p.pairing = POSENC_PAIRING_HALF_SPLIT;
  p.rotary_dim = 3;
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
  ExpectStatus(posenc_context_create_on(2, POSENC_BACKEND_AUTO, 2, &ctx),
               POSENC_ERROR_INVALID_ARGUMENT,
               {"workers: got 2", "POSENC_WORKERS_POOL (0) or POSENC_WORKERS_OPENMP (1)"});
  EXPECT_EQ(ctx, nullptr);
  ::setenv("POSENC_POOL_SPIN_US", "fast", 1);
  ExpectStatus(posenc_context_create(2, POSENC_BACKEND_AUTO, &ctx), POSENC_ERROR_INVALID_ARGUMENT,
               {"POSENC_POOL_SPIN_US: got fast", "[0, 100000]"});
  ::unsetenv("POSENC_POOL_SPIN_US");
  EXPECT_EQ(ctx, nullptr);
  posenc_context_destroy(nullptr);
}

// posenc_context_create_on: a context on the caller's OpenMP team gives the
// pool's values; refused, naming workers, in a build without OpenMP.
TEST(CApi, ContextOnOpenMPWorkers) {
  posenc_context* ctx = nullptr;
  if (posenc_openmp_available() == 0) {
    ExpectStatus(posenc_context_create_on(2, POSENC_BACKEND_AUTO, POSENC_WORKERS_OPENMP, &ctx),
                 POSENC_ERROR_INVALID_ARGUMENT, {"workers: got openmp", "no OpenMP"});
    EXPECT_EQ(ctx, nullptr);
    return;
  }
  posenc_context* pool = nullptr;
  ASSERT_EQ(posenc_context_create_on(3, POSENC_BACKEND_AUTO, POSENC_WORKERS_OPENMP, &ctx),
            POSENC_OK);
  ASSERT_EQ(posenc_context_create_on(3, POSENC_BACKEND_AUTO, POSENC_WORKERS_POOL, &pool),
            POSENC_OK);
  const int64_t dim = 64, n = 4000;
  std::vector<float> a(static_cast<std::size_t>(dim * n)), b(a.size());
  const posenc_tensor ta = CTensor(a.data(), POSENC_FLOAT32, {n, dim});
  const posenc_tensor tb = CTensor(b.data(), POSENC_FLOAT32, {n, dim});
  ASSERT_EQ(posenc_sinusoidal_table(ctx, dim, 10000.0, POSENC_SINUSOIDAL_SPLIT, 7, n, &ta),
            POSENC_OK);
  ASSERT_EQ(posenc_sinusoidal_table(pool, dim, 10000.0, POSENC_SINUSOIDAL_SPLIT, 7, n, &tb),
            POSENC_OK);
  EXPECT_EQ(a, b);
  EXPECT_NE(a[static_cast<std::size_t>(dim * n - 1)], 0.0f);
  posenc_context_destroy(ctx);
  posenc_context_destroy(pool);
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
  EXPECT_STREQ(posenc_last_error(), "");  // c.h: "" after a success
}

TEST(CApi, VersionNumberAndStructSizes) {
  EXPECT_EQ(posenc_version_number(), POSENC_VERSION_NUMBER);
  EXPECT_EQ(POSENC_VERSION_NUMBER,
            POSENC_VERSION_MAJOR * 10000 + POSENC_VERSION_MINOR * 100 + POSENC_VERSION_PATCH);
  posenc_rope_params p;
  posenc_rope_params_init(&p);
  EXPECT_EQ(p.struct_size, sizeof(posenc_rope_params));
  EXPECT_EQ(p.pairing, -1);
  posenc_model_rope m;
  posenc_model_rope_init(&m);
  EXPECT_EQ(m.struct_size, sizeof(posenc_model_rope));
  EXPECT_EQ(m.params.struct_size, sizeof(posenc_rope_params));
  const int64_t shape[2] = {3, 4}, strides[2] = {10, 1};
  std::vector<float> buf(30);
  posenc_tensor t;
  ASSERT_EQ(posenc_tensor_strided(buf.data(), POSENC_FLOAT32, 2, shape, strides, &t), POSENC_OK);
  EXPECT_EQ(t.struct_size, sizeof(posenc_tensor));
  EXPECT_EQ(t.strides[0], 10);
  const int64_t negative[2] = {-1, 1};
  ExpectStatus(posenc_tensor_strided(buf.data(), POSENC_FLOAT32, 2, shape, negative, &t),
               POSENC_ERROR_INVALID_ARGUMENT, {"strides[0]: got -1"});
  const int64_t ids[3] = {0, 1, 2};
  ExpectStatus(posenc_positions_ids(ids, 3, nullptr), POSENC_ERROR_INVALID_ARGUMENT,
               {"out: got NULL"});
  posenc_positions pos;
  ExpectStatus(posenc_positions_ids(nullptr, 3, &pos), POSENC_ERROR_INVALID_ARGUMENT,
               {"ids: got NULL"});
  // A struct from a newer header (larger) or one never initialised (0) is
  // refused, never misread.
  p.pairing = POSENC_PAIRING_HALF_SPLIT;
  p.head_dim = 4;
  p.struct_size = sizeof(posenc_rope_params) + 8;
  std::vector<float> x(4);
  const posenc_tensor xt = CTensor(x.data(), POSENC_FLOAT32, {1, 1, 1, 4});
  const posenc_positions at = COffset(0);
  ExpectStatus(posenc_rope_apply(nullptr, &p, &xt, POSENC_LAYOUT_BSHD, &at,
                                 POSENC_DIRECTION_FORWARD, nullptr),
               POSENC_ERROR_INVALID_ARGUMENT,
               {"params.struct_size: got " + std::to_string(sizeof(posenc_rope_params) + 8)});
}

}  // namespace
}  // namespace posenc
