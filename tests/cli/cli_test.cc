// The posenc executable: help, version, and error handling conventions.
#include <gtest/gtest.h>

#include "cli_util.h"

namespace posenc::test {
namespace {

TEST(Cli, HelpAndVersion) {
  auto r = RunCli("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("posenc"), std::string::npos);
  r = RunCli("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("0.1.0"), std::string::npos);
}

TEST(Cli, UnknownSubcommandIsOneLineError) {
  auto r = RunCli("no-such-command");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out.find("terminate"), std::string::npos);
  EXPECT_EQ(r.err.find("terminate"), std::string::npos);
}

}  // namespace
}  // namespace posenc::test
