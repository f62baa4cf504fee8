// posenc/choose.h: the request, the evidence file, the rules and the ranking.
// The rules are written once in choose.h's header comment; this file applies
// them to whatever the evidence file holds (no scheme is named as a winner
// here: scheme names appear only where a rule is about the scheme's nature,
// e.g. a fine-tuned row needs fine-tuning).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "choose_internal.h"
#include "posenc/choose.h"
#include "posenc/error.h"

namespace posenc {

using nlohmann::json;

namespace advice {

std::string Format(const char* format, ...) {
  std::array<char, 1024> buf{};
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf.data(), buf.size(), format, args);
  va_end(args);
  return buf.data();
}

json Measured(const std::string& source, const std::string& field, json value) {
  return {{"source", source}, {"field", field}, {"value", std::move(value)}};
}
json Citation(const std::string& text) { return {{"citation", text}}; }
// Evidence of an absence: the evidence file's field that holds no entry for it.
json Absent(const std::string& field, const std::string& what) {
  return Measured("docs/evidence/choose.json", field, "no entry for " + what);
}

// A number of a row's measurement (nullopt for null/absent).
std::optional<double> Number(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}

// bits/byte of `row` at length n (nullopt when absent or an error), and the
// eval entry.
const json* EvalAt(const json& row, std::int64_t n) {
  const std::string key = std::to_string(n);
  if (!row.contains("eval") || !row["eval"].contains(key)) return nullptr;
  return &row["eval"][key];
}

std::vector<std::int64_t> Multiples(const json& row) {
  std::vector<std::int64_t> m;
  const std::int64_t L = row.value("train_length", std::int64_t{0});
  if (L <= 0) return m;
  for (const auto& [k, v] : row["eval"].items()) {
    const std::int64_t n = std::stoll(k);
    if (n % L == 0) m.push_back(n / L);
  }
  std::sort(m.begin(), m.end());
  return m;
}

// The multiple of L that answers the request in `row` (smallest measured >= m).
std::int64_t MultipleFor(const json& row, double m) {
  const auto ms = Multiples(row);
  if (ms.empty()) return 1;
  for (std::int64_t x : ms) {
    if (static_cast<double>(x) >= m - 1e-9) return x;
  }
  return ms.back();
}

}  // namespace advice

namespace {

using advice::Absent;
using advice::Candidate;
using advice::Citation;
using advice::EvalAt;
using advice::Measured;
using advice::MultipleFor;
using advice::Multiples;
using advice::Number;

using advice::Format;

constexpr std::array<std::string_view, 5> kArchitectures = {"decoder", "encoder", "encoder-decoder",
                                                            "vision", "video"};
constexpr std::array<std::string_view, 3> kBudgets = {"none", "short", "full"};
constexpr std::array<std::string_view, 5> kEngines = {"transformers", "vllm", "llama.cpp",
                                                      "flash-attention", "sdpa"};

template <std::size_t N>
std::size_t ParseName(const std::array<std::string_view, N>& names, std::string_view text,
                      std::string_view arg) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == text) return i;
  }
  std::string allowed;
  for (std::size_t i = 0; i < N; ++i) allowed += (i ? ", " : "") + std::string(names[i]);
  throw InvalidArgument(std::string(arg) + ": got '" + std::string(text) + "', expected one of " +
                        allowed);
}

// ---- the evidence file ---------------------------------------------------------

json LoadEvidence(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw IoError("evidence: cannot read '" + path +
                  "' (the evidence file of posenc choose, written by scripts/make_evidence.py)");
  }
  std::stringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    throw IoError("evidence: '" + path + "' is not valid JSON");
  }
  for (const char* key : {"runs", "cost", "support", "literature", "engines"}) {
    if (!doc.contains(key)) {
      throw IoError("evidence: '" + path + "' has no '" + key +
                    "' (expected the output of scripts/make_evidence.py)");
    }
  }
  const json& runs = doc["runs"];
  if (!runs.is_array() || runs.empty() || !runs[0].is_object() || !runs[0].contains("rows") ||
      !runs[0]["rows"].is_object() || !doc["cost"].contains("schemes")) {
    throw IoError("evidence: '" + path +
                  "': 'runs' must hold at least one run with 'rows', "
                  "'cost' its 'schemes'");
  }
  return doc;
}

