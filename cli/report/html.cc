// HTML assembly and data files of the report (see html.h).
#include "html.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "assets.h"
#include "atomic_file.h"
#include "experiment.h"
#include "playground.h"
#include "posenc/error.h"

#if !defined(POSENC_NODE_MODULES_DIR) || !defined(POSENC_EXAMPLES_DIR)
#error "POSENC_NODE_MODULES_DIR and POSENC_EXAMPLES_DIR must be defined (cli/CMakeLists.txt)"
#endif

namespace posenc::report {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw IoError("chart library: cannot read '" + path.string() +
                  "'; run scripts/setup.sh (it runs `npm ci`) or set POSENC_NODE_MODULES to a "
                  "node_modules directory holding vega, vega-lite and vega-embed");
  }
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// JSON inside <script type="application/json">: "</" and "<!--" must not
// appear; in JSON text they can only occur inside strings, where "<\/" and
// "<\u0021" are valid escapes of the same characters.
// Copied run by run between the '<' found (figure data reach tens of MB).
std::string JsonScriptSafe(std::string text) {
  if (text.find('<') == std::string::npos) return text;
  std::string out;
  out.reserve(text.size() + 64);
  std::size_t start = 0;
  while (true) {
    const std::size_t lt = text.find('<', start);
    if (lt == std::string::npos) break;
    out.append(text, start, lt - start);
    const char next = lt + 1 < text.size() ? text[lt + 1] : '\0';
    if (next == '/' || next == '!') {
      out += next == '/' ? "<\\/" : "<\\u0021";
      start = lt + 2;
    } else {
      out += '<';
      start = lt + 1;
    }
  }
  out.append(text, start, std::string::npos);
  return out;
}

