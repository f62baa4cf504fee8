// `posenc playground [-o DIR]`: writes DIR/index.html, the report's live
// playground alone (cli/report/playground.h): posenc compiled to WebAssembly
// inside a self-contained page that opens offline.
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "posenc/error.h"
#include "report/html.h"
#include "report/playground.h"

namespace posenc::cli {
namespace {

void RunPlayground(const std::string& dir) {
  Require(!dir.empty(), "-o", dir, "a directory path");
  const report::ChartLibrary library = report::LoadChartLibrary();
  const report::PlaygroundModule playground = report::LoadPlaygroundModule();
  const std::string html = report::WritePlayground(library, playground, dir);
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(html, ec);
  std::cout << fmt::format(
      "wrote {} ({:.1f} MB, self-contained: open it in a browser; posenc.wasm {:.0f} KiB from "
      "{})\n",
      html, ec ? 0.0 : static_cast<double>(bytes) / 1e6,
      static_cast<double>(playground.wasm_bytes) / 1024.0, playground.dir);
}

}  // namespace

void RegisterPlaygroundCommand(CLI::App& app) {
  auto dir = std::make_shared<std::string>("playground");
  CLI::App* cmd = app.add_subcommand(
      "playground",
      "Write the live playground (posenc compiled to WebAssembly, every parameter on a control) "
      "to DIR/index.html");
  cmd->add_option("-o,--output", *dir, "Output directory (created if missing)")
      ->capture_default_str();
  cmd->callback([dir] { RunPlayground(*dir); });
}

}  // namespace posenc::cli
