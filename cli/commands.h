// The subcommands of `posenc`. Each Register* function adds one subcommand
// (with its options and callback) to the app; app.cc (RunPosenc) calls them
// all and maps library errors to exit codes; main.cc only calls RunPosenc.
#pragma once

#include <CLI/CLI.hpp>

#include "table_writer.h"

namespace posenc::cli {

// Exit codes: 0 ok; 1 internal error; 2 invalid argument; 3 bad config;
// 4 I/O error; CLI11's own codes (105-109) for malformed command lines.
inline constexpr int kExitInternal = 1;
inline constexpr int kExitInvalidArgument = 2;
inline constexpr int kExitConfig = 3;
inline constexpr int kExitIo = 4;

// Top-level subcommands (cli/cmd_<name>.cc).
// `budget` bounds every table's size (`posenc plot` passes what it can draw).
void RegisterTableCommand(CLI::App& app, const TableBudget& budget = {});
void RegisterAlibiCommand(CLI::App& app);       // cli/cmd_alibi.cc
void RegisterBenchCommand(CLI::App& app);       // cli/cmd_bench.cc
void RegisterChooseCommand(CLI::App& app);      // cli/cmd_choose.cc
void RegisterDemoCommand(CLI::App& app);        // cli/cmd_demo.cc
void RegisterExperimentCommand(CLI::App& app);  // cli/cmd_experiment.cc
void RegisterBucketsCommand(CLI::App& app);     // cli/cmd_buckets.cc
void RegisterInspectCommand(CLI::App& app);     // cli/cmd_inspect.cc
void RegisterRelativeCommand(CLI::App& app);    // cli/cmd_relative.cc
void RegisterSchemesCommand(CLI::App& app);     // cli/cmd_schemes.cc
void RegisterPlaygroundCommand(CLI::App& app);  // cli/cmd_playground.cc
void RegisterPlotCommand(CLI::App& app);        // cli/cmd_plot.cc
void RegisterReportCommand(CLI::App& app);      // cli/cmd_report.cc
void RegisterTourCommand(CLI::App& app);        // cli/cmd_tour.cc

// `table` methods (cli/cmd_table_<method>.cc), registered on the `table` app.
void RegisterTableLearnedCommand(CLI::App& table, const TableBudget& budget);
void RegisterTableRopeCommand(CLI::App& table, const TableBudget& budget);
void RegisterTableSinusoidalCommand(CLI::App& table, const TableBudget& budget);

}  // namespace posenc::cli