// JS inside <script>: only "</script" ends the element early. The bundles
// contain none; should one appear in a string, "<\/script" is the same text.
// (A blanket "</" rewrite would break regex literals such as /</g.)
std::string JsScriptSafe(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '<' && i + 7 < text.size() && text[i + 1] == '/') {
      std::string tag = text.substr(i + 2, 6);
      for (char& ch : tag) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (tag == "script") {
        out += "<\\/";
        ++i;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

std::string Escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string CsvCell(const Json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number()) return fmt::format("{:.9g}", v.get<double>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string CsvText(std::string_view s) { return CsvCell(Json(std::string(s))); }

// Compact number for the inlined data (4-5 significant digits is below what
// a colour or a pixel can show; the CSV files keep 9).
void AppendCompact(std::string& out, double v) {
  if (v == 0.0) {
    out += '0';
    return;
  }
  out += fmt::format("{:.5g}", v);
}

void AppendHeatmapJson(std::string& out, const Heatmap& h) {
  h.Check();
  Json meta = {{"id", h.id},
               {"kind", "heatmap"},
               {"rows", h.rows},
               {"cols", h.cols},
               {"x0", h.x0},
               {"y0", h.y0},
               {"x_title", h.x_title},
               {"y_title", h.y_title},
               {"value_title", h.value_title},
               {"scheme", h.scheme == ColorScheme::kDiverging ? "diverging" : "sequential"}};
  std::string m = meta.dump();
  m.pop_back();  // reopen the object to append the values
  out += m;
  out += ",\"values\":[";
  for (std::size_t i = 0; i < h.values.size(); ++i) {
    if (i) out += ',';
    AppendCompact(out, h.values[i]);
  }
  out += "]}";
}

void AppendChartJson(std::string& out, const Chart& c) {
  Json spec = c.spec;
  spec["data"] = {{"values", c.records}};
  // Single and layered views get a default size; facets size their cells.
  if (spec.contains("mark") || spec.contains("layer")) {
    if (!spec.contains("width")) spec["width"] = 420;
    if (!spec.contains("height")) spec["height"] = 260;
  }
  Json f = {{"id", c.id}, {"kind", "chart"}, {"spec", spec}};
  out += f.dump();
}

std::string CaptionHtml(const std::string& caption, const std::string& id) {
  std::string out = "<figcaption>" + Escape(caption);
  out += " <a href=\"data/" + id + ".csv\">Data (CSV)</a></figcaption>";
  return out;
}

std::string TableHtml(const Table& t) {
  std::string out = "<div class=\"scroll\"><table><thead><tr>";
  for (const auto& h : t.header) out += "<th>" + Escape(h) + "</th>";
  out += "</tr></thead><tbody>";
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    const auto& row = t.rows[r];
    out += "<tr>";
    for (std::size_t i = 0; i < row.size(); ++i) {
      const std::string& cell = row[i];
      const bool num =
          i > 0 && !cell.empty() &&
          (std::isdigit(static_cast<unsigned char>(cell[0])) || cell[0] == '-' || cell[0] == '+');
      out += num ? "<td class=\"num\">" : "<td>";
      const std::string link =
          r < t.links.size() && i < t.links[r].size() ? t.links[r][i] : std::string();
      out +=
          link.empty() ? Escape(cell) : "<a href=\"" + Escape(link) + "\">" + Escape(cell) + "</a>";
      out += "</td>";
    }
    out += "</tr>";
  }
  out += "</tbody></table></div>";
  if (!t.notes.empty()) {
    out += "<ol class=\"notes\">";
    for (const std::string& note : t.notes) out += "<li>" + Escape(note) + "</li>";
    out += "</ol>";
  }
  return out;
}

// A table cell for the CSV: each footnote marker "[n]" written as "[n: note]".
std::string CsvCellWithNotes(const Table& t, const std::string& cell) {
  std::string out;
  std::size_t at = 0;
  while (at < cell.size()) {
    const std::size_t open = cell.find('[', at);
    const std::size_t close = open == std::string::npos ? open : cell.find(']', open);
    if (close == std::string::npos) break;
    const std::string inside = cell.substr(open + 1, close - open - 1);
    const bool number = !inside.empty() && inside.size() < 4 &&
                        inside.find_first_not_of("0123456789") == std::string::npos;
    const std::size_t n = number ? std::stoul(inside) : 0;
    out += cell.substr(at, close + 1 - at);
    if (n >= 1 && n <= t.notes.size()) out.insert(out.size() - 1, ": " + t.notes[n - 1]);
    at = close + 1;
  }
  return out + cell.substr(std::min(at, cell.size()));
}

std::string BlockHtml(const Block& block) {
  const std::string& id = BlockId(block);
  if (const auto* t = std::get_if<Table>(&block)) {
    return "<figure class=\"wide\" id=\"fig-" + id + "\"><h3>" + Escape(t->title) + "</h3>" +
           TableHtml(*t) + CaptionHtml(t->caption, id) + "</figure>";
  }
  const std::string& caption = std::holds_alternative<Chart>(block)
                                   ? std::get<Chart>(block).caption
                                   : std::get<Heatmap>(block).caption;
  return "<figure id=\"fig-" + id + "\"><h3>" + Escape(BlockTitle(block)) +
         "</h3><div class=\"chart\" id=\"chart-" + id + "\"></div>" + CaptionHtml(caption, id) +
         "</figure>";
}

// The playground's section body: the panels' root (web/playground.js fills
// it) or the line that says why there is no module. `in_report`: below the
// report's static figures.
std::string PlaygroundBody(const PlaygroundModule& m, bool in_report) {
  std::string out = in_report ? "<p>Every figure above was computed once, when this page was "
                                "written. Here posenc's own C++"
                              : "<p>posenc's own C++";
  out +=
      ", compiled to WebAssembly, runs in the page: change a parameter and each chart is "
      "recomputed by the same code the command line runs.</p>\n";
  if (!m.available()) {
    return out + "<p class=\"pg-unavailable\">The live playground is not in this page: " +
           Escape(m.unavailable) + ".</p>\n";
  }
  return out +
         "<noscript><p class=\"pg-unavailable\">The live playground needs JavaScript."
         "</p></noscript><div id=\"playground-root\"></div>\n";
}

// The module, its presets and the playground's scripts (after the renderer).
std::string PlaygroundScripts(const PlaygroundModule& m) {
  if (!m.available()) return "";
  std::string out;
  out.reserve(m.wasm_base64.size() + m.loader_js.size() + 65536);
  out += "<script type=\"application/octet-stream\" id=\"posenc-wasm\">" + m.wasm_base64 +
         "</script>\n";
  out += "<script type=\"application/json\" id=\"posenc-presets\">" +
         JsonScriptSafe(m.presets_json) + "</script>\n";
  out += "<script>" + JsScriptSafe(m.loader_js) + "</script>\n";
  out += "<script>" + JsScriptSafe(std::string(PosencApiScript())) + "</script>\n";
  out += "<script>" + JsScriptSafe(std::string(PlaygroundScript())) + "</script>\n";
  return out;
}

std::string Page(const std::string& title, const std::string& subtitle, const std::string& nav,
                 const std::string& body, const std::string& figures_json, const ChartLibrary& lib,
                 const PlaygroundModule* playground = nullptr) {
  std::string out;
  out.reserve(lib.vega.size() + lib.vega_lite.size() + lib.vega_embed.size() + figures_json.size() +
              body.size() + 65536);
  out += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<title>" + Escape(title) + "</title>\n<style>" + std::string(ReportCss()) +
         (playground != nullptr ? std::string(PlaygroundCss()) : std::string()) + "</style>\n";
  out += "<script>" + JsScriptSafe(lib.vega) + "</script>\n";
  out += "<script>" + JsScriptSafe(lib.vega_lite) + "</script>\n";
  out += "<script>" + JsScriptSafe(lib.vega_embed) + "</script>\n";
  out += "</head><body>\n<header><h1>" + Escape(title) + "</h1><p>" + Escape(subtitle) +
         "</p></header>\n";
  out += nav;
  out += "<main>\n";
  out += body;
  out += "</main>\n";
  out +=
      "<footer>Generated by posenc. Every figure's menu (…) saves it as PNG or SVG; hovering "
      "shows values; the data behind each figure is in data/ beside this file.</footer>\n";
  out += "<script type=\"application/json\" id=\"posenc-figures\">";
  out += figures_json;
  out += "</script>\n";
  out += "<script>" + JsScriptSafe(std::string(ReportScript())) + "</script>\n";
  if (playground != nullptr) out += PlaygroundScripts(*playground);
  out += "</body></html>\n";
  return out;
}

// Whole file or nothing (cli/atomic_file.h).
void WriteText(const fs::path& path, const std::string& text) {
  cli::WriteFileAtomically(path.string(), text, "-o");
}

std::string FiguresJson(const std::vector<const Block*>& blocks) {
  std::string out = "{\"figures\":[";
  bool first = true;
  for (const Block* b : blocks) {
    if (std::holds_alternative<Table>(*b)) continue;
    if (!first) out += ',';
    first = false;
    if (const auto* c = std::get_if<Chart>(b)) AppendChartJson(out, *c);
    if (const auto* h = std::get_if<Heatmap>(b)) AppendHeatmapJson(out, *h);
  }
  out += "]}";
  return JsonScriptSafe(std::move(out));
}

}  // namespace

namespace {

// PREFIX/share/posenc/SUB for an executable installed as PREFIX/bin/posenc,
// when that directory exists; "" otherwise.
std::string InstalledData(const char* sub) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  fs::path dir = exe.parent_path().parent_path();
  dir /= "share";
  dir /= "posenc";
  dir /= sub;
  return fs::is_directory(dir, ec) ? dir.string() : "";
}

}  // namespace

