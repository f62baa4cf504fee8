// `posenc report [-o DIR] [--config CONFIG.json ...] [--quick] [--experiment DIR]`: builds the
// report (cli/report/) and writes DIR/index.html, a self-contained page that
// opens offline, plus DIR/data/<figure>.csv; prints a short summary. Without
// --experiment the report reads the committed run (report::DefaultExperimentDir).
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "posenc/error.h"
#include "report/html.h"
#include "report/report.h"

namespace posenc::cli {
namespace {

struct ReportArgs {
  std::string dir = "report";
  std::vector<std::string> configs;
  bool quick = false;
  int threads = 1;
  std::string experiment;  // --experiment DIR
};

void RunReport(const ReportArgs& args) {
  Require(!args.dir.empty(), "-o", args.dir, "a directory path");
  for (const auto& c : args.configs) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(c, ec)) {
      throw IoError("--config: cannot read '" + c + "' (no such file)");
    }
  }
  report::ReportOptions options;
  options.detail = args.quick ? report::ReportDetail::kQuick : report::ReportDetail::kFull;
  options.configs = args.configs;
  options.threads = args.threads;
  if (!args.experiment.empty()) {
    options.experiment = std::make_shared<const report::ExperimentResults>(
        report::LoadExperimentResults(args.experiment));
  } else if (const std::string dir = report::DefaultExperimentDir();
             std::filesystem::is_regular_file(std::filesystem::path(dir) / "results.json")) {
    // The committed run: section "Train short, test long" is never empty.
    options.experiment =
        std::make_shared<const report::ExperimentResults>(report::LoadExperimentResults(dir));
    options.experiment_is_default = true;
  }
  // Load the chart library first: a missing npm install fails before the work.
  const report::ChartLibrary library = report::LoadChartLibrary();
  const report::PlaygroundModule playground = report::LoadPlaygroundModule();
  report::Progress progress(report::NumReportSteps(options));
  const report::Report rep = report::BuildReport(options, &progress);
  const std::string html = report::WriteReport(rep, library, args.dir, &playground);

  std::size_t figures = 0;
  for (const auto& s : rep.sections) figures += s.blocks.size();
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(html, ec);
  std::cout << fmt::format("posenc report ({}): {} sections, {} figures and tables\n",
                           report::ReportDetailName(options.detail), rep.sections.size(), figures);
  for (const auto& line : rep.summary) std::cout << "  " << line << '\n';
  std::cout << fmt::format("wrote {} ({:.1f} MB, self-contained: open it in a browser)\n", html,
                           ec ? 0.0 : static_cast<double>(bytes) / 1e6);
  std::cout << fmt::format("data behind each figure: {}/data/*.csv\n", args.dir);
  if (playground.available()) {
    std::cout << fmt::format("live playground: posenc.wasm {:.0f} KiB from {}\n",
                             static_cast<double>(playground.wasm_bytes) / 1024.0, playground.dir);
  } else {
    std::cout << "live playground: not in this page: " << playground.unavailable << '\n';
  }
}

}  // namespace

void RegisterReportCommand(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Write an HTML report (every figure measured by the library) to DIR/index.html");
  cmd->add_option("-o,--output", args->dir, "Output directory (created if missing)")
      ->capture_default_str();
  cmd->add_option("--config", args->configs,
                  "A Hugging Face config.json whose RoPE frequencies to chart (repeatable)");
  cmd->add_flag("--quick", args->quick, "Smaller figures (a few seconds; for tests)");
  cmd->add_option("--experiment", args->experiment,
                  "Folder of `posenc experiment extrapolation` results (section \"Train short, "
                  "test long\" and the comparison table's measured column; default: the "
                  "committed run, docs/experiments/extrapolation)");
  cmd->add_option("--threads", args->threads, "Threads of the posenc::Context")
      ->capture_default_str();
  cmd->callback([args] { RunReport(*args); });
}

}  // namespace posenc::cli
