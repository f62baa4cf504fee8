// The subcommands of `posenc`. Each Register* function adds one subcommand
// (with its options and callback) to the app; main.cc calls them all and maps
// library errors to exit codes.
#pragma once

#include <CLI/CLI.hpp>

namespace posenc::cli {

// Exit codes: 0 ok; 1 internal error; 2 invalid argument; 3 bad config;
// 4 I/O error; CLI11's own codes (105-109) for malformed command lines.
inline constexpr int kExitInternal = 1;
inline constexpr int kExitInvalidArgument = 2;
inline constexpr int kExitConfig = 3;
inline constexpr int kExitIo = 4;

// Top-level subcommands (cli/cmd_<name>.cc).
void RegisterTableCommand(CLI::App& app);

// `table` methods (cli/cmd_table_<method>.cc), registered on the `table` app.

}  // namespace posenc::cli
