// HF config.json loader (posenc/model_config.h): every golden case through
// the loader (new and legacy schema), the example configs, HF-style warnings,
// per-layer-type configs, and one malformed config per validation rule.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/error.h"
#include "posenc/model_config.h"
#include "test_util.h"

namespace posenc {
namespace {

using nlohmann::json;
using test::Golden;
using test::ToDoubles;

double MaxRelErr(const std::vector<double>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]) / std::abs(want[i]));
  }
  return worst;
}

std::string CaseConfig(const json& c, bool legacy) { return test::GoldenCaseConfig(c, legacy); }

TEST(ModelConfigGolden, EveryCaseThroughTheLoaderBothSchemas) {
  int n = 0;
  for (const json& c : Golden("rope_init.json")["cases"]) {
    for (bool legacy : {false, true}) {
      SCOPED_TRACE(c["name"].get<std::string>() + (legacy ? " legacy" : " new"));
      const ModelConfig cfg = ParseModelConfig(CaseConfig(c, legacy), "case.json");
      const RopeScaling s = ModelRopeScaling(cfg, "", 0);
      EXPECT_EQ(s.rotary_dim, c["rotary_dim"].get<std::int64_t>());
      EXPECT_LE(MaxRelErr(s.frequencies.inv_freq, ToDoubles(c["inv_freq"])), 1e-6);
      EXPECT_LE(std::abs(s.frequencies.attention_factor - c["attention_factor"].get<double>()) /
                    c["attention_factor"].get<double>(),
                1e-12);
      for (const json& e : c["evaluations"]) {
        const RopeScaling se =
            ModelRopeScaling(cfg, "", e["seq_len_seen_by_forward"].get<std::int64_t>());
        EXPECT_LE(MaxRelErr(se.frequencies.inv_freq, ToDoubles(e["inv_freq_used"])), 1e-6);
      }
      EXPECT_TRUE(cfg.warnings.empty()) << cfg.warnings.front();
      ++n;
    }
  }
  EXPECT_EQ(n, 30);
}

ModelConfig Example(const std::string& name) {
  return LoadModelConfig(test::SourcePath("examples/configs/" + name));
}

const json& Case(const std::string& name) {
  for (const json& c : Golden("rope_init.json")["cases"]) {
    if (c["name"] == name) return c;
  }
  throw std::runtime_error("no case " + name);
}

TEST(ModelConfigExamples, MatchTheirGoldenCases) {
  const std::pair<const char*, const char*> pairs[] = {
      {"llama-3.1-8b.json", "llama3.1_8b_llama3"},
      {"qwen2.5-7b-instruct-yarn.json", "qwen2.5_7b_instruct_yarn"},
      {"deepseek-v3.json", "deepseek_v3_yarn"},
      {"phi-3.5-mini-instruct.json", "phi3.5_mini_instruct_longrope"},
      {"gpt-oss-20b.json", "gpt_oss_20b_yarn_truncate_false"},
      {"mistral-7b-instruct-v0.2.json", "mistral_7b_v0.2_default"},
  };
  for (const auto& [file, name] : pairs) {
    SCOPED_TRACE(file);
    const ModelConfig cfg = Example(file);
    const json& c = Case(name);
    const RopeScaling s = ModelRopeScaling(cfg, "", 0);
    EXPECT_EQ(RopeScalingTypeName(s.type), c["rope_type"].get<std::string>());
    EXPECT_LE(MaxRelErr(s.frequencies.inv_freq, ToDoubles(c["inv_freq"])), 1e-6);
    EXPECT_NEAR(s.frequencies.attention_factor, c["attention_factor"].get<double>(), 1e-15);
    EXPECT_TRUE(cfg.warnings.empty()) << cfg.warnings.front();
  }
}