// ---- candidates -------------------------------------------------------------------

struct Resolved {
  ModelArchitecture architecture = ModelArchitecture::kDecoder;
  std::int64_t train = 0, target = 0;
  FinetuneBudget finetune = FinetuneBudget::kNone;
  std::vector<std::string> engines;
  std::optional<advice::FromModel> from;
  json constraints;
  // The multiple of the train length the scores are read at (>= 1).
  double ratio() const { return static_cast<double>(target) / static_cast<double>(train); }
  bool trains_at_target() const { return finetune == FinetuneBudget::kFull && !from; }
};

Resolved Resolve(const ChooseRequest& r) {
  Require(r.train_length >= 0, "train-length", r.train_length, "a positive integer");
  Require(r.target_length >= 0, "target-length", r.target_length, "a positive integer");
  Resolved o;
  json notes = json::array();
  if (!r.from.empty()) o.from = advice::LoadFromModel(r.from);
  o.architecture = r.architecture.value_or(ModelArchitecture::kDecoder);
  if (!r.architecture) {
    notes.push_back(o.from ? "architecture: decoder (every model posenc's loader reads is a "
                             "decoder-only language model)"
                           : "architecture: decoder (the default)");
  }
  o.train = r.train_length;
  if (o.train == 0 && o.from && o.from->train_length > 0) {
    o.train = o.from->train_length;
    notes.push_back(Format("train length %lld: the model's original_max_position_embeddings",
                           static_cast<long long>(o.train)));
  } else if (o.train == 0) {
    o.train = kDefaultTrainLength;
    notes.push_back(Format("train length %lld: the default (%s)", static_cast<long long>(o.train),
                           o.from ? "the file does not say" : "no --train-length"));
  }
  o.target = r.target_length;
  if (o.target == 0 && o.from && o.from->context_length > 0) {
    o.target = std::max(o.from->context_length, o.train);
    notes.push_back(Format("target length %lld: the model's max_position_embeddings",
                           static_cast<long long>(o.target)));
  } else if (o.target == 0) {
    o.target = o.train;
    notes.push_back("target length: the train length (the default)");
  }
  o.finetune = r.finetune;
  for (InferenceEngine e : r.engines) {
    const std::string name(InferenceEngineName(e));
    if (std::find(o.engines.begin(), o.engines.end(), name) == o.engines.end()) {
      o.engines.push_back(name);
    }
  }
  if (o.engines.empty() && o.from && o.from->config.format == "gguf") {
    o.engines.push_back("llama.cpp");
    notes.push_back("engine llama.cpp: implied by the GGUF file");
  }
  o.constraints = {{"architecture", ModelArchitectureName(o.architecture)},
                   {"train_length", o.train},
                   {"target_length", o.target},
                   {"target_over_train", o.ratio()},
                   {"finetune", FinetuneBudgetName(o.finetune)},
                   {"engines", o.engines},
                   {"from", r.from.empty() ? json() : json(r.from)},
                   {"tolerance", kChooseTolerance},
                   {"short_finetune_fraction", kShortFinetuneFraction},
                   {"defaults", notes}};
  if (o.from) {
    o.constraints["model"] = {{"scheme", o.from->scheme},
                              {"rope_type", o.from->rope_type},
                              {"format", o.from->config.format},
                              {"model_type", o.from->config.model_type}};
  }
  return o;
}

// ---- engines -----------------------------------------------------------------------

