// The report's data model: sections made of charts (Vega-Lite specs over a
// table of records), heatmaps (a dense matrix drawn by the page's renderer)
// and plain tables. The section builders (cli/report/section_*.cc) fill it
// from the public API only; cli/report/html.cc turns it into one
// self-contained HTML file and writes the data behind each figure as CSV.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace posenc::report {

using Json = nlohmann::ordered_json;

// A Vega-Lite chart. `spec` is a complete Vega-Lite spec except for its top
// data, which is `records` (an array of flat objects whose keys, in order,
// are the CSV columns of the data file).
struct Chart {
  std::string id;  // file-safe: [a-z0-9_]+, unique in the report
  std::string title;
  std::string caption;  // plain text; the numbers it quotes are measured
  Json spec;
  Json records = Json::array();

  // Appends one record; throws std::logic_error for a non-finite number
  // (JSON has no NaN: a NaN here is a bug in the builder, not user input).
  void Add(Json record);
};

// Colour scales of heatmaps.
enum class ColorScheme : std::uint8_t {
  kSequential,  // viridis, domain [min, max]
  kDiverging,   // blue-white-red, domain [-max|v|, max|v|] (white at 0)
};

// A rows x cols matrix of finite values, row-major. Row r is drawn at
// y = y0 + r (top to bottom), column c at x = x0 + c.
struct Heatmap {
  std::string id;
  std::string title;
  std::string caption;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<double> values;
  std::string x_title = "column";
  std::string y_title = "row";
  std::string value_title = "value";
  std::int64_t x0 = 0;
  std::int64_t y0 = 0;
  ColorScheme scheme = ColorScheme::kSequential;

  // Checks rows, cols >= 1, values.size() == rows*cols and every value
  // finite; throws std::logic_error naming the figure otherwise.
  void Check() const;
};

// A plain table (e.g. the comparison table, the permutation demonstration).
struct Table {
  std::string id;
  std::string title;
  std::string caption;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  // Optional, shaped like rows: the target of each cell's link ("#fig-ID" or
  // "#SECTION" in the page; "" for none). The CSV keeps the cell text.
  std::vector<std::vector<std::string>> links;
  // Footnotes: a cell keeps a short text and refers to note n as "[n]"
  // (Noted); the page lists the notes under the table, the CSV writes each
  // marker as "[n: note]" so the data file stands alone.
  std::vector<std::string> notes;

  // `text` with `note` (if any) added as the next footnote: "text [n]".
  std::string Noted(const std::string& text, const std::string& note) {
    if (note.empty()) return text;
    notes.push_back(note);
    return text + " [" + std::to_string(notes.size()) + "]";
  }
};

using Block = std::variant<Chart, Heatmap, Table>;

struct Section {
  std::string id;  // anchor, file-safe
  std::string title;
  std::vector<std::string> paragraphs;  // plain text, escaped on output
  std::vector<Block> blocks;
  std::vector<std::string> summary;  // one-line highlights for the terminal
};

struct Report {
  std::string title = "posenc report";
  std::string subtitle;
  std::vector<Section> sections;
  // Lines for the terminal summary (measured highlights).
  std::vector<std::string> summary;
};

// The id / title of any block.
const std::string& BlockId(const Block& block);
const std::string& BlockTitle(const Block& block);

}  // namespace posenc::report
