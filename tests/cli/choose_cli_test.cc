// `posenc choose`: the answer as text and JSON from the committed evidence
// file (the same dict as posenc.choose), a modified evidence file changing
// the ranking, and every user error as one line with its exit code (2 bad
// argument, 3 invalid config, 4 unreadable file or evidence).
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "test_util.h"

namespace posenc::test {
namespace {

using nlohmann::json;

std::string Quoted(const std::string& path) { return "'" + path + "'"; }

json Evidence() {
  std::ifstream in(SourcePath("docs/evidence/choose.json"));
  return json::parse(in);
}

std::string WriteEvidence(const json& e) {
  static const std::string dir = TempDir("choose_cli");
  const std::string path = dir + "/evidence.json";
  std::ofstream(path) << e.dump();
  return path;
}

int Lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(ChooseCli, JsonAnswerCarriesEvidenceForEveryReason) {
  const CliResult r = RunCli("choose --train-length 128 --target-length 512 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json a = json::parse(r.out);
  EXPECT_EQ(a["constraints"]["target_over_train"].get<double>(), 4.0);
  ASSERT_FALSE(a["candidates"].empty());
  EXPECT_EQ(a["candidates"][0]["verdict"], "recommended");
  std::string last = "recommended";
  for (const json& c : a["candidates"]) {
    const std::string v = c["verdict"];
    EXPECT_TRUE(v == "recommended" || v == "possible" || v == "ruled out") << v;
    if (last == "ruled out") {
      EXPECT_EQ(v, "ruled out") << "ruled out candidates come last";
    }
    last = v;
    ASSERT_FALSE(c["reasons"].empty()) << c["scheme"];
    for (const json& reason : c["reasons"]) {
      const json& e = reason["evidence"];
      ASSERT_TRUE(e.is_object()) << reason.dump();
      EXPECT_TRUE(e.contains("citation") ||
                  (e.contains("source") && e.contains("field") && e.contains("value")))
          << reason.dump();
    }
  }
  // The score is the committed default run's bits/byte at 4L of that row.
  const json ev = Evidence();
  const json& top = a["candidates"][0];
  const std::string scheme = top["scheme"];
  EXPECT_EQ(top["score_bits_per_byte"].get<double>(),
            ev["runs"][0]["rows"][scheme]["eval"]["512"]["bits_per_byte"].get<double>());
  // The learned table cannot serve 4L.
  for (const json& c : a["candidates"]) {
    if (c["scheme"] == "learned") {
      EXPECT_EQ(c["verdict"], "ruled out");
    }
  }
}

TEST(ChooseCli, TextShowsEveryCandidateAndTheEvidenceFiles) {
  const CliResult r = RunCli("choose --train-length 128 --target-length 512");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("posenc choose: decoder, trained at 128, used at 512 (4x)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" 1. "), std::string::npos);
  EXPECT_NE(r.out.find("recommended"), std::string::npos);
  EXPECT_NE(r.out.find("[docs/experiments/extrapolation/results.json: schemes."),
            std::string::npos);
  EXPECT_NE(r.out.find("evidence: "), std::string::npos);
}

TEST(ChooseCli, ModifiedEvidenceChangesTheAnswer) {
  json e = Evidence();
  // Make the none row the best at 4L by far in every run.
  for (json& run : e["runs"]) {
    if (!run["rows"].contains("none")) continue;
    for (auto& [len, v] : run["rows"]["none"]["eval"].items()) v["bits_per_byte"] = 1.0;
  }
  const CliResult r = RunCli("choose --train-length 128 --target-length 512 --json --evidence " +
                             Quoted(WriteEvidence(e)));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json a = json::parse(r.out);
  EXPECT_EQ(a["candidates"][0]["scheme"], "none");
  const CliResult before = RunCli("choose --train-length 128 --target-length 512 --json");
  EXPECT_NE(json::parse(before.out)["candidates"][0]["scheme"], "none");
}

TEST(ChooseCli, FromConfigAndGguf) {
  const CliResult r = RunCli("choose --from " +
                             Quoted(SourcePath("examples/configs/qwen2.5-7b-instruct-yarn.json")) +
                             " --target-length 262144 --finetune full");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("config.json change (JSON merge patch): "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checked by posenc's loader: rope type yarn, factor 8"), std::string::npos)
      << r.out;
  const CliResult g = RunCli("choose --json --target-length 16384 --from " +
                             Quoted(SourcePath("tests/golden/gguf/a_llama2_7b_plain.gguf")));
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const json a = json::parse(g.out);
  bool yarn = false;
  for (const json& c : a["candidates"]) {
    if (c["scheme"] != "rope+yarn") continue;
    yarn = true;
    EXPECT_EQ(c["config"]["llama.cpp"],
              "--rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 4096 -c 16384");
    EXPECT_EQ(c["config"]["keys"]["llama.rope.scaling.type"], "yarn");
  }
  EXPECT_TRUE(yarn) << g.out;
}

TEST(ChooseCli, EngineRulesOut) {
  const CliResult r =
      RunCli("choose --json --train-length 128 --target-length 512 --engine flash-attention");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json answer = json::parse(r.out);  // a range-for over a temporary's member dangles
  for (const json& c : answer["candidates"]) {
    if (c["scheme"] == "shaw" || c["scheme"] == "t5" || c["scheme"] == "fire") {
      EXPECT_EQ(c["verdict"], "ruled out") << c.dump();
    }
  }
}

TEST(ChooseCli, UserErrorsAreOneLineWithTheirExitCode) {
  struct Case {
    std::string args;
    int code;
    std::string message;
  };
  const std::string dir = TempDir("choose_cli_errors");
  std::ofstream(dir + "/bad.json")
      << R"({"hidden_size": 64, "num_attention_heads": 2, "rope_scaling": {"rope_type": "yarn", "factor": "8"}})";
  std::ofstream(dir + "/malformed.json") << "{\"runs\": [";
  const Case cases[] = {
      {"choose --architecture transformer", 2,
       "--architecture: got 'transformer', expected one of decoder, encoder, encoder-decoder, "
       "vision, video"},
      {"choose --engine tgi", 2, "--engine: got 'tgi', expected one of transformers, vllm"},
      {"choose --finetune lots", 2, "--finetune: got 'lots', expected one of none, short, full"},
      {"choose --train-length 0", 2, "--train-length: got 0, expected a positive integer"},
      {"choose --target-length -5", 2, "--target-length: got -5, expected a positive integer"},
      {"choose --from " + Quoted(dir + "/none.json"), 4, "none.json"},
      {"choose --from " + Quoted(dir + "/bad.json"), 3, "rope_scaling.factor"},
      {"choose --evidence " + Quoted(dir + "/missing.json"), 4, "missing.json"},
      {"choose --evidence " + Quoted(dir + "/malformed.json"), 4, "malformed.json"},
  };
  for (const Case& c : cases) {
    const CliResult r = RunCli(c.args);
    EXPECT_EQ(r.exit_code, c.code) << c.args << "\n" << r.err;
    EXPECT_EQ(Lines(r.err), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args;
  }
}

}  // namespace
}  // namespace posenc::test
