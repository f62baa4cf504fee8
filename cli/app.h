// The whole `posenc` command line as a function: builds the CLI11 app with
// every subcommand, parses argv, runs the chosen command and maps errors to
// one line on `err` and an exit code (commands.h). main.cc calls it with
// std::cout / std::cerr; the fuzz target fuzz/fuzz_cli.cc and tests call it
// in-process with other streams.
#pragma once

#include <iosfwd>

namespace posenc::cli {

// Runs `posenc argv[1..argc)` and returns the exit code. While it runs,
// std::cout and std::cerr write into `out` and `err` (their stream buffers
// are swapped and restored on return, also when an exception escapes), so
// the subcommands' own printing follows the streams passed here.
// Never throws for anything a command raises: posenc::Error subclasses map
// to 2/3/4, CLI11 parse errors to CLI11's codes, any other exception to 1
// ("internal error", which no input is meant to reach).
int RunPosenc(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace posenc::cli
