// `posenc relative --length L [--json]`: the relative position matrix
// rel[i][j] = i - j (include/posenc/relative.h). Text: an aligned matrix;
// --json: {"length": L, "relative": [[...], ...]}.
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "posenc/error.h"
#include "posenc/relative.h"

namespace posenc::cli {
namespace {

struct RelativeArgs {
  std::int64_t length = 6;
  bool json = false;
};

void RunRelative(const RelativeArgs& a) {
  Require(a.length >= 1 && a.length <= 4096, "--length", a.length, "a length in [1, 4096]");
  const std::vector<std::int64_t> m = RelativePositionMatrix(a.length);
  const auto n = static_cast<std::size_t>(a.length);
  if (a.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (std::size_t i = 0; i < n; ++i) {
      rows.push_back(
          std::vector<std::int64_t>(m.begin() + static_cast<std::ptrdiff_t>(i * n),
                                    m.begin() + static_cast<std::ptrdiff_t>((i + 1) * n)));
    }
    nlohmann::json j;
    j["length"] = a.length;
    j["relative"] = rows;
    std::cout << j.dump() << '\n';
    return;
  }
  const std::size_t width = std::to_string(-(a.length - 1)).size();
  for (std::size_t i = 0; i < n; ++i) {
    std::string line;
    for (std::size_t j = 0; j < n; ++j) {
      if (j > 0) line += ' ';
      line += fmt::format("{:>{}}", m[i * n + j], width);
    }
    std::cout << line << '\n';
  }
}

}  // namespace

void RegisterRelativeCommand(CLI::App& app) {
  auto args = std::make_shared<RelativeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "relative", "Print the relative position matrix rel[i][j] = i - j (query minus key)");
  cmd->add_option("--length", args->length, "Sequence length L in [1, 4096]")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, R"(Print {"length": L, "relative": [[...], ...]})");
  cmd->callback([args] { RunRelative(*args); });
}

}  // namespace posenc::cli