// Applies the support matrix: one reason per requested engine (or one that
// lists where the feature runs when no engine was named).
void ApplyEngines(Candidate& c, const json& evidence, const std::string& feature,
                  const Resolved& o) {
  const json& support = evidence["support"];
  if (!support.contains(feature)) {
    c.Cap("engine support of '" + feature + "' not recorded",
          Absent("support", "'" + feature + "'"));
    return;
  }
  const json& cells = support[feature];
  auto cell_text = [&](const std::string& engine) -> std::pair<std::string, std::string> {
    if (!cells.contains(engine) || !cells[engine].is_array() || cells[engine].size() < 2) {
      return {"unknown", "not recorded"};
    }
    return {cells[engine][0].get<std::string>(), cells[engine][1].get<std::string>()};
  };
  if (o.engines.empty()) {
    std::vector<std::string> yes;
    for (std::string_view e : kEngines) {
      if (cell_text(std::string(e)).first == "yes") yes.emplace_back(e);
    }
    std::string list;
    for (const auto& e : yes) list += (list.empty() ? "" : ", ") + e;
    c.Reason(list.empty() ? "runs in posenc's fused attention; none of " +
                                std::string("transformers, vllm, llama.cpp, flash-attention, "
                                            "sdpa runs it fully")
                          : "runs in " + list,
             Measured("docs/evidence/support.json", "features." + feature,
                      json(yes.empty() ? json::array() : json(yes))));
    return;
  }
  for (const std::string& engine : o.engines) {
    const auto [status, source] = cell_text(engine);
    const json ev = Measured("docs/evidence/support.json", "features." + feature + "." + engine,
                             status + ": " + source);
    if (status == "no") {
      c.RuleOut(engine + " lacks it (" + source + ")", ev);
    } else if (status == "partial") {
      c.Cap(engine + " supports it only partly: " + source, ev);
    } else if (status == "unknown") {
      c.Cap(engine + " support not checked: " + source, ev);
    } else {
      c.Reason(engine + " runs it: " + source, ev);
    }
  }
}

// ---- measured candidates (decoder) ------------------------------------------------

bool IsFinetuned(const json& row) { return row.contains("finetune"); }
bool IsExtension(const json& row) { return row.contains("extension") || IsFinetuned(row); }

// Is this row a candidate for the request at all?
bool RowApplies(const std::string& name, const json& row, const Resolved& o, double m) {
  if (o.from) {
    const std::string trained = row.value("trained_as", name);
    if (o.from->scheme != trained) return false;
  }
  if (m <= 1.0 + 1e-9 && IsExtension(row)) return false;  // nothing to extend
  return true;
}

// The row's measured bits/byte at the target's multiple M of its train
// length L in the default run (a reason, or a rule-out when it cannot run).
void ScoreDefaultRun(Candidate& c, const json& row, const std::string& source, std::int64_t L,
                     std::int64_t M, double m) {
  const json* at = EvalAt(row, M * L);
  const json* at1 = EvalAt(row, L);
  const auto steps = row.value("steps", std::int64_t{0});
  if (at == nullptr || !Number(*at, "bits_per_byte")) {
    const std::string err = at != nullptr ? at->value("error", std::string("no value"))
                                          : std::string("not measured at this length");
    c.RuleOut(Format("cannot run at %lldL: %s", static_cast<long long>(M), err.c_str()),
              Measured(source, at ? at->value("field", std::string()) : "", err));
  } else {
    c.score = *Number(*at, "bits_per_byte");
    std::string text = Format(
        "measured extrapolation: %.3f bits/byte at %lldL in the default "
        "run (%lld steps at L = %lld)",
        c.score, static_cast<long long>(M), static_cast<long long>(steps),
        static_cast<long long>(L));
    if (M > 1 && at1 && Number(*at1, "bits_per_byte")) {
      text += Format("; %.3f at L, %lldL / L = %.3f", *Number(*at1, "bits_per_byte"),
                     static_cast<long long>(M), c.score / *Number(*at1, "bits_per_byte"));
    }
    if (m > static_cast<double>(M) + 1e-9) {
      text += Format("; the target is %.1fL, beyond the longest measured length", m);
    }
    c.Reason(text, Measured(source, at->value("field", std::string()), c.score));
  }
}

