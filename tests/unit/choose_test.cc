// posenc/choose.h: every rule on a small synthetic evidence file (so a rule is
// tested whatever the committed measurements say), the ranking following the
// evidence when the file changes, the config change of every golden config
// loaded back by posenc's loader, and every bad input.
#include "posenc/choose.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "posenc/error.h"
#include "posenc/model_config.h"
#include "test_util.h"

namespace posenc {
namespace {

using nlohmann::json;

json Row(const std::string& trained_as, double at1, json at2, json at4, const std::string& feature,
         const std::string& bench = "none") {
  json eval = {{"128", {{"bits_per_byte", at1}, {"field", "f128"}}},
               {"256", {{"bits_per_byte", at2}, {"field", "f256"}}},
               {"512", {{"bits_per_byte", at4}, {"field", "f512"}}}};
  for (auto& [k, v] : eval.items()) {
    if (v["bits_per_byte"].is_null()) v["error"] = "positions[128]: got 128, past the table";
  }
  return {{"source", "runs/default.json"}, {"train_length", 128},   {"steps", 1000},
          {"trained_as", trained_as},      {"eval", eval},          {"positional_params", 0},
          {"val_drop_last_quarter", 0.05}, {"bench_scheme", bench}, {"feature", feature}};
}

json Support(const std::string& flash) {
  json yes = {{"transformers", {"yes", "src A"}},
              {"vllm", {"yes", "src B"}},
              {"llama.cpp", {"yes", "src C"}},
              {"flash-attention", {flash, "src D"}},
              {"sdpa", {"partial", "src E"}}};
  return yes;
}

// A default run and a "3x" run; the 3x run disagrees on rope+yarn vs rope+ntk.
json Evidence() {
  json rows = {
      {"none", Row("none", 3.5, 3.55, 3.6, "none")},
      {"learned", Row("learned", 3.0, nullptr, nullptr, "learned")},
      {"rope", Row("rope", 2.5, 3.0, 3.8, "rope", "rope")},
      {"rope+yarn", Row("rope", 2.5, 2.6, 2.80, "rope:yarn", "rope")},
      {"rope+ntk", Row("rope", 2.5, 2.6, 2.83, "rope:dynamic", "rope")},
      {"rope+yarn+ft", Row("rope", 2.45, 2.5, 2.60, "rope:yarn", "rope")},
      {"alibi", Row("alibi", 2.7, 2.7, 2.7, "alibi", "alibi")},
      {"t5", Row("t5", 2.6, 2.7, 2.95, "t5", "t5")},
  };
  rows["rope+yarn"]["extension"] = {{"rope_type", "yarn"}};
  rows["rope+ntk"]["extension"] = {{"rope_type", "dynamic"}};
  rows["rope+yarn+ft"]["finetune"] = {
      {"length", 512}, {"steps", 100}, {"tokens", 409600}, {"fraction_of_pretraining", 0.05}};
  json rows3 = {{"rope+yarn", Row("rope", 2.2, 2.3, 2.6, "rope:yarn", "rope")},
                {"rope+ntk", Row("rope", 2.2, 2.3, 2.5, "rope:dynamic", "rope")},
                {"alibi", Row("alibi", 2.3, 2.3, 2.3, "alibi", "alibi")}};
  for (auto& [k, v] : rows3.items()) v["source"] = "runs/3x.json";
  json features = json::object();
  for (const char* f : {"none", "learned", "rope", "rope:yarn", "rope:dynamic", "alibi"}) {
    features[f] = Support("yes");
  }
  features["t5"] = Support("no");
  json lit = {{"encoder",
               {{{"scheme", "rope"},
                 {"verdict", "recommended"},
                 {"feature", "rope"},
                 {"text", "T1"},
                 {"citation", "Paper A"}},
                {{"scheme", "learned"},
                 {"verdict", "possible"},
                 {"feature", "learned"},
                 {"text", "T2"},
                 {"citation", "Paper B"}}}},
              {"decoder", json::array()}};
  return {{"format", 1},
          {"engines", {{"transformers", "HF"}}},
          {"runs",
           {{{"name", "default"}, {"files", {{{"source", "runs/default.json"}}}}, {"rows", rows}},
            {{"name", "3x"}, {"files", {{{"source", "runs/3x.json"}}}}, {"rows", rows3}}}},
          {"cost",
           {{"source", "bench.json"},
            {"shape", {{"seq", 2048}, {"heads", 8}, {"head_dim", 64}}},
            {"schemes",
             {{"none", {{"forward_backward_relative_to_none", 1.0}, {"field", "results[0]"}}},
              {"rope", {{"forward_backward_relative_to_none", 1.1}, {"field", "results[1]"}}},
              {"alibi", {{"forward_backward_relative_to_none", 1.05}, {"field", "results[2]"}}},
              {"t5", {{"forward_backward_relative_to_none", 1.2}, {"field", "results[3]"}}}}}}},
          {"support", features},
          {"literature", lit},
          {"finetune_literature",
           {{"rope:yarn", {{"text", "YaRN fine-tunes"}, {"citation", "Peng et al. 2023"}}}}}};
}

// Files of this test, in one temporary directory made once (TempDir empties
// the directory it returns).
std::string Write(const std::string& name, const std::string& text) {
  static const std::string dir = test::TempDir("choose_test");
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

json Ask(const ChooseRequest& r, const json& evidence = Evidence()) {
  return json::parse(ChooseEncodingJson(r, Write("evidence.json", evidence.dump())));
}

ChooseRequest Decoder(std::int64_t train, std::int64_t target,
                      FinetuneBudget ft = FinetuneBudget::kNone) {
  ChooseRequest r;
  r.train_length = train;
  r.target_length = target;
  r.finetune = ft;
  return r;
}

const json& Candidate(const json& answer, const std::string& scheme) {
  for (const json& c : answer["candidates"]) {
    if (c["scheme"] == scheme) return c;
  }
  static const json none;
  ADD_FAILURE() << "no candidate " << scheme << " in " << answer.dump();
  return none;
}

std::vector<std::string> Order(const json& answer) {
  std::vector<std::string> out;
  for (const json& c : answer["candidates"]) out.push_back(c["scheme"]);
  return out;
}

bool HasReason(const json& c, const std::string& text_part) {
  for (const json& r : c["reasons"]) {
    if (r["text"].get<std::string>().find(text_part) != std::string::npos) return true;
  }
  return false;
}

const json& ReasonWith(const json& c, const std::string& text_part) {
  for (const json& r : c["reasons"]) {
    if (r["text"].get<std::string>().find(text_part) != std::string::npos) return r;
  }
  static const json none;
  ADD_FAILURE() << "no reason with '" << text_part << "' in " << c.dump();
  return none;
}

TEST(Choose, DecoderRankedByBitsPerByteAtTheTargetMultiple) {
  const json a = Ask(Decoder(1024, 4096));
  EXPECT_EQ(a["constraints"]["target_over_train"].get<double>(), 4.0);
  // At 4L: alibi 2.70 < yarn 2.80 < ntk 2.83 < t5 2.95 < none 3.6 < rope 3.8;
  // the fine-tuned row and the learned table are ruled out.
  const std::vector<std::string> want = {"alibi", "rope+yarn", "rope+ntk",     "t5",
                                         "none",  "rope",      "rope+yarn+ft", "learned"};
  EXPECT_EQ(Order(a), want);
  EXPECT_EQ(Candidate(a, "alibi")["verdict"], "recommended");
  EXPECT_EQ(Candidate(a, "rope+yarn")["verdict"], "possible");  // 3.7 % behind: > tolerance
  EXPECT_EQ(Candidate(a, "learned")["verdict"], "ruled out");
  EXPECT_EQ(Candidate(a, "rope+yarn+ft")["verdict"], "ruled out");
  // The evidence of the measured reason: file, field and value.
  const json& r = ReasonWith(Candidate(a, "alibi"), "measured extrapolation");
  EXPECT_EQ(r["evidence"]["source"], "runs/default.json");
  EXPECT_EQ(r["evidence"]["field"], "f512");
  EXPECT_EQ(r["evidence"]["value"].get<double>(), 2.7);
  const json& cost = ReasonWith(Candidate(a, "alibi"), "measured cost");
  EXPECT_EQ(cost["evidence"]["source"], "bench.json");
  EXPECT_EQ(cost["evidence"]["value"].get<double>(), 1.05);
  EXPECT_TRUE(HasReason(Candidate(a, "learned"), "past the table"));
  EXPECT_TRUE(HasReason(Candidate(a, "rope+yarn+ft"), "needs fine-tuning"));
}

TEST(Choose, WithinToleranceBothRecommended) {
  json e = Evidence();
  e["runs"][0]["rows"]["rope+yarn"]["eval"]["512"]["bits_per_byte"] = 2.72;  // 0.7 % behind
  const json a = Ask(Decoder(128, 512), e);
  EXPECT_EQ(Candidate(a, "alibi")["verdict"], "recommended");
  EXPECT_EQ(Candidate(a, "rope+yarn")["verdict"], "recommended");
  EXPECT_TRUE(HasReason(Candidate(a, "rope+yarn"), "cannot tell them apart"));
}

TEST(Choose, SwappingTheEvidenceChangesTheRanking) {
  json e = Evidence();
  e["runs"][0]["rows"]["t5"]["eval"]["512"]["bits_per_byte"] = 2.1;
  const json a = Ask(Decoder(128, 512), e);
  EXPECT_EQ(Order(a).front(), "t5");
  EXPECT_EQ(Candidate(a, "t5")["verdict"], "recommended");
  EXPECT_EQ(Candidate(a, "alibi")["verdict"], "possible");
  EXPECT_EQ(Order(Ask(Decoder(128, 512))).front(), "alibi");
}

TEST(Choose, RunsThatDisagreeAreSaid) {
  const json a = Ask(Decoder(128, 512));
  // Default: yarn 2.80 ahead of ntk 2.83; 3x: ntk 2.5 ahead of yarn 2.6.
  const json& r = ReasonWith(Candidate(a, "rope+ntk"), "disagree on it against rope+yarn");
  EXPECT_EQ(r["evidence"]["value"]["3x"]["rope+ntk"].get<double>(), 2.5);
  EXPECT_TRUE(HasReason(Candidate(a, "rope+yarn"), "stable: alibi is ahead of it"));
  EXPECT_TRUE(HasReason(Candidate(a, "t5"), "measured in the default run only"));
}

TEST(Choose, FinetuneBudgets) {
  // short: the fine-tuned row (5 % of the pre-training tokens) is possible at most.
  const json s = Ask(Decoder(128, 512, FinetuneBudget::kShort));
  EXPECT_EQ(Order(s).front(), "alibi");
  EXPECT_EQ(Candidate(s, "rope+yarn+ft")["verdict"], "possible");
  EXPECT_TRUE(HasReason(Candidate(s, "rope+yarn+ft"), "more fine-tuning than 'short'"));
  // Short enough: it wins on its score (2.60 at 4L).
  json e = Evidence();
  e["runs"][0]["rows"]["rope+yarn+ft"]["finetune"]["fraction_of_pretraining"] = 0.005;
  const json s2 = Ask(Decoder(128, 512, FinetuneBudget::kShort), e);
  EXPECT_EQ(Order(s2).front(), "rope+yarn+ft");
  EXPECT_EQ(Candidate(s2, "rope+yarn+ft")["verdict"], "recommended");
  // full without --from: trained at the target, so ranked at L (no extension rows).
  const json f = Ask(Decoder(128, 512, FinetuneBudget::kFull));
  EXPECT_EQ(Order(f).front(), "rope");  // 2.5 at L, before t5 2.6
  EXPECT_EQ(Candidate(f, "learned")["verdict"], "possible");
  for (const json& c : f["candidates"]) {
    EXPECT_EQ(c["scheme"].get<std::string>().find('+'), std::string::npos) << c["scheme"];
  }
}

TEST(Choose, TargetWithinTrainLengthHasNoExtensionRows) {
  const json a = Ask(Decoder(4096, 4096));
  EXPECT_EQ(Order(a).front(), "rope");
  for (const json& c : a["candidates"]) {
    EXPECT_EQ(c["scheme"].get<std::string>().find('+'), std::string::npos);
  }
}

TEST(Choose, EnginesRuleOutAndCap) {
  ChooseRequest r = Decoder(128, 512);
  r.engines = {InferenceEngine::kFlashAttention};
  const json a = Ask(r);
  EXPECT_EQ(Candidate(a, "t5")["verdict"], "ruled out");
  EXPECT_TRUE(HasReason(Candidate(a, "t5"), "flash-attention lacks it (src D)"));
  EXPECT_EQ(Candidate(a, "alibi")["verdict"], "recommended");
  r.engines = {InferenceEngine::kSdpa};
  const json b = Ask(r);
  EXPECT_EQ(Candidate(b, "alibi")["verdict"], "possible");  // partial in sdpa
  const json& why = ReasonWith(Candidate(b, "alibi"), "sdpa supports it only partly");
  EXPECT_EQ(why["evidence"]["field"], "features.alibi.sdpa");
}

TEST(Choose, EncoderFromTheLiterature) {
  ChooseRequest r = Decoder(512, 2048);
  r.architecture = ModelArchitecture::kEncoder;
  const json a = Ask(r);
  EXPECT_EQ(Order(a), (std::vector<std::string>{"rope", "learned"}));
  EXPECT_EQ(Candidate(a, "rope")["verdict"], "recommended");
  EXPECT_EQ(ReasonWith(Candidate(a, "rope"), "from the literature")["evidence"]["citation"],
            "Paper A");
  EXPECT_TRUE(HasReason(Candidate(a, "rope"), "not measured"));
  EXPECT_EQ(Candidate(a, "learned")["verdict"], "ruled out");
  r.architecture = ModelArchitecture::kVideo;  // nothing in this file's literature
  EXPECT_TRUE(Ask(r)["candidates"].empty());
}

TEST(Choose, FromAnExistingModelGivesTheCheckedChange) {
  ChooseRequest r;
  r.from = test::SourcePath("examples/configs/mistral-7b-instruct-v0.2.json");
  r.target_length = 4 * 32768;
  const json a = Ask(r);
  EXPECT_EQ(a["constraints"]["train_length"], 32768);
  EXPECT_EQ(a["constraints"]["model"]["scheme"], "rope");
  // Only rope rows; the alibi and t5 rows are not ways to extend a RoPE model.
  for (const json& c : a["candidates"]) {
    EXPECT_EQ(c["scheme"].get<std::string>().rfind("rope", 0), 0u) << c["scheme"];
  }
  const json& yarn = Candidate(a, "rope+yarn")["config"];
  EXPECT_EQ(yarn["merge_patch"]["rope_scaling"]["rope_type"], "yarn");
  EXPECT_EQ(yarn["merge_patch"]["rope_scaling"]["factor"].get<double>(), 4.0);
  EXPECT_EQ(yarn["merge_patch"]["rope_scaling"]["original_max_position_embeddings"], 32768);
  EXPECT_EQ(yarn["checked"]["rope_type"], "yarn");
  EXPECT_EQ(yarn["checked"]["max_position_embeddings"], 131072);
  EXPECT_NEAR(yarn["checked"]["attention_factor"].get<double>(), 0.1 * std::log(4.0) + 1, 1e-6);
  // dynamic keeps max_position_embeddings at the train length (HF's formula).
  const json& ntk = Candidate(a, "rope+ntk")["config"];
  EXPECT_EQ(ntk["merge_patch"]["max_position_embeddings"], 32768);
}

// Every candidate's change, applied to the file, loads and gives what the
// answer says it checked.
void ExpectChangesLoad(const json& answer, const std::string& original, const std::string& name,
                       int at_least) {
  int changes = 0;
  for (const json& c : answer["candidates"]) {
    if (!c.contains("config") || !c["config"].contains("checked")) continue;
    const json& cfg = c["config"];
    ASSERT_TRUE(cfg["checked"]["loaded"].get<bool>());
    if (cfg["format"] == "config.json") {
      json text = json::parse(original);
      text.merge_patch(cfg["merge_patch"]);
      const ModelConfig changed = ParseModelConfig(text.dump(), name);
      const RopeScaling s = ModelRopeScaling(changed, "", 0);
      EXPECT_EQ(RopeScalingTypeName(s.type), cfg["checked"]["rope_type"]) << name << c["scheme"];
      EXPECT_EQ(changed.max_position_embeddings, cfg["checked"]["max_position_embeddings"]);
    } else {
      EXPECT_FALSE(cfg["keys"].empty()) << name;
    }
    ++changes;
  }
  EXPECT_GE(changes, at_least) << name << ": " << answer.dump();
}

TEST(Choose, EveryGoldenConfigRoundTripsThroughTheLoader) {
  const std::string evidence = test::SourcePath("docs/evidence/choose.json");
  int n = 0;
  for (const json& c : test::Golden("rope_init.json")["cases"]) {
    for (bool legacy : {false, true}) {
      const std::string text = test::GoldenCaseConfig(c, legacy);
      const std::string path = Write(c["name"].get<std::string>() + ".json", text);
      ChooseRequest r;
      r.from = path;
      const std::int64_t train = LoadModelConfig(path).original_max_position_embeddings;
      r.target_length = 4 * train;
      r.finetune = FinetuneBudget::kFull;
      const json a = json::parse(ChooseEncodingJson(r, evidence));
      ExpectChangesLoad(a, text, path, 4);  // rope, pi, ntk, yarn (+ the fine-tuned rows)
      ++n;
    }
  }
  EXPECT_EQ(n, 30);
  for (const char* f : {"a_llama2_7b_plain.gguf", "b_llama31_8b_llama3_rope_freqs.gguf",
                        "d_llama_linear_x2.gguf", "e_phi2_partial_rotary.gguf"}) {
    ChooseRequest r;
    r.from = test::SourcePath(std::string("tests/golden/gguf/") + f);
    r.target_length = 1 << 20;
    r.finetune = FinetuneBudget::kFull;
    const json a = json::parse(ChooseEncodingJson(r, evidence));
    EXPECT_EQ(a["constraints"]["engines"], json({"llama.cpp"}));
    ExpectChangesLoad(a, "", f, 3);  // rope, pi, yarn: llama.cpp has no dynamic NTK
  }
  ChooseRequest bloom;
  bloom.from = test::SourcePath("tests/golden/gguf/f_bloom_alibi.gguf");
  bloom.target_length = 8192;
  const json b = json::parse(ChooseEncodingJson(bloom, evidence));
  EXPECT_EQ(b["candidates"][0]["scheme"], "alibi");
  EXPECT_EQ(b["candidates"][0]["config"]["change"], "none");
}

TEST(Choose, BadInput) {
  EXPECT_THROW(
      {
        try {
          ParseModelArchitecture("transformer", "--architecture");
        } catch (const InvalidArgument& e) {
          EXPECT_STREQ(e.what(),
                       "--architecture: got 'transformer', expected one of decoder, encoder, "
                       "encoder-decoder, vision, video");
          throw;
        }
      },
      InvalidArgument);
  EXPECT_THROW(ParseInferenceEngine("tgi"), InvalidArgument);
  EXPECT_THROW(ParseFinetuneBudget("some"), InvalidArgument);
  EXPECT_THROW(Ask(Decoder(-1, 10)), InvalidArgument);
  const std::string missing = Write("present.json", "") + ".missing";
  try {
    ChooseEncodingJson(Decoder(1, 2), missing);
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  EXPECT_THROW(ChooseEncodingJson(Decoder(1, 2), Write("bad.json", "{\"runs\": [")), IoError);
  EXPECT_THROW(ChooseEncodingJson(Decoder(1, 2), Write("nokeys.json", "{\"runs\": []}")), IoError);
  ChooseRequest r;
  r.from = Write("present.json", "") + ".no-such-config";
  EXPECT_THROW(Ask(r), IoError);
  r.from = Write("invalid.json", R"({"rope_scaling": {"rope_type": "yarn", "factor": "x"}})");
  EXPECT_THROW(Ask(r), ConfigError);
}

}  // namespace
}  // namespace posenc
