// `posenc table rope`: values, layouts, formats and errors of the command.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "posenc/npy.h"
#include "test_util.h"

namespace posenc::test {
namespace {

// Float64 truth of theta^(-2j/d).
double InvFreq(std::int64_t j, std::int64_t rotary_dim, double theta) {
  return std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(rotary_dim));
}

nlohmann::json RunJson(const std::string& args) {
  const CliResult r = RunCli("table rope " + args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return nlohmann::json::parse(r.out);
}

TEST(TableRopeCli, JsonHalfSplitValues) {
  const auto j = RunJson("--positions 3 --offset 4 --dim 8");
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j["positions"], nlohmann::json({4, 5, 6}));
  ASSERT_EQ(j["cos"].size(), 3u);
  for (std::size_t r = 0; r < 3; ++r) {
    ASSERT_EQ(j["cos"][r].size(), 8u);
    for (std::int64_t c = 0; c < 8; ++c) {
      const double a = static_cast<double>(4 + r) * InvFreq(c % 4, 8, 1e4);  // cat(freqs, freqs)
      const double got_c = j["cos"][r][c], got_s = j["sin"][r][c];
      EXPECT_EQ(got_c, static_cast<float>(got_c)) << "a float32 value";
      EXPECT_NEAR(got_c, std::cos(a), 6e-8);
      EXPECT_NEAR(got_s, std::sin(a), 6e-8);
    }
  }
}

TEST(TableRopeCli, InterleavedPartialRotaryAndTheta) {
  const auto j = RunJson(
      "--position-ids 0,5,9 --dim 16 --rotary-dim 8 --theta 500000 "
      "--pairing interleaved");
  EXPECT_EQ(j["positions"], nlohmann::json({0, 5, 9}));
  const std::int64_t pos[] = {0, 5, 9};
  for (std::size_t r = 0; r < 3; ++r) {
    ASSERT_EQ(j["sin"][r].size(), 8u);  // rotary_dim columns
    for (std::int64_t c = 0; c < 8; ++c) {
      const double a = static_cast<double>(pos[r]) * InvFreq(c / 2, 8, 5e5);  // adjacent pairs
      EXPECT_NEAR(j["cos"][r][c].get<double>(), std::cos(a), 6e-8);
      EXPECT_NEAR(j["sin"][r][c].get<double>(), std::sin(a), 6e-8);
    }
  }
}

// --numerics hf reproduces HF's table (rope_init.json, Llama-3 default,
// positions up to 131071) end to end; accurate differs there by ~1e-3.
TEST(TableRopeCli, HfNumericsMatchGolden) {
  const nlohmann::json* ev = nullptr;
  for (const auto& c : Golden("rope_init.json")["cases"]) {
    if (c["name"] == "llama3_8b_default") ev = &c["evaluations"][0];
  }
  ASSERT_NE(ev, nullptr);
  std::string ids;
  for (const auto& p : (*ev)["position_ids"])
    ids += (ids.empty() ? "" : ",") + std::to_string(p.get<std::int64_t>());
  const auto want = FlattenDoubles((*ev)["cos"]);
  for (const char* numerics : {"hf", "accurate"}) {
    const auto j =
        RunJson("--position-ids " + ids + " --dim 128 --theta 500000 --numerics " + numerics);
    EXPECT_EQ(j["positions"], (*ev)["position_ids"]);
    const auto got = FlattenDoubles(j["cos"]);
    ASSERT_EQ(got.size(), want.size());
    double worst = 0;  // error / (2e-6 + 2e-7 |p|): the end-to-end bound
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double p = (*ev)["position_ids"][i / 128].get<double>();
      worst = std::max(worst, std::fabs(got[i] - want[i]) / (2e-6 + 2e-7 * p));
    }
    EXPECT_LE(worst, 1.0) << numerics;
    if (std::string(numerics) == "accurate") {
      EXPECT_GT(MaxAbsDiff(got, want), 1e-4);
    }
  }
}