// One reason per run after the default one: its bits/byte at M times its
// train length, or that it did not include the scheme.
void AddOtherRuns(Candidate& c, const std::string& name, const json& evidence, std::int64_t M) {
  const json& runs = evidence["runs"];
  for (std::size_t r = 1; r < runs.size(); ++r) {
    const std::string run_name = runs[r].value("name", Format("run %zu", r));
    if (!runs[r]["rows"].contains(name)) {
      c.Reason("measured in the default run only (the " + run_name + " run did not include it)",
               Measured(runs[r]["files"].dump(), "rows", nullptr));
      continue;
    }
    const json& other = runs[r]["rows"][name];
    const std::int64_t L2 = other.value("train_length", std::int64_t{0});
    const json* at2 = EvalAt(other, M * L2);
    if (at2 && Number(*at2, "bits_per_byte")) {
      c.Reason(Format("%s run (%lld steps): %.3f bits/byte at %lldL", run_name.c_str(),
                      static_cast<long long>(other.value("steps", std::int64_t{0})),
                      *Number(*at2, "bits_per_byte"), static_cast<long long>(M)),
               Measured(other.value("source", std::string()), at2->value("field", std::string()),
                        *Number(*at2, "bits_per_byte")));
    }
  }
}

// The measured cost of the row's kernel and its positional parameters, as
// reasons where the evidence has them.
void AddCost(Candidate& c, const std::string& name, const json& row, const json& evidence,
             const std::string& source) {
  const std::string bench_scheme = row.value("bench_scheme", std::string("none"));
  const json& cost = evidence["cost"];
  if (cost["schemes"].contains(bench_scheme)) {
    const json& b = cost["schemes"][bench_scheme];
    const double rel = b.value("forward_backward_relative_to_none", 0.0);
    const json& shape = cost.value("shape", json::object());
    c.Reason(Format("measured cost: attention forward + backward %.2fx the time without a "
                    "positional term (the '%s' kernel, S = %lld, %lld heads, head_dim %lld)",
                    rel, bench_scheme.c_str(),
                    static_cast<long long>(shape.value("seq", std::int64_t{0})),
                    static_cast<long long>(shape.value("heads", std::int64_t{0})),
                    static_cast<long long>(shape.value("head_dim", std::int64_t{0}))),
             Measured(cost.value("source", std::string()), b.value("field", std::string()), rel));
  }
  if (const auto params = Number(row, "positional_params")) {
    c.Reason(Format("adds %.0f positional parameters to the experiment's model", *params),
             Measured(source, "schemes." + name + ".positional_params", *params));
  }
}

// A fine-tuned row against the request's fine-tuning budget: a rule-out,
// a cap or a reason (nothing for a row that was not fine-tuned).
void AddFinetune(Candidate& c, const std::string& name, const json& row, const Resolved& o,
                 const std::string& source) {
  if (!IsFinetuned(row)) return;
  const json& ft = row["finetune"];
  const double fraction = ft.value("fraction_of_pretraining", 0.0);
  const std::string text =
      Format("fine-tuned %lld steps at length %lld (%.2f %% of the pre-training tokens)",
             static_cast<long long>(ft.value("steps", std::int64_t{0})),
             static_cast<long long>(ft.value("length", std::int64_t{0})), 100 * fraction);
  const json ev =
      Measured(source, "schemes." + name + ".finetune.fraction_of_pretraining", fraction);
  if (o.finetune == FinetuneBudget::kNone) {
    c.RuleOut("needs fine-tuning at the target length (--finetune none); measured: " + text, ev);
  } else if (o.finetune == FinetuneBudget::kShort && fraction > kShortFinetuneFraction) {
    c.Cap("measured with more fine-tuning than 'short' allows (~1 %): " + text, ev);
  } else {
    c.Reason(text, ev);
  }
}