TEST(ModelConfigExamples, SchemaVariants) {
  // DeepSeek: qk_rope_head_dim, interleaved pairs, softmax correction.
  ModelConfig ds = Example("deepseek-v3.json");
  EXPECT_EQ(ds.head_dim, 64);
  EXPECT_EQ(ds.pairing, RopePairing::kInterleaved);
  ASSERT_TRUE(ds.deepseek_softmax_scale.has_value());
  const json& diag = Case("deepseek_v3_yarn")["derived_diagnostics"]["deepseek_softmax_scale"];
  EXPECT_NEAR(*ds.deepseek_softmax_scale, diag["value"].get<double>(), 1e-15);
  // Phi-3: top-level original_max_position_embeddings.
  ModelConfig phi = Example("phi-3.5-mini-instruct.json");
  EXPECT_EQ(phi.original_max_position_embeddings, 4096);
  EXPECT_EQ(ModelRopeScaling(phi, "", 4097).longrope_factors, LongRopeFactors::kLong);
  // Gemma 3: text_config, full layers linear x8 at 1e6, sliding default at 1e4.
  ModelConfig gemma = Example("gemma-3-4b.json");
  ASSERT_EQ(gemma.layers.size(), 2u);
  EXPECT_EQ(gemma.head_dim, 256);
  const LayerRope& full = SelectLayerRope(gemma, "");
  EXPECT_EQ(full.layer_type, "full_attention");
  EXPECT_EQ(full.scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(full.scaling.theta, 1e6);
  const LayerRope& sliding = SelectLayerRope(gemma, "sliding_attention");
  EXPECT_EQ(sliding.scaling.type, RopeScalingType::kDefault);
  EXPECT_EQ(sliding.scaling.theta, 1e4);
  // Qwen2-VL: mrope -> default with sections.
  ModelConfig vl = Example("qwen2-vl-7b-instruct.json");
  EXPECT_EQ(vl.layers[0].scaling.type, RopeScalingType::kDefault);
  EXPECT_EQ(vl.layers[0].mrope_section, (std::vector<std::int64_t>{16, 24, 24}));
  EXPECT_EQ(vl.layers[0].mrope_layout, MRopeLayout::kSectioned);
  // GPT-NeoX naming.
  ModelConfig neox = Example("gpt-neox-20b.json");
  EXPECT_EQ(neox.head_dim, 96);
  EXPECT_EQ(ModelRopeScaling(neox, "", 0).rotary_dim, 24);
  EXPECT_EQ(neox.layers[0].scaling.theta, 10000.0);
  // gpt-oss: truncate false.
  EXPECT_EQ(Example("gpt-oss-20b.json").layers[0].scaling.truncate, YarnTruncate::kExact);
  // CodeLlama: rope_scaling null, theta 1e6.
  ModelConfig cl = Example("codellama-7b-instruct.json");
  EXPECT_EQ(cl.layers[0].scaling.type, RopeScalingType::kDefault);
  EXPECT_EQ(cl.layers[0].scaling.theta, 1e6);
}

TEST(ModelConfigSchema, GptjRotaryDimAndNestedPerLayerTypes) {
  ModelConfig gptj = ParseModelConfig(
      R"({"n_embd": 4096, "hidden_size": 4096, "num_attention_heads": 16, "rotary_dim": 64})",
      "gptj.json");
  EXPECT_EQ(ModelRopeScaling(gptj, "", 0).rotary_dim, 64);
  // Gemma 4 style nested rope_parameters.
  ModelConfig g4 = ParseModelConfig(R"({"head_dim": 256, "max_position_embeddings": 131072,
      "rope_parameters": {"full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                             "rope_theta": 1e6},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}})",
                                    "g4.json");
  ASSERT_EQ(g4.layers.size(), 2u);
  const RopeScaling full = ModelRopeScaling(g4, "full_attention", 0);
  EXPECT_EQ(full.type, RopeScalingType::kProportional);
  EXPECT_EQ(full.rotary_dim, 256);
  EXPECT_EQ(full.pairs[31].region, RopePairRegion::kKept);
  EXPECT_EQ(full.pairs[32].region, RopePairRegion::kUnrotated);
  EXPECT_EQ(ModelRopeScaling(g4, "sliding_attention", 0).rotary_dim, 256);
  EXPECT_EQ(SelectLayerRope(g4, "").layer_type, "full_attention");
  try {
    SelectLayerRope(g4, "chunked_attention");
    ADD_FAILURE();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("sliding_attention"), std::string::npos) << e.what();
  }
  // Qwen3-VL: interleaved sections.
  ModelConfig q3 = ParseModelConfig(R"({"text_config": {"head_dim": 128, "rope_theta": 5e5,
      "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": true}}})",
                                    "q3.json");
  EXPECT_EQ(q3.layers[0].mrope_layout, MRopeLayout::kInterleaved);
  EXPECT_EQ(q3.layers[0].scaling.theta, 5e5);
}

