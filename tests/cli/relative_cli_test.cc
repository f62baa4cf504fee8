// `posenc relative --length L [--json]`: the lesson's matrix rel[i][j] = i - j.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace posenc::test {
namespace {

TEST(RelativeCli, JsonMatrix) {
  const CliResult r = RunCli("relative --length 6 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["length"], 6);
  ASSERT_EQ(j["relative"].size(), 6u);
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(j["relative"][i].size(), 6u);
    for (int k = 0; k < 6; ++k) EXPECT_EQ(j["relative"][i][k], i - k);
  }
}

TEST(RelativeCli, TextMatrix) {
  const CliResult r = RunCli("relative --length 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, " 0 -1 -2\n 1  0 -1\n 2  1  0\n");
}

TEST(RelativeCli, BadLength) {
  for (const char* len : {"0", "-2", "5000"}) {
    const CliResult r = RunCli(std::string("relative --length=") + len);
    EXPECT_EQ(r.exit_code, 2) << len;
    EXPECT_NE(r.err.find("--length: got"), std::string::npos) << r.err;
  }
  EXPECT_EQ(RunCli("relative --help").exit_code, 0);
}

}  // namespace
}  // namespace posenc::test