Candidate MeasuredCandidate(const std::string& name, const json& row, const json& evidence,
                            const Resolved& o, double m) {
  Candidate c;
  c.scheme = name;
  c.measured = true;
  const std::string source = row.value("source", std::string());
  const std::int64_t L = row.value("train_length", std::int64_t{0});
  const std::int64_t M = MultipleFor(row, m);
  c.multiple = M;
  ScoreDefaultRun(c, row, source, L, M, m);
  if (o.trains_at_target()) {
    c.Reason(
        "--finetune full without --from: the model is trained at the target length, so "
        "it is ranked by its bits/byte at its train length",
        Citation("choose.h rules"));
  }
  AddOtherRuns(c, name, evidence, M);
  if (const auto drop = Number(row, "val_drop_last_quarter")) {
    c.Reason(Format("its validation loss still fell %.3f bits/byte over the last quarter of %s "
                    "(not converged)",
                    *drop, IsFinetuned(row) ? "fine-tuning" : "training"),
             Measured(source, "schemes." + name + ".val_drop_last_quarter", *drop));
  }
  AddCost(c, name, row, evidence, source);
  AddFinetune(c, name, row, o, source);
  const std::string feature = row.value("feature", std::string("none"));
  const json& lit = evidence.value("finetune_literature", json::object());
  if (IsExtension(row) && lit.contains(feature)) {
    c.Reason("from the literature: " + lit[feature].value("text", std::string()),
             Citation(lit[feature].value("citation", std::string())));
  }
  ApplyEngines(c, evidence, feature, o);
  return c;
}

// ---- literature candidates ------------------------------------------------------------

Candidate LiteratureCandidate(const json& entry, int order, const json& evidence, const Resolved& o,
                              double m) {
  Candidate c;
  c.scheme = entry.value("scheme", std::string());
  c.order = order;
  c.literature_verdict = entry.value("verdict", std::string("possible"));
  const std::string citation = entry.value("citation", std::string());
  const std::string text = "from the literature: " + entry.value("text", std::string());
  if (c.literature_verdict == "ruled out") {
    c.RuleOut(entry.value("text", std::string()), Citation(citation));
  } else {
    c.Reason(text, Citation(citation));
  }
  if (o.architecture != ModelArchitecture::kDecoder) {
    c.Reason("not measured: posenc's experiment trains decoder-only language models",
             Absent("runs[].rows",
                    "a '" + std::string(ModelArchitectureName(o.architecture)) + "' model"));
  }
  // A table with rows only up to L cannot serve positions past it (measured:
  // the experiment's learned row), whatever the architecture.
  if (c.scheme == "learned" && m > 1.0 + 1e-9) {
    const json& rows = evidence["runs"][0]["rows"];
    json ev = Absent("runs[0].rows", "'learned'");
    std::string err = "positions past its rows are errors";
    if (rows.contains("learned")) {
      for (const auto& [len, e] : rows["learned"]["eval"].items()) {
        if (e.contains("error")) {
          err = e.value("error", err);
          ev = Measured(rows["learned"].value("source", std::string()),
                        e.value("field", std::string()), err);
          break;
        }
      }
    }
    if (o.finetune == FinetuneBudget::kNone) {
      c.RuleOut("a learned table cannot run past its rows: " + err, ev);
    } else {
      c.Cap(
          "needs its table resized (posenc::ResizeLearnedTable) and trained at the target "
          "length: " +
              err,
          ev);
    }
  }
  ApplyEngines(c, evidence, entry.value("feature", c.scheme), o);
  return c;
}

// ---- ranking ---------------------------------------------------------------------------

// The measurement files behind the answer, by their repository names (the
// evidence file names itself in "path", so the answer does not depend on
// where it was installed).
json EvidenceFiles(const json& evidence, const std::string& path) {
  json files = json::array({evidence.value("path", path)});
  for (const json& run : evidence["runs"]) {
    for (const json& f : run.value("files", json::array())) {
      files.push_back(f.value("source", std::string()));
    }
  }
  files.push_back(evidence["cost"].value("source", std::string()));
  files.push_back("docs/evidence/support.json");
  return files;
}

}  // namespace