std::string NodeModulesDir() {
  if (const char* env = std::getenv("POSENC_NODE_MODULES"); env != nullptr && *env != '\0') {
    return env;
  }
  if (std::string installed = InstalledData("node_modules"); !installed.empty()) return installed;
  return POSENC_NODE_MODULES_DIR;
}

std::string EvidencePath() {
  if (std::string installed = InstalledData("evidence"); !installed.empty()) {
    return installed + "/choose.json";
  }
  return std::string(POSENC_SOURCE_DIR_FOR_REPORT) + "/docs/evidence/choose.json";
}

std::string DefaultExperimentDir() {
  if (std::string installed = InstalledData("experiments/extrapolation"); !installed.empty()) {
    return installed;
  }
  return RepositoryExperimentDir();
}

std::string ExamplesDir() {
  if (std::string installed = InstalledData("configs"); !installed.empty()) return installed;
  return POSENC_EXAMPLES_DIR;
}

ChartLibrary LoadChartLibrary() {
  const fs::path dir = NodeModulesDir();
  ChartLibrary lib;
  lib.vega = ReadFile(dir / "vega" / "build" / "vega.min.js");
  lib.vega_lite = ReadFile(dir / "vega-lite" / "build" / "vega-lite.min.js");
  lib.vega_embed = ReadFile(dir / "vega-embed" / "build" / "vega-embed.min.js");
  return lib;
}

std::string BlockCsv(const Block& block) {
  std::string out;
  if (const auto* c = std::get_if<Chart>(&block)) {
    if (c->records.empty()) return out;
    bool first = true;
    for (const auto& [key, value] : c->records.front().items()) {
      out += (first ? "" : ",") + CsvText(key);
      first = false;
    }
    out += '\n';
    for (const auto& rec : c->records) {
      first = true;
      for (const auto& [key, value] : c->records.front().items()) {
        out += first ? "" : ",";
        first = false;
        if (rec.contains(key)) out += CsvCell(rec[key]);
      }
      out += '\n';
    }
  } else if (const auto* h = std::get_if<Heatmap>(&block)) {
    h->Check();
    out += CsvText(h->y_title + " \\ " + h->x_title);
    for (std::int64_t col = 0; col < h->cols; ++col) out += fmt::format(",{}", h->x0 + col);
    out += '\n';
    for (std::int64_t r = 0; r < h->rows; ++r) {
      out += fmt::format("{}", h->y0 + r);
      for (std::int64_t col = 0; col < h->cols; ++col) {
        out += fmt::format(",{:.9g}", h->values[static_cast<std::size_t>(r * h->cols + col)]);
      }
      out += '\n';
    }
  } else {
    const auto& t = std::get<Table>(block);
    for (std::size_t i = 0; i < t.header.size(); ++i) out += (i ? "," : "") + CsvText(t.header[i]);
    out += '\n';
    for (const auto& row : t.rows) {
      for (std::size_t i = 0; i < row.size(); ++i) {
        out += (i ? "," : "") + CsvText(CsvCellWithNotes(t, row[i]));
      }
      out += '\n';
    }
  }
  return out;
}

