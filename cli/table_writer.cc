#include "table_writer.h"

#include <ostream>

#include <fmt/format.h>

#include "posenc/error.h"
#include "posenc/npy.h"
#include "posenc/positions.h"
#include "posenc/tensor.h"

namespace posenc::cli {

const char* const kTableFormatsHelp =
    "Formats (--format):\n"
    "  json  {\"shape\": [n, d], \"data\": [[...], ...]}: each float32 value printed as the\n"
    "        shortest double that reads back to it exactly\n"
    "  csv   a header line `position,c0,c1,...`, then one line per row: its position and d values\n"
    "  npy   a float32 [n, d] NumPy .npy file (binary; use -o FILE)\n"
    "Rows: --positions N (positions OFFSET .. OFFSET+N-1, --offset defaults to 0) or\n"
    "--position-ids LIST (\"0,5,9\" or a half-open range \"3:7\").";

void AddPositionOptions(CLI::App& app, PositionOptions& options) {
  CLI::Option* n = app.add_option("--positions", options.num_positions,
                                  "Number of rows: positions OFFSET .. OFFSET+N-1");
  CLI::Option* off = app.add_option("--offset", options.offset,
                                    "First position when --positions is used (default 0)");
  CLI::Option* ids = app.add_option("--position-ids", options.position_ids,
                                    "Explicit positions: \"0,5,9\" or a half-open range \"3:7\"");
  ids->excludes(n);
  ids->excludes(off);
}

void RequireWithinBudget(const TableBudget& budget, const char* arg, std::int64_t rows,
                         std::int64_t cols) {
  // rows * cols is not formed before the check: it could overflow int64.
  Require(rows <= budget.max_values / cols, arg, fmt::format("{} rows x {} columns", rows, cols),
          budget.allowed);
}

std::vector<std::int64_t> ResolvePositions(const PositionOptions& options, std::int64_t dim,
                                           const TableBudget& budget) {
  Require(dim >= 1, "--dim", dim, "a dimension >= 1");
  if (!options.position_ids.empty()) {
    std::vector<std::int64_t> ids = ParseIntList(options.position_ids, "--position-ids");
    Require(static_cast<std::int64_t>(ids.size()) <= kMaxPosition + 1, "--position-ids", ids.size(),
            "at most 2^24 positions");
    RequireWithinBudget(budget, "--position-ids", static_cast<std::int64_t>(ids.size()), dim);
    return ids;
  }
  Require(options.num_positions >= 1 && options.num_positions <= kMaxPosition + 1, "--positions",
          options.num_positions, "a row count in [1, 2^24] (or give --position-ids LIST instead)");
  Require(options.offset >= 0 && options.offset <= kMaxPosition - (options.num_positions - 1),
          "--offset", options.offset,
          "a first position in [0, 2^24 - N] (the rows are OFFSET .. OFFSET+N-1 < 2^24)");
  RequireWithinBudget(budget, "--positions", options.num_positions, dim);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(options.num_positions));
  for (std::int64_t r = 0; r < options.num_positions; ++r) {
    ids[static_cast<std::size_t>(r)] = options.offset + r;
  }
  return ids;
}

std::string FloatText(float v) { return fmt::format("{}", static_cast<double>(v)); }

namespace {

void WriteJson(const TableData& t, std::ostream& os) {
  os << "{\"shape\": [" << t.rows << ", " << t.cols << "], \"data\": [";
  std::string line;
  for (std::int64_t r = 0; r < t.rows && os; ++r) {  // stop at the first failed write
    line = r == 0 ? "\n  [" : ",\n  [";
    for (std::int64_t c = 0; c < t.cols; ++c) {
      if (c > 0) line += ", ";
      line += FloatText(t.values[static_cast<std::size_t>(r * t.cols + c)]);
    }
    line += "]";
    os << line;
  }
  os << "\n]}\n";
}

void WriteCsv(const TableData& t, std::ostream& os) {
  std::string line = "position";
  for (std::int64_t c = 0; c < t.cols; ++c) line += fmt::format(",c{}", c);
  os << line << '\n';
  for (std::int64_t r = 0; r < t.rows && os; ++r) {  // stop at the first failed write
    line = std::to_string(t.positions[static_cast<std::size_t>(r)]);
    for (std::int64_t c = 0; c < t.cols; ++c) {
      line += ',';
      line += FloatText(t.values[static_cast<std::size_t>(r * t.cols + c)]);
    }
    os << line << '\n';
  }
}

}  // namespace

void WriteTable(const TableData& table, TableFormat format, const std::string& path) {
  Output out(path, /*binary=*/format == TableFormat::kNpy);
  switch (format) {
    case TableFormat::kJson:
      WriteJson(table, out.stream());
      break;
    case TableFormat::kCsv:
      WriteCsv(table, out.stream());
      break;
    case TableFormat::kNpy:
      WriteNpy(
          out.stream(),
          TensorView::Contiguous(table.values.data(), DType::kFloat32, {table.rows, table.cols}),
          path.empty() || path == "-" ? std::string("stdout") : path);
      break;
  }
  out.Close();
}

}  // namespace posenc::cli
