// posenc: the command-line front end. Parses arguments (CLI11), calls the
// public API, and maps library errors to one line on stderr and an exit code
// (cli/commands.h, cli/app.cc). Never prints a stack trace.
#include <csignal>
#include <iostream>

#include "app.h"

int main(int argc, char** argv) {
  // A write past a file-size limit (ulimit -f) fails with EFBIG and is
  // reported as an I/O error instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  return posenc::cli::RunPosenc(argc, argv, std::cout, std::cerr);
}
