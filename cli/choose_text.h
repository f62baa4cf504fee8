// The text form of `posenc choose`'s answer (posenc/choose.h's JSON), shared
// by `posenc choose`, the tour's last section and the report's worked
// examples, so the three say the same thing.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace posenc::cli {

// The evidence file in use (report::EvidencePath, cli/report/html.h).
std::string DefaultEvidencePath();

// One line of constraints ("decoder, trained at 128, used at 512 (4x), ...").
std::string ChooseConstraintsLine(const nlohmann::json& answer);

// The whole answer as lines. `reasons` false: one line per candidate.
std::vector<std::string> ChooseLines(const nlohmann::json& answer, bool reasons);

}  // namespace posenc::cli
