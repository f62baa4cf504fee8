// Shared by the `posenc table METHOD` subcommands: the position options
// (--positions N [--offset K] | --position-ids LIST) and the writer of a
// float32 table as JSON, CSV or .npy.
//
// Formats (documented in each subcommand's --help):
//  - json: {"shape": [n, d], "data": [[...], ...]}; each value is the float32
//    value printed as the shortest double that round-trips, so parsing it as a
//    double and casting to float gives the float32 back bit for bit;
//  - csv: a header line `position,c0,c1,...`, then one line per row: the
//    position, then the d values (same number format);
//  - npy: a float32 [n, d] .npy file (posenc/npy.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "output.h"

namespace posenc::cli {

// Help text describing the three formats, for the subcommands' footers.
extern const char* const kTableFormatsHelp;

// The most values (rows x columns written) a table may hold, checked before
// anything is computed or allocated. `posenc table` uses the default: 2^28
// values, a 1 GiB float32 table (RoPE's own limit, 2^26 per cos or sin
// table, is lower). `posenc plot` runs the table command with the cells it
// can draw (cli/report/plot.h), so that a table too large to plot is refused
// up front, not after it was computed and written.
struct TableBudget {
  std::int64_t max_values = std::int64_t{1} << 28;
  std::string allowed = "at most 2^28 values (a 1 GiB float32 table)";
};

// Throws InvalidArgument naming `arg` (the option that set the row count)
// unless rows x cols <= budget.max_values. cols >= 1.
void RequireWithinBudget(const TableBudget& budget, const char* arg, std::int64_t rows,
                         std::int64_t cols);

// Which positions a table holds.
struct PositionOptions {
  std::int64_t num_positions = 0;  // --positions N (rows offset .. offset + N - 1)
  std::int64_t offset = 0;         // --offset K
  std::string position_ids;        // --position-ids "0,5,9" or "3:7"
};

// Adds --positions, --offset and --position-ids to `app`.
void AddPositionOptions(CLI::App& app, PositionOptions& options);

// The positions of the rows (explicit list or offset .. offset + N - 1) of a
// table with `dim` columns. Throws InvalidArgument naming the option when no
// positions are given, N < 1 or N > 2^24, an id list is malformed, or the
// table would exceed the budget (the check comes before any allocation).
std::vector<std::int64_t> ResolvePositions(const PositionOptions& options, std::int64_t dim,
                                           const TableBudget& budget = {});

// A row-major float32 table and the position of each row.
struct TableData {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<std::int64_t> positions;  // rows entries
  std::vector<float> values;            // rows * cols entries
};

// Writes `table` in `format` to `path` ("" or "-": stdout). IoError if the
// file cannot be written.
void WriteTable(const TableData& table, TableFormat format, const std::string& path);

// The shortest decimal text that reads back as double(v), e.g. "0.8414709568023682".
std::string FloatText(float v);

}  // namespace posenc::cli
