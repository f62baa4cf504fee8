// GGUF -> ModelConfig (src/io/gguf_model.cc): what each fixture describes,
// and the frequencies of a GGUF file against those of the HF config.json it
// was converted from, within float32 rounding: the fixtures (plain, Llama 3.1
// rope_freqs vs examples/configs/llama-3.1-8b.json, linear, partial rotary,
// BLOOM's ALiBi) and files the test writer builds for the scaling types that
// have no fixture (yarn, DeepSeek's yarn_log_multiplier, longrope, the legacy
// scale_linear key, Gemma 3's sliding base, M-RoPE sections).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gguf_test_util.h"
#include "posenc/alibi.h"
#include "posenc/error.h"
#include "posenc/gguf.h"
#include "posenc/model_config.h"
#include "test_util.h"

namespace posenc {
namespace {

using nlohmann::json;
using testing::GgufBuilder;

std::string FixturePath(const std::string& name) {
  return test::SourcePath("tests/golden/gguf/" + name);
}

// Frequencies agree "within float32 rounding": 4 float32 ulps relative (the
// llama3 smooth band is computed by torch in float32 on one side and from the
// file's float32 divisors on the other).
void ExpectSameRope(const ModelConfig& gguf, const ModelConfig& hf, const std::string& layer,
                    std::int64_t seq_len, double rel_tol = 4 * std::ldexp(1.0, -24)) {
  const RopeScaling a = ModelRopeScaling(gguf, layer, seq_len);
  const RopeScaling b = ModelRopeScaling(hf, layer, seq_len);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rotary_dim, b.rotary_dim);
  ASSERT_EQ(a.frequencies.inv_freq.size(), b.frequencies.inv_freq.size());
  for (std::size_t j = 0; j < a.frequencies.inv_freq.size(); ++j) {
    const double want = b.frequencies.inv_freq[j];
    EXPECT_LE(std::abs(a.frequencies.inv_freq[j] - want), rel_tol * want)
        << "pair " << j << ": gguf " << a.frequencies.inv_freq[j] << " hf " << want;
  }
  EXPECT_NEAR(a.frequencies.attention_factor, b.frequencies.attention_factor, 1e-12);
}

ModelConfig Json(const json& j) { return ParseModelConfig(j.dump(), "hf.json"); }

ModelConfig Built(const GgufBuilder& b) { return ParseGgufModelConfig(b.Bytes(), "built.gguf"); }

template <typename Fn>
void ExpectConfigError(Fn fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    for (const std::string& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(GgufModel, Llama2PlainMatchesItsConfig) {
  const ModelConfig g = LoadModelConfig(FixturePath("a_llama2_7b_plain.gguf"));
  EXPECT_EQ(g.format, "gguf");
  EXPECT_EQ(g.model_type, "llama");
  EXPECT_EQ(g.head_dim, 128);
  EXPECT_EQ(g.max_position_embeddings, 4096);
  EXPECT_EQ(g.pairing, RopePairing::kInterleaved);  // llama.cpp NORM on permuted weights
  const LayerRope& l = SelectLayerRope(g, "");
  EXPECT_EQ(l.scaling.type, RopeScalingType::kDefault);
  EXPECT_EQ(l.scaling.theta, 10000.0);
  ExpectSameRope(g,
                 Json({{"hidden_size", 4096},
                       {"num_attention_heads", 32},
                       {"max_position_embeddings", 4096},
                       {"rope_theta", 10000.0}}),
                 "", 0, 0.0);
}

TEST(GgufModel, Llama31RopeFreqsMatchTheLlama3Config) {
  const ModelConfig g = LoadModelConfig(FixturePath("b_llama31_8b_llama3_rope_freqs.gguf"));
  const LayerRope& l = SelectLayerRope(g, "");
  EXPECT_EQ(l.scaling.type, RopeScalingType::kDefault);
  ASSERT_EQ(l.scaling.freq_factors.size(), 64u);
  EXPECT_EQ(l.scaling.freq_factors[0], 1.0);
  EXPECT_EQ(l.scaling.freq_factors[63], 8.0);
  const ModelConfig hf = LoadModelConfig(test::SourcePath("examples/configs/llama-3.1-8b.json"));
  ExpectSameRope(g, hf, "", 0);
  const RopeScaling s = ModelRopeScaling(g, "", 0);
  EXPECT_EQ(s.pairs[0].region, RopePairRegion::kKept);
  EXPECT_EQ(s.pairs[30].region, RopePairRegion::kBlended);
  EXPECT_EQ(s.pairs[63].region, RopePairRegion::kInterpolated);
}

TEST(GgufModel, LinearAndPartialRotaryMatchTheirConfigs) {
  const ModelConfig d = LoadModelConfig(FixturePath("d_llama_linear_x2.gguf"));
  EXPECT_EQ(SelectLayerRope(d, "").scaling.type, RopeScalingType::kLinear);
  ExpectSameRope(d,
                 Json({{"hidden_size", 4096},
                       {"num_attention_heads", 32},
                       {"max_position_embeddings", 8192},
                       {"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}}}),
                 "", 0, 0.0);
  const ModelConfig e = LoadModelConfig(FixturePath("e_phi2_partial_rotary.gguf"));
  EXPECT_EQ(e.head_dim, 80);
  EXPECT_EQ(e.pairing, RopePairing::kHalfSplit);
  EXPECT_EQ(ModelRopeScaling(e, "", 0).rotary_dim, 32);
  ExpectSameRope(e,
                 Json({{"hidden_size", 2560},
                       {"num_attention_heads", 32},
                       {"partial_rotary_factor", 0.4},
                       {"max_position_embeddings", 2048}}),
                 "", 0, 0.0);
}

TEST(GgufModel, BloomReportsAlibiSlopes) {
  const ModelConfig g = LoadModelConfig(FixturePath("f_bloom_alibi.gguf"));
  ASSERT_TRUE(g.alibi.has_value());
  EXPECT_TRUE(g.layers.empty());
  EXPECT_EQ(g.alibi->num_heads, 32);
  EXPECT_EQ(g.alibi->max_bias, 8.0);
  AlibiParams p;
  p.num_heads = 32;
  EXPECT_EQ(g.alibi->slopes, AlibiSlopes(p));
  EXPECT_EQ(g.alibi->slopes[0], std::exp2(-0.25));  // 2^(-8/32): the first of 32 heads
  const ModelConfig hf = Json({{"model_type", "bloom"}, {"n_head", 32}, {"hidden_size", 4096}});
  ASSERT_TRUE(hf.alibi.has_value());
  EXPECT_EQ(hf.alibi->slopes, g.alibi->slopes);
  ExpectConfigError([&] { SelectLayerRope(g, ""); }, {"f_bloom_alibi.gguf", "ALiBi"});
  // MPT: max bias from the file.
  GgufBuilder mpt;
  mpt.Str("general.architecture", "mpt").U32("mpt.attention.head_count", 8);
  mpt.F32("mpt.attention.max_alibi_bias", 16.0f);
  const ModelConfig m = Built(mpt);
  p.num_heads = 8;
  p.max_bias = 16.0;
  EXPECT_EQ(m.alibi->slopes, AlibiSlopes(p));
}

// A GGUF as llama.cpp's converter writes a HF config (the keys of
// convert_hf_to_gguf.py TextModel.set_gguf_parameters).
GgufBuilder Converted(const std::string& arch, std::uint32_t heads, std::uint32_t embd,
                      std::uint32_t ctx, float theta) {
  GgufBuilder b;
  b.Str("general.architecture", arch).U32(arch + ".context_length", ctx);
  b.U32(arch + ".embedding_length", embd).U32(arch + ".attention.head_count", heads);
  b.F32(arch + ".rope.freq_base", theta);
  return b;
}

TEST(GgufModel, YarnMatchesTheQwenYarnConfig) {
  GgufBuilder b = Converted("qwen2", 28, 3584, 32768, 1e6f);
  b.Str("qwen2.rope.scaling.type", "yarn").F32("qwen2.rope.scaling.factor", 4.0f);
  b.U32("qwen2.rope.scaling.original_context_length", 32768);
  const ModelConfig g = Built(b);
  EXPECT_EQ(g.pairing, RopePairing::kHalfSplit);
  const ModelConfig hf =
      LoadModelConfig(test::SourcePath("examples/configs/qwen2.5-7b-instruct-yarn.json"));
  ExpectSameRope(g, hf, "", 0, 0.0);
  // Explicit betas and attention factor.
  b.F32("qwen2.rope.scaling.yarn_beta_fast", 16.0f).F32("qwen2.rope.scaling.yarn_beta_slow", 2.0f);
  b.F32("qwen2.rope.scaling.yarn_attn_factor", 1.5f);
  json j = json::parse(
      R"({"hidden_size": 3584, "num_attention_heads": 28, "max_position_embeddings": 32768,
    "rope_theta": 1000000.0, "rope_scaling": {"type": "yarn", "factor": 4.0, "beta_fast": 16.0,
    "beta_slow": 2.0, "attention_factor": 1.5, "original_max_position_embeddings": 32768}})");
  ExpectSameRope(Built(b), Json(j), "", 0, 0.0);
}

TEST(GgufModel, DeepSeekYarnLogMultiplierMatchesMscaleAllDim) {
  GgufBuilder b = Converted("deepseek2", 128, 7168, 163840, 10000.0f);
  b.U32("deepseek2.attention.key_length", 192).U32("deepseek2.attention.kv_lora_rank", 512);
  b.U32("deepseek2.rope.dimension_count", 64);
  b.Str("deepseek2.rope.scaling.type", "yarn").F32("deepseek2.rope.scaling.factor", 40.0f);
  b.U32("deepseek2.rope.scaling.original_context_length", 4096);
  b.F32("deepseek2.rope.scaling.yarn_beta_fast", 32.0f)
      .F32("deepseek2.rope.scaling.yarn_beta_slow", 1.0f);
  b.F32("deepseek2.rope.scaling.yarn_log_multiplier", 0.1f);
  const ModelConfig g = Built(b);
  const ModelConfig hf = LoadModelConfig(test::SourcePath("examples/configs/deepseek-v3.json"));
  EXPECT_EQ(g.head_dim, hf.head_dim);
  EXPECT_EQ(g.pairing, hf.pairing);
  // 0.1f / 0.1 is 1 + 1.5e-8: the mscale terms agree to float32 rounding.
  ExpectSameRope(g, hf, "", 0, 0.0);
  ASSERT_TRUE(g.deepseek_softmax_scale && hf.deepseek_softmax_scale);
  EXPECT_NEAR(*g.deepseek_softmax_scale, *hf.deepseek_softmax_scale,
              1e-7 * *hf.deepseek_softmax_scale);
}

TEST(GgufModel, LongRopeTensorsMatchThePhi3Config) {
  const ModelConfig hf =
      LoadModelConfig(test::SourcePath("examples/configs/phi-3.5-mini-instruct.json"));
  const RopeScalingParams& hp = SelectLayerRope(hf, "").scaling;
  GgufBuilder b = Converted("phi3", 32, 3072, 131072, 10000.0f);
  b.Str("phi3.rope.scaling.type", "longrope");
  b.U32("phi3.rope.scaling.original_context_length",
        static_cast<std::uint32_t>(hp.original_max_position_embeddings));
  b.F32("phi3.rope.scaling.attn_factor",
        static_cast<float>(ModelRopeScaling(hf, "", 0).frequencies.attention_factor));
  b.TensorF32("rope_factors_long.weight", {hp.long_factor.begin(), hp.long_factor.end()});
  b.TensorF32("rope_factors_short.weight", {hp.short_factor.begin(), hp.short_factor.end()});
  const ModelConfig g = Built(b);
  for (const std::int64_t seq : {0, 4096, 131072}) {  // short factors, then long
    SCOPED_TRACE(seq);
    const RopeScaling a = ModelRopeScaling(g, "", seq), h = ModelRopeScaling(hf, "", seq);
    EXPECT_EQ(a.longrope_factors, h.longrope_factors);
    for (std::size_t j = 0; j < a.frequencies.inv_freq.size(); ++j) {
      EXPECT_LE(std::abs(a.frequencies.inv_freq[j] - h.frequencies.inv_freq[j]),
                4 * std::ldexp(1.0, -24) * h.frequencies.inv_freq[j])
          << j;
    }
    EXPECT_NEAR(a.frequencies.attention_factor, h.frequencies.attention_factor, 1e-7);
  }
  GgufBuilder missing = Converted("phi3", 32, 3072, 131072, 10000.0f);
  missing.Str("phi3.rope.scaling.type", "longrope")
      .U32("phi3.rope.scaling.original_context_length", 4096);
  EXPECT_THROW(Built(missing), IoError);  // the factor tensors are absent
}

TEST(GgufModel, GemmaSlidingBaseAndLegacyLinearKey) {
  GgufBuilder b = Converted("gemma3", 8, 2560, 131072, 1e6f);
  b.U32("gemma3.attention.key_length", 256).F32("gemma3.rope.scale_linear", 8.0f);
  b.F32("gemma3.rope.freq_base_swa", 10000.0f);
  const ModelConfig g = Built(b);
  const ModelConfig hf = LoadModelConfig(test::SourcePath("examples/configs/gemma-3-4b.json"));
  ASSERT_EQ(g.layers.size(), 2u);
  ExpectSameRope(g, hf, "full_attention", 0, 0.0);
  ExpectSameRope(g, hf, "sliding_attention", 0, 0.0);
}

TEST(GgufModel, MRopeSectionsMatchQwen2VL) {
  GgufBuilder b = Converted("qwen2vl", 28, 3584, 32768, 1e6f);
  b.I32Array("qwen2vl.rope.dimension_sections", {16, 24, 24, 0});
  const ModelConfig g = Built(b);
  const ModelConfig hf =
      LoadModelConfig(test::SourcePath("examples/configs/qwen2-vl-7b-instruct.json"));
  EXPECT_EQ(SelectLayerRope(g, "").mrope_section, SelectLayerRope(hf, "").mrope_section);
  ExpectSameRope(g, hf, "", 0, 0.0);
}

TEST(GgufModel, BadMetadataIsAConfigErrorNamingTheKey) {
  ExpectConfigError([] { Built(GgufBuilder().U32("x.context_length", 5)); },
                    {"built.gguf", "general.architecture", "missing"});
  ExpectConfigError(
      [] {
        Built(Converted("llama", 32, 4096, 4096, 1e4f).Str("llama.rope.scaling.type", "magic"));
      },
      {"llama.rope.scaling.type", "\"magic\"", "none, linear, yarn, longrope"});
  GgufBuilder mistyped;
  mistyped.Str("general.architecture", "llama").Str("llama.rope.freq_base", "10000");
  mistyped.U32("llama.attention.head_count", 32).U32("llama.embedding_length", 4096);
  ExpectConfigError([&] { Built(mistyped); },
                    {"llama.rope.freq_base", "got str \"10000\"", "a number > 1"});
  ExpectConfigError(
      [] {
        Built(Converted("llama", 32, 4096, 4096, 1e4f).TensorF32("rope_freqs.weight", {1, 2}));
      },
      {"rope_freqs.weight", "got 2 values", "rotary_dim/2 = 64"});
  ExpectConfigError([] { Built(Converted("llama", 32, 4096, 4096, 0.5f)); },
                    {"llama.rope.freq_base", "0.5"});
  ExpectConfigError(
      [] { Built(Converted("llama", 32, 4096, 4096, 1e4f).U32("llama.rope.dimension_count", 7)); },
      {"llama.rope.dimension_count", "got 7"});
  ExpectConfigError([] { Built(Converted("gpt2", 12, 768, 1024, 1e4f)); }, {"\"gpt2\"", "neither"});
  ExpectConfigError(
      [] {
        Built(Converted("llama", 32, 4096, 4096, 1e4f).Str("llama.rope.scaling.type", "yarn"));
      },
      {"llama.rope.scaling.factor", "missing"});
  const ModelConfig unknown = Built(Converted("newarch", 8, 512, 1024, 1e4f));
  ASSERT_EQ(unknown.warnings.size(), 1u);
  EXPECT_NE(unknown.warnings[0].find("'newarch'"), std::string::npos);
}

}  // namespace
}  // namespace posenc