bool HasWarning(const ModelConfig& cfg, const std::string& needle) {
  for (const auto& w : cfg.warnings) {
    if (w.find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(ModelConfigWarnings, WhereHfOnlyWarns) {
  const std::string base =
      R"("head_dim": 64, "max_position_embeddings": 16384, "rope_parameters": )";
  auto parse = [&](const std::string& rope) {
    return ParseModelConfig("{" + base + rope + "}", "w.json");
  };
  EXPECT_TRUE(HasWarning(
      parse(R"({"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 4096,
                                   "beta_fast": 1, "beta_slow": 2})"),
      "beta_fast=1 is smaller than beta_slow=2"));
  EXPECT_TRUE(HasWarning(
      parse(R"({"rope_type": "yarn", "factor": 8, "original_max_position_embeddings": 4096})"),
      "explicit factor 8 differs"));
  const ModelConfig derived =
      parse(R"({"rope_type": "yarn", "original_max_position_embeddings": 4096})");
  EXPECT_TRUE(HasWarning(derived, "derived 4"));
  EXPECT_EQ(ModelRopeScaling(derived, "", 0).factor, 4.0);
  EXPECT_TRUE(HasWarning(parse(R"({"rope_type": "linear", "factor": 2, "low_freq_factor": 1})"),
                         "rope_parameters.low_freq_factor: unrecognized key"));
  EXPECT_TRUE(HasWarning(parse(R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 1,
                                   "high_freq_factor": 4, "original_max_position_embeddings": 16384})"),
                         "not below max_position_embeddings"));
  EXPECT_TRUE(HasWarning(parse(R"({"rope_type": "proportional", "rope_theta": 1e6})"),
                         "partial_rotary_factor"));
  // Each warning-only config still computes.
  EXPECT_NO_THROW(
      ModelRopeScaling(parse(R"({"rope_type": "yarn", "factor": 4, "beta_fast": 1, "beta_slow": 2,
                                             "original_max_position_embeddings": 4096})"),
                       "", 0));
}

// ------------------------------------------------------- bad-config suite --

struct BadConfig {
  const char* rule;
  const char* json;
  std::vector<const char*> needles;  // each must appear in the message
};

