// `posenc buckets t5|deberta`: values against the golden fixtures, JSON
// keys, the inclusive A:B range, the text table, exit codes and messages.
#include <cstdint>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "test_util.h"

namespace posenc::test {
namespace {

nlohmann::json RunJson(const std::string& args) {
  const CliResult r = RunCli("buckets " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return nlohmann::json::parse(r.out);
}

TEST(BucketsCli, T5MatchesGoldenInclusiveRange) {
  for (const auto& c : Golden("t5_buckets.json")["cases"]) {
    const std::string args = "t5 --num-buckets " + std::to_string(c["num_buckets"].get<int>()) +
                             " --max-distance " + std::to_string(c["max_distance"].get<int>()) +
                             (c["bidirectional"].get<bool>() ? "" : " --causal") +
                             " --relative=-300:300";
    const auto j = RunJson(args);
    ASSERT_EQ(j.size(), 2u);
    ASSERT_EQ(j["relative"].size(), 601u) << "A:B includes B";
    EXPECT_EQ(j["relative"].front(), -300);
    EXPECT_EQ(j["relative"].back(), 300);
    EXPECT_EQ(j["bucket"], c["buckets"]) << args;
  }
}

TEST(BucketsCli, DebertaMatchesGolden) {
  const auto& c = Golden("deberta_buckets.json")["cases"][0];
  const auto j = RunJson("deberta --bucket-size 256 --max-position 512 --relative=-600:600");
  ASSERT_EQ(j["relative"].size(), 1201u);
  EXPECT_EQ(j["bucket"], c["bucket_pos"]);
}

TEST(BucketsCli, CommaListAndTextTable) {
  const auto j = RunJson("t5 --relative=-16,0,16");
  EXPECT_EQ(j["relative"], nlohmann::json({-16, 0, 16}));
  EXPECT_EQ(j["bucket"], nlohmann::json({10, 0, 26}));
  const CliResult r = RunCli("buckets t5 --causal --relative 0:2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("relative"), std::string::npos);
  EXPECT_NE(r.out.find("bucket"), std::string::npos);
  EXPECT_NE(r.out.find("         2           0\n"), std::string::npos) << r.out;
  const CliResult d = RunCli("buckets deberta --relative=-200:-200");
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(d.out.find("      -200        -169\n"), std::string::npos) << d.out;
}

TEST(BucketsCli, HelpDocumentsInclusiveRange) {
  const CliResult r = RunCli("buckets t5 --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("inclusive"), std::string::npos) << r.out;
}

TEST(BucketsCli, BadInputIsOneLineExit2) {
  struct Case {
    const char* args;
    const char* needle;
  };
  for (const Case& c :
       {Case{"t5 --num-buckets 3 --relative 0:1", "num_buckets: got 3"},
        Case{"t5 --num-buckets 1 --causal --relative 0:1", "num_buckets: got 1"},
        Case{"t5 --num-buckets 32 --max-distance 8 --relative 0:1", "max_distance: got 8"},
        Case{"t5 --relative 5:1", "--relative: got 5:1"}, Case{"t5 --relative a:b", "--relative"},
        Case{"deberta --bucket-size 256 --max-position 100 --relative 0:1",
             "max_position: got 100"},
        Case{"deberta --bucket-size 0 --relative 0:1", "--bucket-size: got 0"}}) {
    const CliResult r = RunCli(std::string("buckets ") + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
    EXPECT_EQ(r.out, "");
  }
  // Missing --relative is a CLI11 usage error (non-zero, not 2).
  const CliResult m = RunCli("buckets t5");
  EXPECT_NE(m.exit_code, 0);
  EXPECT_NE(m.exit_code, 2);
}

}  // namespace
}  // namespace posenc::test
