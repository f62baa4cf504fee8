// `posenc alibi`: slopes and bias values, JSON keys, exit codes.
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace posenc::test {
namespace {

TEST(AlibiCli, SlopesJsonMatchTheReference) {
  const auto r = RunCli("alibi --heads 12 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["slopes"].size(), 12u);
  for (int h = 0; h < 8; ++h) EXPECT_DOUBLE_EQ(j["slopes"][h].get<double>(), std::exp2(-(h + 1.0)));
  for (int h = 8; h < 12; ++h) {
    EXPECT_DOUBLE_EQ(j["slopes"][h].get<double>(), std::exp2(-4.0 * (2 * (h - 8) + 1) / 8));
  }
  EXPECT_EQ(j["convention"], "reference");
  EXPECT_FALSE(j.contains("bias"));
}

TEST(AlibiCli, CausalBiasJsonHasNullForMaskedCells) {
  const auto r = RunCli("alibi --heads 2 --length 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["form"], "causal");
  ASSERT_EQ(j["bias"].size(), 2u);  // [heads][L][L]
  EXPECT_TRUE(j["bias"][0][0][1].is_null());
  EXPECT_DOUBLE_EQ(j["bias"][0][2][0].get<double>(), -2 * 0.0625);  // head 0 slope 2^-4, i - j = 2
  EXPECT_DOUBLE_EQ(j["bias"][1][1][0].get<double>(), -0.00390625);
}

TEST(AlibiCli, SymmetricSingleHeadIsOneMatrix) {
  const auto r = RunCli("alibi --heads 1 --max-bias 4 --length 3 --symmetric --head 0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["slopes"][0].get<double>(), 0.0625);
  ASSERT_EQ(j["bias"].size(), 3u);  // [L][L]
  EXPECT_DOUBLE_EQ(j["bias"][0][2].get<double>(), -0.125);
  EXPECT_DOUBLE_EQ(j["bias"][2][0].get<double>(), -0.125);
}

TEST(AlibiCli, BloomConventionAndTextTable) {
  auto r = RunCli("alibi --heads 13 --convention bloom_float32 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["slopes"][12].get<double>(), 0.044194165617227554);  // HF Bloom, alibi.json
  r = RunCli("alibi --heads 2 --length 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("slope"), std::string::npos);
  EXPECT_NE(r.out.find("-inf"), std::string::npos);
  EXPECT_NE(r.out.find("-0.0625"), std::string::npos);  // head 0 slope 2^-4, i - j = 1
  EXPECT_EQ(r.out.find("-0 "), std::string::npos);      // the diagonal is +0
}

TEST(AlibiCli, BadInputIsOneLineAndExitCode2) {
  for (const char* args :
       {"alibi --heads 0", "alibi --heads 4 --max-bias nan", "alibi --heads 4 --max-bias -1",
        "alibi --heads 4 --length 0", "alibi --heads 4 --convention paper",
        "alibi --heads 4 --head 1", "alibi --heads 4 --length 3 --head 4"}) {
    const auto r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find("posenc: error:"), std::string::npos) << args;
  }
}

TEST(AlibiCli, MalformedCommandLine) {
  EXPECT_NE(RunCli("alibi").exit_code, 0);  // --heads is required
  EXPECT_NE(RunCli("alibi --heads 2 --causal --symmetric").exit_code, 0);
  EXPECT_EQ(RunCli("alibi --help").exit_code, 0);
}

}  // namespace
}  // namespace posenc::test
