// Report section 11: choosing an encoding (the lesson's closing question).
//
// The lesson's comparison table, method x property, filled from measurements:
// bounded, relative and unique are measured here exactly as in the
// comparison-table section (compare.h); continuous follows from each method's
// formula; measured extrapolation, cost, parameters and engines come from the
// evidence file of `posenc choose` (docs/evidence/choose.json, written by
// scripts/make_evidence.py from the committed experiment runs, the
// bench/scheme_cost.py benchmark and the support matrix), shown here in two
// tables of their own so that every cell links to its figure or source. Then
// worked examples: posenc::ChooseEncodingJson on four typical requests.
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compare.h"
#include "html.h"
#include "posenc/choose.h"
#include "posenc/error.h"
#include "properties.h"
#include "sections.h"

namespace posenc::report {
namespace {

using nlohmann::json;

json ReadEvidence(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError("report: cannot read the evidence file '" + path + "'");
  std::stringstream s;
  s << in.rdbuf();
  json e = json::parse(s.str(), nullptr, false);
  if (e.is_discarded() || !e.contains("runs")) {
    throw IoError("report: '" + path + "' is not the evidence file of posenc choose");
  }
  return e;
}

// One method of the table: its comparison-table measurement and its names
// in the evidence (experiment row, benchmark scheme, support feature).
struct Method {
  MethodMeasure measure;
  std::string row;      // "" when the experiment does not train it
  std::string bench;    // benchmark scheme ("" when not benchmarked)
  std::string feature;  // support-matrix feature
  std::string continuous;
  std::string anchor;  // the section that shows it
};

std::string RatioText(const json& evidence, const std::string& row) {
  if (row.empty()) return "not measured (no fused kernel to train with)";
  std::string out;
  for (const json& run : evidence["runs"]) {
    if (!run["rows"].contains(row)) continue;
    const json& r = run["rows"][row];
    const std::string L = std::to_string(r.value("train_length", 0));
    const std::string L4 = std::to_string(4 * r.value("train_length", 0));
    const json& a = r["eval"][L]["bits_per_byte"];
    const json& b = r["eval"][L4]["bits_per_byte"];
    std::string cell = a.is_number() && b.is_number()
                           ? fmt::format("{:.3f}", b.get<double>() / a.get<double>())
                           : "error past L";
    out += fmt::format("{}{} {}", out.empty() ? "" : "; ", run.value("name", ""), cell);
  }
  return out.empty() ? "not measured" : out;
}

std::string EnginesText(const json& evidence, const std::string& feature) {
  if (!evidence["support"].contains(feature)) return "not recorded";
  std::string yes, part;
  for (const auto& [engine, cell] : evidence["support"][feature].items()) {
    const std::string st = cell[0].get<std::string>();
    if (st == "yes") yes += (yes.empty() ? "" : ", ") + engine;
    if (st == "partial") part += (part.empty() ? "" : ", ") + engine;
  }
  std::string out = yes.empty() ? "none fully" : yes;
  if (!part.empty()) out += " (partly: " + part + ")";
  return out;
}

Table PropertyTable(const std::vector<Method>& methods, const json& evidence, std::int64_t L) {
  Table t;
  t.id = "choose_properties";
  t.title = "Which encoding has which property (the lesson's comparison table)";
  t.header = {"method",
              "bounded",
              "continuous",
              "relative",
              "unique",
              "measured extrapolation: 4L ÷ L bits/byte (default run; 3x run)",
              "measured cost: attention fwd+bwd ÷ none",
              "positional parameters (experiment model)",
              "engines that run it"};
  const json& cost = evidence["cost"]["schemes"];
  for (const Method& m : methods) {
    const MethodMeasure& x = m.measure;
    std::string params = "-";
    if (!m.row.empty() && evidence["runs"][0]["rows"].contains(m.row)) {
      params = Thousands(evidence["runs"][0]["rows"][m.row].value("positional_params", 0));
    }
    const std::string costs =
        !m.bench.empty() && cost.contains(m.bench)
            ? fmt::format("{:.2f}x", cost[m.bench].value("forward_backward_relative_to_none", 0.0))
            : "not benchmarked (no fused kernel)";
    t.rows.push_back({x.method, x.bounded ? "yes" : "no", m.continuous,
                      x.shift_change < 1e-6 ? "yes" : fmt::format("no ({})", Sci(x.shift_change)),
                      x.min_code_distance >= 0
                          ? fmt::format("yes (min distance {})", Sci(x.min_code_distance))
                          : fmt::format("by distance: {} values", x.distinct_distances),
                      RatioText(evidence, m.row), costs, params, EnginesText(evidence, m.feature)});
    t.links.push_back({"#" + m.anchor, "#fig-comparison", "#" + m.anchor, "#fig-comparison",
                       "#fig-comparison", m.row.empty() ? "#fig-choose_sources" : "#experiment",
                       "#fig-choose_cost", "#fig-choose_cost", "#fig-choose_engines"});
  }
  t.caption = fmt::format(
      "bounded, relative, unique: measured in this report (the comparison table's method, L = {}); "
      "continuous: whether the positional term is a continuous function of the position or "
      "distance (its formula: a lookup or bucket jumps). Extrapolation: bits/byte at 4L over at L "
      "in the committed runs of posenc experiment extrapolation (below 1: the longer context "
      "helps). Cost: bench/scheme_cost.py. Engines: the support matrix (docs/evidence/"
      "support.json, a source per cell). Each cell links to the figure or table it comes from.",
      L);
  return t;
}

Table CostTable(const json& evidence) {
  Table t;
  t.id = "choose_cost";
  const json& c = evidence["cost"];
  const json& shape = c["shape"];
  t.title = "Measured cost of each scheme in posenc's fused attention";
  t.header = {"scheme", "forward (ms)", "forward ÷ none", "forward + backward ÷ none"};
  for (const auto& [name, r] : c["schemes"].items()) {
    t.rows.push_back({name, fmt::format("{:.2f}", r.value("forward_ms", 0.0)),
                      fmt::format("{:.2f}", r.value("forward_relative_to_none", 0.0)),
                      fmt::format("{:.2f}", r.value("forward_backward_relative_to_none", 0.0))});
  }
  t.caption = fmt::format(
      "From {} ({}; {}, {} threads, {}): batch 1, S = {}, {} heads, head_dim {}, causal, float32; "
      "rounds alternate over the schemes, median. Command: {}",
      c.value("source", ""), c.value("date", ""), c["machine"].value("cpu", ""),
      c.value("threads", 0), c["machine"].value("simd_target", ""), shape.value("seq", 0),
      shape.value("heads", 0), shape.value("head_dim", 0), c.value("command", ""));
  return t;
}

Table EngineTable(const json& evidence) {
  Table t;
  t.id = "choose_engines";
  t.title = "Which engine runs which scheme (support matrix with sources)";
  t.header = {"scheme / feature"};
  std::vector<std::string> engines;
  for (const auto& [name, desc] : evidence["engines"].items()) {
    engines.push_back(name);
    t.header.push_back(name);
  }
  for (const auto& [feature, cells] : evidence["support"].items()) {
    std::vector<std::string> row = {feature};
    for (const std::string& e : engines) {
      row.push_back(cells.contains(e)
                        ? cells[e][0].get<std::string>() + ": " + cells[e][1].get<std::string>()
                        : "not recorded");
    }
    t.rows.push_back(row);
  }
  t.caption =
      "yes / partial / no / unknown, each with the file or document that shows it (docs/evidence/"
      "support.json; shared/reference/positional-encodings-survey.md names the files read).";
  return t;
}

Table SourcesTable(const json& evidence) {
  Table t;
  t.id = "choose_sources";
  t.title = "Where posenc has no measurement: the literature";
  t.header = {"architecture", "scheme", "verdict", "what it says", "source"};
  for (const auto& [arch, entries] : evidence["literature"].items()) {
    for (const json& e : entries) {
      t.rows.push_back({arch, e.value("scheme", ""), e.value("verdict", ""), e.value("text", ""),
                        e.value("citation", "")});
    }
  }
  t.caption =
      "The evidence file's literature list: posenc's experiment trains decoder-only "
      "language models, so encoders, vision and video models are answered from papers.";
  return t;
}

struct Example {
  std::string id, title, command;
  ChooseRequest request;
};

Table ExampleTable(const Example& ex, const std::string& evidence_path) {
  const json a = json::parse(ChooseEncodingJson(ex.request, evidence_path));
  Table t;
  t.id = ex.id;
  t.title = ex.title;
  t.header = {"rank",          "scheme",
              "verdict",       "score (bits/byte at mL in the experiment)",
              "first reasons", "change to the model"};
  int rank = 1;
  for (const json& c : a["candidates"]) {
    std::string reasons;
    int n = 0;
    for (const json& r : c["reasons"]) {
      if (n++ == 2) break;
      reasons += (reasons.empty() ? "" : " | ") + r["text"].get<std::string>();
    }
    std::string change = "-";
    if (c.contains("config")) {
      const json& cfg = c["config"];
      if (cfg.contains("merge_patch")) {
        change =
            cfg["merge_patch"].dump() +
            fmt::format(" (checked: {} x{:.3g}, attention factor {:.4g})",
                        cfg["checked"].value("rope_type", ""), cfg["checked"].value("factor", 0.0),
                        cfg["checked"].value("attention_factor", 0.0));
      } else if (cfg.contains("llama.cpp") && cfg["llama.cpp"].is_string()) {
        change = cfg["llama.cpp"].get<std::string>();
      } else if (cfg.contains("change")) {
        change = cfg["change"].get<std::string>();
      }
    }
    t.rows.push_back({std::to_string(rank++), c["scheme"].get<std::string>(),
                      c["verdict"].get<std::string>(),
                      c.contains("score_bits_per_byte")
                          ? fmt::format("{:.3f} at {}L", c["score_bits_per_byte"].get<double>(),
                                        c.value("score_length_multiple", 1))
                          : "-",
                      reasons, change});
  }
  t.caption = "`" + ex.command + "` (" + a["constraints"].value("architecture", "") +
              "; the full answer, every reason with its evidence: the same command, or --json).";
  return t;
}

// The comparison setup of section 11: the report's sizes, one timing repeat.
CompareSetup ChooseSetup(const ReportOptions& options) {
  const ReportSizes sizes = SizesFor(options.detail);
  CompareSetup setup;
  setup.length = sizes.unique_positions;
  setup.shift_length = sizes.shift_length;
  setup.timing_repeats = 1;
  setup.threads = options.threads;
  return setup;
}

// Every method of the comparison, measured on `setup`, with its names and links.
std::vector<Method> MeasuredMethods(const CompareSetup& setup) {
  return {
      {MeasureSinusoidal(setup), "sinusoidal", "none", "sinusoidal", "yes (sin, cos of p)",
       "sinusoidal"},
      {MeasureLearned(setup), "learned", "none", "learned", "no (a row per position)", "learned"},
      {MeasureRope(setup), "rope", "rope", "rope", "yes (angles p θ_i)", "rope"},
      {MeasureAlibi(setup), "alibi", "alibi", "alibi", "yes (linear in i - j)", "alibi"},
      {MeasureT5(setup), "t5", "t5", "t5", "no (buckets)", "relative"},
      {MeasureShaw(setup), "shaw", "shaw", "shaw", "no (clipped lookup)", "relative"},
      {MeasureTransformerXL(setup), "", "", "transformer_xl", "yes (sinusoidal R)", "relative"},
      {MeasureDeberta(setup), "", "", "deberta", "no (log buckets)", "relative"},
      {MeasureFire(setup), "fire", "fire", "fire", "yes (MLP of log distance)", "fig-comparison"}};
}

// The worked examples, in the order shown: a decoder, Llama 3.1 without and
// with fine-tuning, an encoder, a vision transformer.
std::vector<Example> WorkedExamples() {
  const std::string llama = ExamplesDir() + "/llama-3.1-8b.json";
  std::vector<Example> examples;
  {
    Example e{"choose_example_decoder",
              "A new decoder trained at 2,048 tokens, used at 8,192",
              "posenc choose --train-length 2048 --target-length 8192",
              {}};
    e.request.train_length = 2048;
    e.request.target_length = 8192;
    examples.push_back(e);
  }
  for (FinetuneBudget ft : {FinetuneBudget::kNone, FinetuneBudget::kShort}) {
    Example e{
        ft == FinetuneBudget::kNone ? "choose_example_llama" : "choose_example_llama_ft",
        std::string("Extending Llama 3.1 (8,192 trained, 131,072 configured) to 524,288 ") +
            (ft == FinetuneBudget::kNone ? "without fine-tuning" : "with a short fine-tuning"),
        "posenc choose --from llama-3.1-8b.json --target-length 524288 --finetune " +
            std::string(FinetuneBudgetName(ft)),
        {}};
    e.request.from = llama;
    e.request.target_length = 524288;
    e.request.finetune = ft;
    examples.push_back(e);
  }
  {
    Example e{"choose_example_encoder",
              "An encoder trained at 512 tokens, used at 2,048",
              "posenc choose --architecture encoder --train-length 512 --target-length 2048",
              {}};
    e.request.architecture = ModelArchitecture::kEncoder;
    e.request.train_length = 512;
    e.request.target_length = 2048;
    examples.push_back(e);
  }
  {
    Example e{"choose_example_vision",
              "A vision transformer (patches)",
              "posenc choose --architecture vision",
              {}};
    e.request.architecture = ModelArchitecture::kVision;
    examples.push_back(e);
  }
  return examples;
}

}  // namespace

Section ChooseSection(const ReportOptions& options) {
  const std::string path = EvidencePath();
  const json evidence = ReadEvidence(path);
  const CompareSetup setup = ChooseSetup(options);
  const std::vector<Method> methods = MeasuredMethods(setup);
  Section s;
  s.id = "choose";
  s.title = "Choosing an encoding";
  s.paragraphs = {
      "Which positional encoding for which model? posenc answers from its own measurements: "
      "`posenc choose` (and posenc.choose in Python) ranks the candidates for a model's "
      "architecture, train and target lengths, fine-tuning budget and engines, and gives every "
      "reason with the file and field of the measurement behind it, or a cited paper where "
      "posenc has no measurement.",
      fmt::format("Evidence: {} (written by scripts/make_evidence.py from the committed runs of "
                  "the experiment, the scheme-cost benchmark and the engine support matrix).",
                  evidence.value("path", path))};
  s.blocks.emplace_back(PropertyTable(methods, evidence, setup.length));
  s.blocks.emplace_back(CostTable(evidence));
  s.blocks.emplace_back(EngineTable(evidence));
  s.blocks.emplace_back(SourcesTable(evidence));
  for (const Example& e : WorkedExamples()) {
    Table t = ExampleTable(e, path);
    if (!t.rows.empty()) {
      s.summary.push_back(fmt::format("choose: {}: {} ({})", e.id, t.rows[0][1], t.rows[0][2]));
    }
    s.blocks.emplace_back(std::move(t));
  }
  return s;
}

}  // namespace posenc::report
