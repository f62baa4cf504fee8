// `posenc plot`: table CSV -> heatmap (see plot.h).
#include "plot.h"

#include <charconv>
#include <cmath>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "posenc/error.h"

namespace posenc::report {
namespace {

// The cells of one CSV line, as views into it (no allocation per cell: a plot
// reads up to 2^22 of them).
void SplitComma(std::string_view line, std::vector<std::string_view>& out) {
  out.clear();
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    out.push_back(line.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
}

double ParseNumber(std::string_view cell, std::int64_t line) {
  double v = 0.0;
  const char* end = cell.data() + cell.size();
  auto [p, ec] = std::from_chars(cell.data(), end, v);
  if (ec != std::errc() || p != end || cell.empty() || !std::isfinite(v)) {
    FailArgument(fmt::format("table csv line {}", line), std::string(cell), "a finite number");
  }
  return v;
}

}  // namespace

Heatmap HeatmapFromTableCsv(const std::string& csv, const std::string& method,
                            const std::string& command) {
  std::string_view rest(csv);
  // The next line of `rest` (without its '\n'); false at the end.
  auto next_line = [&rest](std::string_view& line) {
    if (rest.empty()) return false;
    const std::size_t nl = rest.find('\n');
    line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    return true;
  };
  std::string_view line;
  Require(next_line(line), "table csv", "(empty)", "a header line `position,...`");
  std::vector<std::string_view> cells;
  SplitComma(line, cells);
  const std::vector<std::string> header(cells.begin(), cells.end());
  Require(header.size() >= 2 && header[0] == "position", "table csv header", std::string(line),
          "`position,<column>,...`");
  const auto cols = static_cast<std::int64_t>(header.size() - 1);
  std::vector<std::int64_t> positions;
  std::vector<double> values;
  std::int64_t number = 1;
  while (next_line(line)) {
    ++number;
    if (line.empty()) continue;
    SplitComma(line, cells);
    // Messages built only on failure (one line per table row: up to 2^22).
    if (static_cast<std::int64_t>(cells.size()) != cols + 1) {
      FailArgument(fmt::format("table csv line {} cells", number), cells.size(),
                   fmt::format("{} (the header's count)", cols + 1));
    }
    positions.push_back(static_cast<std::int64_t>(ParseNumber(cells[0], number)));
    if (static_cast<std::int64_t>(positions.size()) * cols > kMaxPlotCells) {
      FailArgument("table size", fmt::format("{} rows x {} columns", positions.size(), cols),
                   "at most 2^22 cells (2048 x 2048) for one plot");
    }
    for (std::int64_t c = 1; c <= cols; ++c)
      values.push_back(ParseNumber(cells[static_cast<std::size_t>(c)], number));
  }
  Require(!positions.empty(), "table csv rows", 0, "at least one row");
  bool consecutive = true;
  for (std::size_t r = 1; r < positions.size(); ++r) {
    consecutive = consecutive && positions[r] == positions[r - 1] + 1;
  }
  Heatmap h;
  h.id = "plot_" + method;
  h.title = fmt::format("{}: {} rows x {} columns", method, positions.size(), cols);
  h.rows = static_cast<std::int64_t>(positions.size());
  h.cols = cols;
  h.values = std::move(values);
  h.x_title = fmt::format("column ({} ... {})", header[1], header.back());
  h.y_title = consecutive ? "position" : "row";
  h.y0 = consecutive ? positions.front() : 0;
  h.value_title = "value";
  double lo = h.values.front(), hi = lo;
  for (double v : h.values) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  h.scheme = lo < 0.0 && hi > 0.0 ? ColorScheme::kDiverging : ColorScheme::kSequential;
  std::string rows_text;
  if (!consecutive) {
    rows_text = " Rows hold positions";
    for (std::size_t r = 0; r < positions.size() && r < 32; ++r) {
      rows_text += fmt::format("{}{}", r ? ", " : " ", positions[r]);
    }
    rows_text += positions.size() > 32 ? ", ..." : ".";
  }
  h.caption = fmt::format("`{}`: values from {:.6g} to {:.6g}.{}", command, lo, hi, rows_text);
  return h;
}

}  // namespace posenc::report
