// `posenc schemes [NAME] [--json]`: the registry's declarations, derived.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace posenc::test {
namespace {

TEST(SchemesCli, JsonListsEveryRegisteredScheme) {
  const CliResult r = RunCli("schemes --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::string names;
  for (const auto& s : j) names += s["name"].get<std::string>() + " ";
  EXPECT_EQ(names, "none absolute rope alibi t5 shaw transformer_xl deberta fire ");
  const auto& fire = j[8];
  EXPECT_TRUE(fire["fused"].get<bool>());
  EXPECT_TRUE(fire["causal_only"].get<bool>());
  int trainable = 0;
  for (const auto& a : fire["args"]) trainable += a["trainable"].get<bool>();
  EXPECT_EQ(trainable, 6);
}

TEST(SchemesCli, DescribesOne) {
  const CliResult r = RunCli("schemes t5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("t5: T5 relative buckets"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("table"), std::string::npos);
  EXPECT_NE(r.out.find("[num_buckets, H]"), std::string::npos);
  EXPECT_NE(r.out.find("trainable; required;"), std::string::npos) << r.out;
}

TEST(SchemesCli, UnknownName) {
  const CliResult r = RunCli("schemes cope");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("NAME: got cope, expected one of none, absolute"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace posenc::test