TEST(TableRopeCli, CsvLayout) {
  const CliResult r = RunCli("table rope --positions 2 --dim 4 --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  std::string header, row0, row1, extra;
  std::getline(in, header);
  std::getline(in, row0);
  std::getline(in, row1);
  EXPECT_FALSE(std::getline(in, extra));
  EXPECT_EQ(header, "position,cos_0,cos_1,cos_2,cos_3,sin_0,sin_1,sin_2,sin_3");
  EXPECT_EQ(row0, "0,1,1,1,1,0,0,0,0");
  std::vector<double> v;
  std::stringstream ss(row1);
  for (std::string cell; std::getline(ss, cell, ',');) v.push_back(std::stod(cell));
  ASSERT_EQ(v.size(), 9u);
  EXPECT_EQ(v[0], 1.0);
  EXPECT_EQ(v[1], static_cast<double>(static_cast<float>(std::cos(1.0))));
  EXPECT_EQ(v[2], static_cast<double>(static_cast<float>(std::cos(0.01))));
  EXPECT_EQ(v[3], v[1]);
  EXPECT_EQ(v[6], static_cast<double>(static_cast<float>(std::sin(0.01))));
}

TEST(TableRopeCli, NpyHoldsCosThenSin) {
  const std::string path = TempDir("table_rope_npy") + "/rope.npy";
  const CliResult r =
      RunCli("table rope --positions 5 --offset 1000 --dim 6 --format npy -o '" + path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  const NpyArray a = ReadNpy(path);
  ASSERT_EQ(a.dtype, DType::kFloat32);
  ASSERT_EQ(a.shape, (std::vector<std::int64_t>{2, 5, 6}));
  const auto v = a.ToFloat32();
  const auto j = RunJson("--positions 5 --offset 1000 --dim 6");
  for (std::size_t i = 0; i < 30; ++i) {
    EXPECT_EQ(v[i], static_cast<float>(j["cos"][i / 6][i % 6].get<double>()));
    EXPECT_EQ(v[30 + i], static_cast<float>(j["sin"][i / 6][i % 6].get<double>()));
  }
}

TEST(TableRopeCli, HelpListsOptions) {
  const CliResult r = RunCli("table rope --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* opt : {"--positions", "--position-ids", "--offset", "--dim", "--theta",
                          "--rotary-dim", "--pairing", "--numerics", "--format", "--output"}) {
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
  }
}

// A user error: exit code 2 and one line on stderr naming the problem.
void ExpectUserError(const std::string& args, const std::string& needle, int code = 2) {
  const CliResult r = RunCli("table rope " + args);
  EXPECT_EQ(r.exit_code, code) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\n" << r.err;
  EXPECT_EQ(r.out, "") << args;
  if (code == 2) {
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  }
}

TEST(TableRopeCliErrors, DimTooSmall) { ExpectUserError("--positions 2 --dim 1", "--dim: got 1"); }

TEST(TableRopeCliErrors, OddRotaryDim) {
  ExpectUserError("--positions 2 --dim 8 --rotary-dim 7", "rotary_dim: got 7");
}

TEST(TableRopeCliErrors, RotaryDimLargerThanDim) {
  ExpectUserError("--positions 2 --dim 8 --rotary-dim 10", "head_dim=8");
}

TEST(TableRopeCliErrors, ThetaNotAboveOne) {
  ExpectUserError("--positions 2 --dim 8 --theta 1", "theta: got 1, expected a finite base > 1");
}

TEST(TableRopeCliErrors, NegativePositionId) {
  ExpectUserError("--position-ids 0,-1 --dim 8", "--position-ids[1]: got -1");
}

TEST(TableRopeCliErrors, MalformedPositionIds) {
  ExpectUserError("--position-ids 0,x --dim 8", "--position-ids: got x, expected an integer");
}

TEST(TableRopeCliErrors, ZeroPositions) {
  ExpectUserError("--positions 0 --dim 8", "--positions: got 0");
}

TEST(TableRopeCliErrors, NoPositions) {
  ExpectUserError("--dim 8", "expected --positions N or --position-ids LIST");
}

TEST(TableRopeCliErrors, BothPositionForms) {
  ExpectUserError("--positions 2 --position-ids 1,2 --dim 8", "not both");
}

TEST(TableRopeCliErrors, OffsetWithIds) {
  ExpectUserError("--position-ids 1,2 --offset 3 --dim 8", "--offset: got 3");
}

TEST(TableRopeCliErrors, OffsetPast2Pow24) {
  ExpectUserError("--positions 2 --offset 16777215 --dim 8", "--offset: got 16777215");
}

TEST(TableRopeCliErrors, TableTooLarge) {
  ExpectUserError("--positions 16777216 --dim 8", "at most 2^26 values per table");
}

TEST(TableRopeCliErrors, UnknownPairingNumericsFormat) {
  ExpectUserError("--positions 2 --dim 8 --pairing neox", "--pairing: got neox");
  ExpectUserError("--positions 2 --dim 8 --numerics fast", "--numerics: got fast");
  ExpectUserError("--positions 2 --dim 8 --format xml", "--format: got xml");
}

TEST(TableRopeCliErrors, UnwritableOutput) {
  ExpectUserError("--positions 2 --dim 8 -o /nonexistent-dir/x.json", "/nonexistent-dir/x.json", 4);
}

TEST(TableRopeCliErrors, MissingDim) {
  const CliResult r = RunCli("table rope --positions 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--dim"), std::string::npos) << r.err;
}

