// `posenc inspect` and `posenc table rope --config`: text and JSON output
// against the golden fixtures, warnings on stderr, user errors as one line;
// GGUF files (tests/golden/gguf/) give the same JSON as their config.json.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "test_util.h"

namespace posenc::test {
namespace {

using nlohmann::json;

std::string Cfg(const std::string& name) {
  return "'" + SourcePath("examples/configs/" + name) + "'";
}

const json& Case(const std::string& name) {
  for (const json& c : Golden("rope_init.json")["cases"]) {
    if (c["name"] == name) return c;
  }
  throw std::runtime_error("no case " + name);
}

TEST(InspectCli, JsonKeysAndGoldenValues) {
  const auto r = RunCli("inspect " + Cfg("llama-3.1-8b.json") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  for (const char* key :
       {"rope_type", "head_dim", "rotary_dim", "theta", "attention_factor", "inv_freq",
        "max_position_embeddings", "original_max_position_embeddings", "pairs"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["rope_type"], "llama3");
  EXPECT_EQ(j["head_dim"], 128);
  EXPECT_EQ(j["rotary_dim"], 128);
  EXPECT_EQ(j["theta"], 500000.0);
  EXPECT_EQ(j["max_position_embeddings"], 131072);
  EXPECT_EQ(j["original_max_position_embeddings"], 8192);
  const json& want = Case("llama3.1_8b_llama3")["inv_freq"];
  ASSERT_EQ(j["inv_freq"].size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    // float32 values printed in full: parse as double, cast to float.
    const float got = static_cast<float>(j["inv_freq"][i].get<double>());
    EXPECT_NEAR(got, want[i].get<double>(), 1e-6 * want[i].get<double>()) << i;
    EXPECT_EQ(static_cast<double>(got), j["inv_freq"][i].get<double>());
  }
  ASSERT_EQ(j["pairs"].size(), 64u);
  EXPECT_EQ(j["pairs"][0]["region"], "kept");
  EXPECT_EQ(j["pairs"][63]["region"], "interpolated");
  EXPECT_NEAR(j["pairs"][63]["ratio_to_default"].get<double>(), 0.125, 1e-7);
  EXPECT_NEAR(j["pairs"][0]["wavelength"].get<double>(), 2 * M_PI, 1e-12);
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(InspectCli, TextSummaryAndDeepSeekCorrection) {
  const auto r = RunCli("inspect " + Cfg("deepseek-v3.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rope type: yarn"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("head dim: 64   rotary dim: 64   pairing: interleaved"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("context: original 4096 -> extended 163840"), std::string::npos);
  EXPECT_NE(r.out.find("DeepSeek softmax scale: 0.13523377886088"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("yarn correction range (pairs): [10, 23] (truncated)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("blended"), std::string::npos);
  const auto j = json::parse(RunCli("inspect " + Cfg("deepseek-v3.json") + " --json").out);
  const json& diag = Case("deepseek_v3_yarn")["derived_diagnostics"]["deepseek_softmax_scale"];
  EXPECT_NEAR(j["deepseek_softmax_scale"].get<double>(), diag["value"].get<double>(), 1e-15);
}

TEST(InspectCli, SeqLenLayerTypeAndLongRopePolicy) {
  auto j = json::parse(
      RunCli("inspect " + Cfg("phi-3.5-mini-instruct.json") + " --json --seq-len 4096").out);
  EXPECT_EQ(j["longrope_factors"], "short_factor");
  j = json::parse(
      RunCli("inspect " + Cfg("phi-3.5-mini-instruct.json") + " --json --seq-len 4097").out);
  EXPECT_EQ(j["longrope_factors"], "long_factor");
  j = json::parse(RunCli("inspect " + Cfg("phi-3.5-mini-instruct.json") +
                         " --json --seq-len 10 --longrope-switch always_long")
                      .out);
  EXPECT_EQ(j["longrope_factors"], "long_factor");
  EXPECT_NEAR(j["attention_factor"].get<double>(), 1.1902380714238083, 1e-15);
  j = json::parse(
      RunCli("inspect " + Cfg("gemma-3-4b.json") + " --json --layer-type sliding_attention").out);
  EXPECT_EQ(j["rope_type"], "default");
  EXPECT_EQ(j["theta"], 10000.0);
  j = json::parse(RunCli("inspect " + Cfg("gemma-3-4b.json") + " --json").out);
  EXPECT_EQ(j["rope_type"], "linear");
  EXPECT_EQ(j["layer_type"], "full_attention");
}

TEST(InspectCli, WarningsOnStderr) {
  const std::string dir = TempDir("inspect_warn");
  std::ofstream(dir + "/c.json") << R"({"head_dim": 64, "max_position_embeddings": 8192,
      "rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 4096}})";
  const auto r = RunCli("inspect '" + dir + "/c.json'");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.err.find("posenc: warning: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("explicit factor 4 differs"), std::string::npos) << r.err;
}

TEST(InspectCli, UserErrorsAreOneLine) {
  const std::string dir = TempDir("inspect_bad");
  std::ofstream(dir + "/bad.json") << R"({"head_dim": 64, "rope_scaling": {"type": "warp"}})";
  auto r = RunCli("inspect '" + dir + "/bad.json'");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("rope_scaling.type: got \"warp\""), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
  r = RunCli("inspect /nonexistent/config.json");
  EXPECT_EQ(r.exit_code, 4);
  // Text that is not JSON is an I/O error (exit 4), as in C++ (IoError), C
  // (POSENC_ERROR_IO) and Python (posenc.IoError); exit 3 is for unusable JSON.
  std::ofstream(dir + "/trunc.json") << R"({"head_dim": 64, "rope_scaling": )";
  r = RunCli("inspect '" + dir + "/trunc.json'");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("trunc.json: not valid JSON"), std::string::npos) << r.err;
  r = RunCli("inspect " + Cfg("gemma-3-4b.json") + " --layer-type chunked");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--layer-type: got chunked"), std::string::npos) << r.err;
  r = RunCli("inspect " + Cfg("llama-3.1-8b.json") + " --seq-len -5");
  EXPECT_EQ(r.exit_code, 2);
  r = RunCli("inspect " + Cfg("llama-3.1-8b.json") + " --numerics fast");
  EXPECT_EQ(r.exit_code, 2);
  r = RunCli("inspect --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--layer-type"), std::string::npos);
}

std::string Gguf(const std::string& name) {
  return "'" + SourcePath("tests/golden/gguf/" + name) + "'";
}

TEST(InspectCli, GgufGivesTheJsonOfItsConfig) {
  const auto g = RunCli("inspect " + Gguf("b_llama31_8b_llama3_rope_freqs.gguf") + " --json");
  const auto h = RunCli("inspect " + Cfg("llama-3.1-8b.json") + " --json");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  ASSERT_EQ(h.exit_code, 0) << h.err;
  const json jg = json::parse(g.out), jh = json::parse(h.out);
  for (const auto& [key, value] : jh.items()) EXPECT_TRUE(jg.contains(key)) << key;
  EXPECT_EQ(jg["format"], "gguf");
  EXPECT_EQ(jh["format"], "config.json");
  EXPECT_EQ(jg["position_encoding"], "rope");
  EXPECT_EQ(jg["model_type"], "llama");
  EXPECT_EQ(jg["theta"], 500000.0);
  EXPECT_EQ(jg["head_dim"], 128);
  EXPECT_EQ(jg["rotary_dim"], 128);
  EXPECT_EQ(jg["pairing"], "interleaved");  // llama.cpp NORM on the converter's permuted q/k
  EXPECT_EQ(jg["freq_factors"].size(), 64u);
  ASSERT_EQ(jg["inv_freq"].size(), jh["inv_freq"].size());
  for (std::size_t i = 0; i < jh["inv_freq"].size(); ++i) {
    const double want = jh["inv_freq"][i].get<double>();
    const double got = jg["inv_freq"][i].get<double>();
    EXPECT_LE(std::abs(got - want), 4 * std::ldexp(1.0, -24) * want) << i;
  }
  const auto text = RunCli("inspect " + Gguf("e_phi2_partial_rotary.gguf"));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("(phi2) [GGUF]"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("head dim: 80   rotary dim: 32   pairing: half_split"), std::string::npos)
      << text.out;
}

TEST(InspectCli, GgufAlibiModelShowsSlopes) {
  const auto r = RunCli("inspect " + Gguf("f_bloom_alibi.gguf") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["position_encoding"], "alibi");
  EXPECT_EQ(j["num_heads"], 32);
  EXPECT_EQ(j["max_bias"], 8.0);
  ASSERT_EQ(j["slopes"].size(), 32u);
  EXPECT_EQ(j["slopes"][0].get<double>(), std::exp2(-0.25));
  EXPECT_EQ(j["slopes"][31].get<double>(), std::exp2(-8.0));
  const auto text = RunCli("inspect " + Gguf("f_bloom_alibi.gguf"));
  EXPECT_NE(text.out.find("position encoding: ALiBi, 32 heads, max bias 8"), std::string::npos)
      << text.out;
}

TEST(InspectCli, BrokenGgufIsAnIoErrorLine) {
  for (const char* name : {"g_truncated_in_kv.gguf", "h_nkv_2pow40.gguf"}) {
    const auto r = RunCli("inspect " + Gguf(name));
    EXPECT_EQ(r.exit_code, 4) << name;
    EXPECT_TRUE(r.out.empty());
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(name), std::string::npos) << r.err;
  }
  const auto t = RunCli("table rope --config " + Gguf("d_llama_linear_x2.gguf") +
                        " --positions 3 --format csv");
  EXPECT_EQ(t.exit_code, 0) << t.err;
}

}  // namespace
}  // namespace posenc::test
