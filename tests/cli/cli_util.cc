#include "cli_util.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "test_util.h"

namespace posenc::test {

namespace {
std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

CliResult RunCli(const std::string& args) { return RunCliAfter("", args); }

CliResult RunCliAfter(const std::string& shell_prefix, const std::string& args) {
  static int counter = 0;
  const std::string dir = TempDir("cli_" + std::to_string(counter++));
  const std::string out = dir + "/out", err = dir + "/err";
  const std::string cmd = shell_prefix + "'" + POSENC_CLI_PATH + "' " + args + " >'" + out +
                          "' 2>'" + err + "' </dev/null";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = Slurp(out);
  r.err = Slurp(err);
  return r;
}

}  // namespace posenc::test
