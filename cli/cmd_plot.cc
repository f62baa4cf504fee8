// `posenc plot METHOD [options] -o FILE.html`: one chart of the table that
// `posenc table METHOD [options]` computes. The options are exactly the
// table's: plot runs the table subcommand in-process (RegisterTableCommand)
// with --format csv into a temporary file, then draws that table as a
// heatmap in a self-contained HTML page (cli/report/).
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "commands.h"
#include "posenc/error.h"
#include "report/html.h"
#include "report/plot.h"

namespace posenc::cli {
namespace {

namespace fs = std::filesystem;

struct PlotArgs {
  std::string output;
  std::vector<std::string> rest;  // METHOD and the table options
};

// Removes the file on scope exit.
struct TempFile {
  fs::path path;
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("plot: cannot read the table written to '" + path.string() + "'");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void RunPlot(PlotArgs args) {
  // -o may come after METHOD (`posenc plot rope --dim 64 -o x.html`).
  std::vector<std::string> table_args;
  for (std::size_t i = 0; i < args.rest.size(); ++i) {
    const std::string& a = args.rest[i];
    if (a == "-o" || a == "--output") {
      Require(i + 1 < args.rest.size(), a, "(nothing)", "an output .html path");
      args.output = args.rest[++i];
    } else if (a.rfind("--output=", 0) == 0) {
      args.output = a.substr(9);
    } else if (a == "--format" || a.rfind("--format=", 0) == 0) {
      throw InvalidArgument(ArgMessage("--format", a, "no --format: plot always writes HTML"));
    } else {
      table_args.push_back(a);
    }
  }
  const bool help = std::find(table_args.begin(), table_args.end(), "--help") != table_args.end() ||
                    std::find(table_args.begin(), table_args.end(), "-h") != table_args.end();
  Require(!table_args.empty() && table_args[0].rfind('-', 0) != 0, "METHOD",
          table_args.empty() ? std::string("(none)") : table_args[0],
          "a method of `posenc table` (posenc table --help lists them)");
  if (!help) Require(!args.output.empty(), "-o", "(none)", "an output .html path");

  static std::atomic<int> counter{0};
  TempFile tmp{fs::temp_directory_path() /
               fmt::format("posenc-plot-{}-{}.csv", ::getpid(), counter++)};
  std::vector<std::string> argv = {"posenc", "table"};
  argv.insert(argv.end(), table_args.begin(), table_args.end());
  if (!help) {
    for (const char* extra : {"--format", "csv", "-o"}) argv.emplace_back(extra);
    argv.push_back(tmp.path.string());
  }
  CLI::App table_app{"posenc plot: the table to draw"};
  table_app.name("posenc");  // usage lines read "posenc table METHOD [OPTIONS]"
  table_app.require_subcommand(1);
  // The plot's own limit goes into the table command, which checks it before
  // it computes anything: a table too large to draw is refused up front.
  RegisterTableCommand(table_app,
                       TableBudget{report::kMaxPlotCells,
                                   "at most 2^22 values (2048 x 2048 cells: the largest plot)"});
  std::vector<const char*> cargv;
  for (const auto& s : argv) cargv.push_back(s.c_str());
  try {
    table_app.parse(static_cast<int>(cargv.size()), cargv.data());
  } catch (const CLI::ParseError& e) {
    const int code = table_app.exit(e);  // prints the table's help or its error
    if (code == 0) return;
    throw CLI::RuntimeError(code);
  }
  if (help) return;

  std::string command = "posenc table";
  for (const auto& a : table_args) command += " " + a;
  const report::Heatmap heatmap =
      report::HeatmapFromTableCsv(ReadAll(tmp.path), table_args[0], command);
  const report::ChartLibrary library = report::LoadChartLibrary();
  report::WriteSingleFigure(heatmap, "posenc plot: " + command, library, args.output);
  std::cout << fmt::format("wrote {} ({} x {} heatmap)\n", args.output, heatmap.rows, heatmap.cols);
}

}  // namespace

void RegisterPlotCommand(CLI::App& app) {
  auto args = std::make_shared<PlotArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plot",
      "Draw one table of `posenc table METHOD [options]` as a heatmap in a self-contained HTML "
      "file: posenc plot METHOD [table options] -o FILE.html (posenc plot METHOD --help lists "
      "the options)");
  cmd->prefix_command();
  cmd->add_option("-o,--output", args->output, "Output HTML file");
  cmd->callback([args, cmd] {
    PlotArgs a = *args;
    a.rest = cmd->remaining();
    RunPlot(std::move(a));
  });
}

}  // namespace posenc::cli