// --config: cos/sin exactly as the model's rotary forward (HF fixtures),
// scaled frequencies and attention factor folded in.
double ConfigTableErr(const std::string& config, const nlohmann::json& eval,
                      const std::string& extra, std::size_t rows) {
  const auto ids = eval["position_ids"].get<std::vector<std::int64_t>>();
  std::string list;
  for (std::size_t i = 0; i < rows; ++i) list += (i ? "," : "") + std::to_string(ids[i]);
  const auto j = RunJson("--config '" + SourcePath("examples/configs/" + config) +
                         "' --numerics hf --position-ids " + list + extra);
  const double af = eval["attention_scaling"];
  double worst = 0;
  for (const char* part : {"cos", "sin"}) {
    for (std::size_t r = 0; r < rows; ++r) {
      const double bound = 2e-6 + 2e-7 * static_cast<double>(ids[r]) * af;
      for (std::size_t c = 0; c < eval[part][r].size(); ++c) {
        worst = std::max(
            worst, std::abs(j[part][r][c].get<double>() - eval[part][r][c].get<double>()) / bound);
      }
    }
  }
  return worst;
}

TEST(TableRopeCli, ConfigMatchesModelForward) {
  const nlohmann::json* gpt_oss = nullptr;
  const nlohmann::json* phi = nullptr;
  for (const auto& c : Golden("rope_init.json")["cases"]) {
    if (c["name"] == "gpt_oss_20b_yarn_truncate_false") gpt_oss = &c;
    if (c["name"] == "phi3.5_mini_instruct_longrope") phi = &c;
  }
  ASSERT_TRUE(gpt_oss && phi);
  const auto& oss_eval = (*gpt_oss)["evaluations"][0];
  EXPECT_LE(ConfigTableErr("gpt-oss-20b.json", oss_eval, "", oss_eval["position_ids"].size()), 1.0);
  // Phi-3.5: ids up to 4095 -> short factors; up to 131071 -> long factors.
  const auto& short_eval = (*phi)["evaluations"][0];
  const auto& long_eval = (*phi)["evaluations"][1];
  ASSERT_EQ(short_eval["factors_used"], "short_factor");
  ASSERT_EQ(long_eval["factors_used"], "long_factor");
  EXPECT_LE(ConfigTableErr("phi-3.5-mini-instruct.json", short_eval, "", 8), 1.0);
  EXPECT_LE(ConfigTableErr("phi-3.5-mini-instruct.json", long_eval, "", 12), 1.0);
  // --seq-len overrides what the call sees: short ids, long factors.
  EXPECT_LE(ConfigTableErr("phi-3.5-mini-instruct.json", long_eval, " --seq-len 131072", 8), 1.0);
  EXPECT_GT(ConfigTableErr("phi-3.5-mini-instruct.json", long_eval, "", 8), 1.0);
}

TEST(TableRopeCli, ConfigConflictsAreErrors) {
  const std::string cfg = "'" + SourcePath("examples/configs/llama-3.1-8b.json") + "'";
  auto r = RunCli("table rope --config " + cfg + " --dim 128 --positions 2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--config"), std::string::npos) << r.err;
  r = RunCli("table rope --dim 8 --positions 2 --seq-len 10");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--seq-len"), std::string::npos) << r.err;
  r = RunCli("table rope --config /nonexistent.json --positions 2");
  EXPECT_EQ(r.exit_code, 4);
}

}  // namespace
}  // namespace posenc::test
