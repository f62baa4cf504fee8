// `posenc demo permutation`: the table, the JSON keys and values, exit codes.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace posenc::test {
namespace {

TEST(DemoCli, JsonHasEveryScheme) {
  const auto r = RunCli("demo permutation --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& s = j["schemes"];
  ASSERT_EQ(s.size(), 9u);
  EXPECT_FALSE(s["none"]["order_aware"].get<bool>());
  EXPECT_LE(s["none"]["pooled_difference"].get<double>(), 1e-12);
  for (const char* name :
       {"sinusoidal", "learned", "rope", "alibi", "t5", "shaw", "transformer_xl", "deberta"}) {
    ASSERT_TRUE(s.contains(name)) << name;
    EXPECT_TRUE(s[name]["order_aware"].get<bool>()) << name;
    EXPECT_GT(s[name]["pooled_difference"].get<double>(), 1e-4) << name;
  }
}

TEST(DemoCli, TextTable) {
  const auto r = RunCli("demo permutation");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("pooled difference"), std::string::npos);
  EXPECT_NE(r.out.find("order-aware"), std::string::npos);
  const auto none = r.out.find("\nnone ");
  ASSERT_NE(none, std::string::npos);
  EXPECT_NE(r.out.substr(none, r.out.find('\n', none + 1) - none).find("| no"), std::string::npos);
  const auto rope = r.out.find("\nrope ");
  ASSERT_NE(rope, std::string::npos);
  EXPECT_NE(r.out.substr(rope, r.out.find('\n', rope + 1) - rope).find("| yes"), std::string::npos);
}

TEST(DemoCli, NoStartTokenMakesSymmetricAlibiBlind) {
  const auto r = RunCli("demo permutation --start-token '' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["schemes"]["alibi"]["order_aware"].get<bool>());
  EXPECT_TRUE(j["schemes"]["rope"]["order_aware"].get<bool>());
}

TEST(DemoCli, NotAPermutationIsExitCode2) {
  const auto r = RunCli("demo permutation --second 'cat bites man'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("second"), std::string::npos) << r.err;
  EXPECT_NE(RunCli("demo").exit_code, 0);
  EXPECT_EQ(RunCli("demo permutation --help").exit_code, 0);
}

}  // namespace
}  // namespace posenc::test
