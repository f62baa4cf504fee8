// `posenc plot`: turns the CSV that `posenc table METHOD ... --format csv`
// writes (a header `position,<column names>`, then one line per row: its
// position and values) into one heatmap figure.
#pragma once

#include <cstdint>
#include <string>

#include "model.h"

namespace posenc::report {

// Largest table `posenc plot` draws: 2048 x 2048 cells.
inline constexpr std::int64_t kMaxPlotCells = std::int64_t{1} << 22;

// Parses the table CSV. Rows at consecutive positions are drawn at their
// positions (y axis "position"), other id lists at their row index (y axis
// "row", the positions in the caption). Throws InvalidArgument for a
// malformed CSV, a non-finite value or more than kMaxPlotCells cells.
Heatmap HeatmapFromTableCsv(const std::string& csv, const std::string& method,
                            const std::string& command);

}  // namespace posenc::report