std::string_view ModelArchitectureName(ModelArchitecture a) {
  return kArchitectures[static_cast<std::size_t>(a)];
}
std::string_view FinetuneBudgetName(FinetuneBudget f) {
  return kBudgets[static_cast<std::size_t>(f)];
}
std::string_view InferenceEngineName(InferenceEngine e) {
  return kEngines[static_cast<std::size_t>(e)];
}
ModelArchitecture ParseModelArchitecture(std::string_view text, std::string_view arg) {
  return static_cast<ModelArchitecture>(ParseName(kArchitectures, text, arg));
}
FinetuneBudget ParseFinetuneBudget(std::string_view text, std::string_view arg) {
  return static_cast<FinetuneBudget>(ParseName(kBudgets, text, arg));
}
InferenceEngine ParseInferenceEngine(std::string_view text, std::string_view arg) {
  return static_cast<InferenceEngine>(ParseName(kEngines, text, arg));
}

std::string ChooseEncodingJson(const ChooseRequest& request, const std::string& evidence_path) {
  const Resolved o = Resolve(request);
  const json evidence = LoadEvidence(evidence_path);
  const double m = o.trains_at_target() ? 1.0 : o.ratio();
  std::vector<Candidate> cs;
  const std::string arch(ModelArchitectureName(o.architecture));
  const json& literature = evidence["literature"];
  if (o.architecture == ModelArchitecture::kDecoder) {
    for (const auto& [name, row] : evidence["runs"][0]["rows"].items()) {
      if (RowApplies(name, row, o, m)) cs.push_back(MeasuredCandidate(name, row, evidence, o, m));
    }
  }
  if (literature.contains(arch) && (!o.from || o.architecture != ModelArchitecture::kDecoder)) {
    int order = 0;
    for (const json& entry : literature[arch]) {
      cs.push_back(LiteratureCandidate(entry, order++, evidence, o, m));
    }
  }
  // With --from: the model's current scaling (when it has one) and, for the
  // RoPE candidates, the exact change.
  if (o.from && o.from->scheme == "rope") {
    if (o.from->rope_type != "default") {
      Candidate keep;
      keep.scheme = "rope+" + o.from->rope_type;
      keep.literature_verdict = "possible";
      keep.order = 1000;
      keep.Reason("the model's current scaling (" + o.from->rope_type +
                      "); not measured: the experiment has no row for it",
                  Absent("runs[].rows", "'rope+" + o.from->rope_type + "'"));
      keep.config = {{"change", "none"}};
      ApplyEngines(keep, evidence, "rope:" + o.from->rope_type, o);
      cs.push_back(std::move(keep));
    }
    for (Candidate& c : cs) {
      if (!c.measured || c.ruled_out) continue;
      const json& row = evidence["runs"][0]["rows"][c.scheme];
      const std::string feature = row.value("feature", std::string("rope"));
      const std::string type = feature.rfind("rope:", 0) == 0 ? feature.substr(5) : "default";
      c.config = advice::SuggestRopeChange(*o.from, type, o.train, o.target);
    }
  } else if (o.from) {
    for (Candidate& c : cs) {
      if (c.measured && !c.ruled_out) {
        c.config = {{"change", "none"},
                    {"note",
                     "no position table or frequencies to change: set the engine's "
                     "context length to the target"}};
      }
    }
  }
  if (o.architecture == ModelArchitecture::kDecoder && o.from && cs.empty()) {
    Candidate none;
    none.scheme = o.from->scheme;
    none.Reason("not measured: posenc's experiment has no row for a '" + o.from->scheme + "' model",
                Absent("runs[].rows", "'" + o.from->scheme + "'"));
    cs.push_back(std::move(none));
  }
  Rank(cs);
  AddStability(cs, evidence, m);
  json out;
  out["constraints"] = o.constraints;
  out["candidates"] = json::array();
  for (const Candidate& c : cs) {
    json j = {{"scheme", c.scheme}, {"verdict", c.verdict}, {"reasons", c.reasons}};
    if (c.measured && std::isfinite(c.score)) {
      j["score_bits_per_byte"] = c.score;
      j["score_length_multiple"] = c.multiple;
    }
    if (!c.config.is_null()) j["config"] = c.config;
    out["candidates"].push_back(std::move(j));
  }
  out["evidence"] = {{"files", EvidenceFiles(evidence, evidence_path)}};
  return out.dump(1);
}

}  // namespace posenc