const BadConfig kBadConfigs[] = {
    {"unknown rope type lists the known ones",
     R"({"head_dim": 64, "rope_scaling": {"type": "ntk-by-parts", "factor": 2}})",
     {"bad.json: rope_scaling.type: got \"ntk-by-parts\"", "default, linear, dynamic", "longrope"}},
    {"rope type not a string",
     R"({"head_dim": 64, "rope_parameters": {"rope_type": 3}})",
     {"rope_parameters.rope_type: got 3 (number)", "a string"}},
    {"factor wrong type",
     R"({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": "8"}})",
     {"rope_scaling.factor: got \"8\" (string)", "a number >= 1"}},
    {"factor below one",
     R"({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 0.5}})",
     {"rope_scaling.factor: got 0.5", ">= 1"}},
    {"factor missing",
     R"({"head_dim": 64, "rope_scaling": {"rope_type": "linear"}})",
     {"rope_scaling.factor: got nothing (missing)"}},
    {"dynamic without max_position_embeddings",
     R"({"head_dim": 64, "rope_scaling": {"rope_type": "dynamic", "factor": 2}})",
     {"max_position_embeddings: got nothing", "dynamic"}},
    {"theta wrong type",
     R"({"head_dim": 64, "rope_theta": "1e4"})",
     {"rope_theta: got \"1e4\" (string)", "a number"}},
    {"theta not above one",
     R"({"head_dim": 64, "rope_theta": 0.5})",
     {"rope_theta: got 0.5", "> 1"}},
    {"no head dim",
     R"({"hidden_size": 4096})",
     {"head_dim: got nothing", "hidden_size and num_attention_heads"}},
    {"head dim wrong type",
     R"({"head_dim": "128"})",
     {"head_dim: got \"128\" (string)", "an integer"}},
    {"max position not an integer",
     R"({"head_dim": 64, "max_position_embeddings": 4096.5})",
     {"max_position_embeddings: got 4096.5", "an integer"}},
    {"partial rotary factor out of range",
     R"({"head_dim": 64, "partial_rotary_factor": 1.5})",
     {"partial_rotary_factor: got 1.5", "(0, 1]"}},
    {"partial rotary factor gives odd dim",
     R"({"head_dim": 64, "partial_rotary_factor": 0.3})",
     {"partial_rotary_factor: got 0.3", "even rotary dim", "= 19"}},
    {"gptj rotary_dim too large",
     R"({"head_dim": 64, "rotary_dim": 128})",
     {"rotary_dim: got 128", "<= head_dim (64)"}},
    {"rope dict not an object",
     R"({"head_dim": 64, "rope_scaling": [1, 2]})",
     {"rope_scaling: got [1,2] (array)", "an object"}},
    {"text_config not an object", R"({"text_config": 5})", {"text_config: got 5 (number)"}},
    {"top level not an object", R"([1])", {"(top level): got [1] (array)"}},
    {"yarn truncate wrong type",
     R"({"head_dim": 64, "max_position_embeddings": 8192, "rope_scaling": {"rope_type": "yarn", "factor": 2, "truncate": "no"}})",
     {"rope_scaling.truncate: got \"no\" (string)", "true or false"}},
    {"yarn beta wrong type",
     R"({"head_dim": 64, "max_position_embeddings": 8192, "rope_scaling": {"rope_type": "yarn", "factor": 2, "beta_fast": "32"}})",
     {"rope_scaling.beta_fast: got \"32\" (string)"}},
    {"yarn beta negative",
     R"({"head_dim": 64, "max_position_embeddings": 8192, "rope_scaling": {"rope_type": "yarn", "factor": 2, "beta_slow": -1}})",
     {"rope_scaling.beta_slow: got -1", ">= 0"}},
    {"yarn attention factor not positive",
     R"({"head_dim": 64, "max_position_embeddings": 8192, "rope_scaling": {"rope_type": "yarn", "factor": 2, "attention_factor": 0}})",
     {"rope_scaling.attention_factor: got 0", "> 0"}},
    {"yarn without factor or max",
     R"({"head_dim": 64, "rope_scaling": {"rope_type": "yarn", "original_max_position_embeddings": 4096}})",
     {"rope_scaling.factor: got nothing", "max_position_embeddings"}},
    {"yarn derived factor below one",
     R"({"head_dim": 64, "max_position_embeddings": 2048, "rope_scaling": {"rope_type": "yarn", "original_max_position_embeddings": 4096}})",
     {"rope_scaling.factor: got nothing (missing; max/original = 0.5)"}},
    {"original max not an integer",
     R"({"head_dim": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": "8k"}})",
     {"rope_scaling.original_max_position_embeddings: got \"8k\" (string)", "an integer"}},
    {"llama3 missing original and max",
     R"({"head_dim": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4}})",
     {"rope_scaling.original_max_position_embeddings: got nothing"}},
    {"llama3 missing low_freq_factor",
     R"({"head_dim": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8, "high_freq_factor": 4, "original_max_position_embeddings": 8192}})",
     {"rope_scaling.low_freq_factor: got nothing (missing)"}},
    {"llama3 high not above low",
     R"({"head_dim": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 4, "original_max_position_embeddings": 8192}})",
     {"rope_scaling.high_freq_factor: got 4", "> low_freq_factor (4)"}},
    {"longrope list missing",
     R"({"head_dim": 8, "max_position_embeddings": 8192, "original_max_position_embeddings": 4096, "rope_scaling": {"type": "longrope", "short_factor": [1, 1, 1, 1]}})",
     {"rope_scaling.long_factor: got nothing (missing)", "4 numbers"}},
    {"longrope list wrong length",
     R"({"head_dim": 8, "max_position_embeddings": 8192, "original_max_position_embeddings": 4096, "rope_scaling": {"type": "longrope", "short_factor": [1, 1, 1], "long_factor": [1, 1, 1, 1]}})",
     {"rope_scaling.short_factor: got a list of 3 numbers", "rotary_dim/2 = 4"}},
    {"longrope list element not a number",
     R"({"head_dim": 8, "max_position_embeddings": 8192, "original_max_position_embeddings": 4096, "rope_scaling": {"type": "longrope", "short_factor": [1, 1, "x", 1], "long_factor": [1, 1, 1, 1]}})",
     {"rope_scaling.short_factor[2]: got \"x\" (string)"}},
    {"longrope list element not positive",
     R"({"head_dim": 8, "max_position_embeddings": 8192, "original_max_position_embeddings": 4096, "rope_scaling": {"type": "longrope", "short_factor": [1, 1, 1, 1], "long_factor": [1, 0, 1, 1]}})",
     {"rope_scaling.long_factor[1]: got 0", "> 0"}},
    {"mrope_section wrong sum",
     R"({"head_dim": 128, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 16]}})",
     {"rope_scaling.mrope_section: got [16,24,16]", "summing to rotary_dim/2 = 64"}},
    {"mrope_section wrong shape",
     R"({"head_dim": 128, "rope_scaling": {"type": "mrope", "mrope_section": [32, 32]}})",
     {"rope_scaling.mrope_section: got [32,32] (array)", "3 integers"}},
    {"mrope_interleaved wrong type",
     R"({"head_dim": 128, "rope_scaling": {"type": "mrope", "mrope_section": [24, 20, 20], "mrope_interleaved": 1}})",
     {"rope_scaling.mrope_interleaved: got 1 (number)", "true or false"}},
    {"nested layer error names the layer",
     R"({"head_dim": 64, "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 0}, "sliding_attention": {}}})",
     {"rope_parameters.full_attention.factor: got 0"}},
    {"deepseek without qk_nope_head_dim",
     R"({"qk_rope_head_dim": 64, "max_position_embeddings": 163840, "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "mscale": 1, "mscale_all_dim": 1}})",
     {"qk_nope_head_dim: got nothing", "DeepSeek"}},
    {"text_config errors carry the prefix",
     R"({"text_config": {"head_dim": 64, "rope_theta": -3}})",
     {"text_config.rope_theta: got -3"}},
};

