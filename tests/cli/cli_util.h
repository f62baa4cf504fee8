// Runs the posenc executable and captures its exit code, stdout and stderr.
#pragma once

#include <string>

namespace posenc::test {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `posenc ARGS` (ARGS is passed to /bin/sh, so quote as in a shell).
CliResult RunCli(const std::string& args);

// Same, with shell text run first in the same shell, e.g. "ulimit -f 2; "
// (limits apply to posenc too).
CliResult RunCliAfter(const std::string& shell_prefix, const std::string& args);

}  // namespace posenc::test