std::string FigureDataJson(const Report& report) {
  std::vector<const Block*> blocks;
  for (const auto& s : report.sections) {
    for (const auto& b : s.blocks) blocks.push_back(&b);
  }
  return FiguresJson(blocks);
}

std::string RenderHtml(const Report& report, const ChartLibrary& library,
                       const PlaygroundModule* playground) {
  std::string nav = "<nav>";
  std::string body;
  int number = 0;
  for (const auto& s : report.sections) {
    ++number;
    const std::string heading = fmt::format("{}. {}", number, s.title);
    nav += "<a href=\"#" + s.id + "\">" + Escape(heading) + "</a>";
    body += "<section id=\"" + s.id + "\"><h2>" + Escape(heading) + "</h2>\n";
    for (const auto& p : s.paragraphs) body += "<p>" + Escape(p) + "</p>\n";
    body += "<div class=\"blocks\">\n";
    for (const auto& b : s.blocks) body += BlockHtml(b) + "\n";
    body += "</div></section>\n";
  }
  if (playground != nullptr) {
    const std::string heading = fmt::format("{}. Playground: change a parameter", ++number);
    nav += "<a href=\"#playground\">" + Escape(heading) + "</a>";
    body += "<section id=\"playground\"><h2>" + Escape(heading) + "</h2>\n" +
            PlaygroundBody(*playground, true) + "</section>\n";
  }
  nav += "</nav>\n";
  return Page(report.title, report.subtitle, nav, body, FigureDataJson(report), library,
              playground);
}

std::string WriteReport(const Report& report, const ChartLibrary& library, const std::string& dir,
                        const PlaygroundModule* playground) {
  // The page and its data are built in DIR.tmp-XXXXXX and swapped in whole:
  // a failure leaves a previous report in DIR untouched.
  cli::AtomicDirectory folder(dir, "-o", {"index.html", "data"});
  const fs::path root = folder.temp_dir();
  std::error_code ec;
  fs::create_directories(root / "data", ec);
  if (ec) {
    throw IoError("-o: cannot create directory '" + (root / "data").string() +
                  "': " + ec.message());
  }
  for (const auto& s : report.sections) {
    for (const auto& b : s.blocks) WriteText(root / "data" / (BlockId(b) + ".csv"), BlockCsv(b));
  }
  WriteText(root / "index.html", RenderHtml(report, library, playground));
  folder.Commit();
  return (fs::path(dir) / "index.html").string();
}

void WriteSingleFigure(const Block& block, const std::string& subtitle, const ChartLibrary& library,
                       const std::string& path) {
  std::string body = "<section><div class=\"blocks\">" + BlockHtml(block) + "</div></section>";
  // A single page has no data directory: drop the CSV link.
  const std::string link = " <a href=\"data/" + BlockId(block) + ".csv\">Data (CSV)</a>";
  if (auto pos = body.find(link); pos != std::string::npos) body.erase(pos, link.size());
  const std::vector<const Block*> blocks{&block};
  WriteText(fs::path(path),
            Page(BlockTitle(block), subtitle, "", body, FiguresJson(blocks), library));
}

std::string WritePlayground(const ChartLibrary& library, const PlaygroundModule& playground,
                            const std::string& dir) {
  if (!playground.available()) throw IoError("playground: " + playground.unavailable);
  cli::AtomicDirectory folder(dir, "-o", {"index.html"});
  const std::string body =
      "<section id=\"playground\">" + PlaygroundBody(playground, false) + "</section>\n";
  WriteText(folder.temp_dir() / "index.html",
            Page("posenc playground", "Positional encodings, computed live by posenc in the page",
                 "", body, "{\"figures\":[]}", library, &playground));
  folder.Commit();
  return (fs::path(dir) / "index.html").string();
}

}  // namespace posenc::report