TEST(ModelConfigBadConfigs, OneMalformedConfigPerRule) {
  for (const BadConfig& bc : kBadConfigs) {
    SCOPED_TRACE(bc.rule);
    try {
      ParseModelConfig(bc.json, "bad.json");
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("bad.json: ", 0), 0u) << msg;
      for (const char* needle : bc.needles) EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(std::size(kBadConfigs), 37u);
}

// Found by reading the loader and by fuzz_model_config: deep nesting
// crashed the CLI (stack overflow printing the value), 1e400 escaped as
// nlohmann's out_of_range ("internal error").
TEST(ModelConfigBadConfigs, NestingAndNumberLimitsAreConfigErrors) {
  const auto expect_config_error = [](const std::string& text, const std::string& needle) {
    try {
      ParseModelConfig(text, "limits.json");
      FAIL() << "accepted: " << text.substr(0, 80);
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("limits.json: ", 0), 0u) << e.what();
    }
  };
  expect_config_error(std::string(100000, '[') + std::string(100000, ']'), "deeper than 64 levels");
  const std::string nested = std::string(65, '[') + std::string(65, ']');
  expect_config_error("{\"head_dim\": 64, \"x\": " + nested + "}", "deeper than 64 levels");
  expect_config_error("{\"head_dim\": 64, \"rope_theta\": 1e400}", "does not fit in a double");
  expect_config_error("{\"head_dim\": 64, \"rope_theta\": -1e400}", "does not fit in a double");
  // Nesting that real configs use still parses, unknown deep keys included.
  const ModelConfig ok = ParseModelConfig(
      "{\"head_dim\": 64, \"x\": " + std::string(20, '[') + std::string(20, ']') + "}", "ok.json");
  EXPECT_EQ(ok.head_dim, 64);
}

TEST(ModelConfigBadConfigs, UnreadableOrInvalidJsonIsIoError) {
  EXPECT_THROW(LoadModelConfig("/nonexistent/posenc/config.json"), IoError);
  try {
    ParseModelConfig("{\"head_dim\": 64,", "trunc.json");
    ADD_FAILURE();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("trunc.json: not valid JSON"), std::string::npos)
        << e.what();
  }
  const std::string dir = test::TempDir("model_config_bad");
  std::ofstream(dir + "/c.json") << R"({"head_dim": 64, "rope_scaling": {"type": "nope"}})";
  try {
    LoadModelConfig(dir + "/c.json");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/c.json: rope_scaling.type"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace posenc
