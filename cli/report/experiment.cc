// Reader of the extrapolation experiment's results.json (see experiment.h).
#include "experiment.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "posenc/error.h"
#include "properties.h"

#ifndef POSENC_SOURCE_DIR_FOR_REPORT
#error "POSENC_SOURCE_DIR_FOR_REPORT must be defined by the build (cli/CMakeLists.txt)"
#endif

namespace posenc::report {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

// Reads a key with a clear error: "<file>: key 'schemes.rope.eval[2].length': expected ...".
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  const json& Get(const json& j, const std::string& key, const std::string& where) const {
    if (!j.is_object() || !j.contains(key)) Fail(where + key, "present");
    return j.at(key);
  }
  std::int64_t Int(const json& j, const std::string& key, const std::string& where) const {
    const json& v = Get(j, key, where);
    if (!v.is_number_integer()) Fail(where + key, "an integer");
    return v.get<std::int64_t>();
  }
  double Num(const json& j, const std::string& key, const std::string& where) const {
    const json& v = Get(j, key, where);
    if (!v.is_number()) Fail(where + key, "a number");
    return v.get<double>();
  }
  std::optional<double> NumOrNull(const json& j, const std::string& key,
                                  const std::string& where) const {
    const json& v = Get(j, key, where);
    if (v.is_null()) return std::nullopt;
    if (!v.is_number()) Fail(where + key, "a number or null");
    return v.get<double>();
  }
  std::string Str(const json& j, const std::string& key, const std::string& where) const {
    const json& v = Get(j, key, where);
    if (!v.is_string()) Fail(where + key, "a string");
    return v.get<std::string>();
  }
  const json& Array(const json& j, const std::string& key, const std::string& where) const {
    const json& v = Get(j, key, where);
    if (!v.is_array()) Fail(where + key, "an array");
    return v;
  }
  [[noreturn]] void Fail(const std::string& key, const std::string& expected) const {
    throw IoError(
        fmt::format("--experiment: '{}' is not an extrapolation results file: key '{}' "
                    "is not {}",
                    file_, key, expected));
  }

 private:
  std::string file_;
};

ExperimentScheme ReadScheme(const Reader& r, const std::string& name, const json& s) {
  const std::string w = "schemes." + name + ".";
  ExperimentScheme out;
  out.name = name;
  out.trained_as = r.Str(s, "trained_as", w);
  out.params = r.Int(s, "params", w);
  out.train_tokens_per_s = r.Num(s, "train_tokens_per_s", w);
  int i = 0;
  for (const json& e : r.Array(s, "eval", w)) {
    const std::string we = fmt::format("{}eval[{}].", w, i++);
    ExperimentEval ev;
    ev.length = r.Int(e, "length", we);
    ev.bits_per_byte = r.NumOrNull(e, "bits_per_byte", we);
    ev.tokens = r.Int(e, "tokens", we);
    if (e.contains("error")) ev.error = r.Str(e, "error", we);
    if (!ev.bits_per_byte && ev.error.empty())
      r.Fail(we + "error", "a message (null bits_per_byte)");
    out.eval.push_back(ev);
  }
  i = 0;
  for (const json& b : r.Array(s, "loss_by_position", w)) {
    const std::string wb = fmt::format("{}loss_by_position[{}].", w, i++);
    out.loss_by_position.push_back({r.Int(b, "start", wb), r.Int(b, "end", wb),
                                    r.Num(b, "bits_per_byte", wb), r.Int(b, "tokens", wb)});
  }
  if (s.contains("loss_by_position_length") && !s.at("loss_by_position_length").is_null()) {
    out.loss_by_position_length = r.Int(s, "loss_by_position_length", w);
  }
  if (s.contains("curve")) {
    i = 0;
    for (const json& c : r.Array(s, "curve", w)) {
      const std::string wc = fmt::format("{}curve[{}].", w, i++);
      out.curve.push_back({r.Int(c, "step", wc), r.NumOrNull(c, "train_bits_per_byte", wc),
                           r.Num(c, "val_bits_per_byte", wc), r.Int(c, "val_tokens", wc)});
    }
  }
  if (s.contains("val_drop_last_quarter")) {
    out.val_drop_last_quarter = r.NumOrNull(s, "val_drop_last_quarter", w);
  }
  if (s.contains("curve_length") && !s.at("curve_length").is_null()) {
    out.curve_length = r.Int(s, "curve_length", w);
  }
  if (s.contains("finetune") && !s.at("finetune").is_null()) {
    const json& f = r.Get(s, "finetune", w);
    const std::string wf = w + "finetune.";
    ExperimentFinetune ft;
    ft.length = r.Int(f, "length", wf);
    ft.steps = r.Int(f, "steps", wf);
    ft.tokens = r.Int(f, "tokens", wf);
    ft.fraction_of_pretraining = r.Num(f, "fraction_of_pretraining", wf);
    if (f.contains("batch")) ft.batch = r.Int(f, "batch", wf);
    if (f.contains("lr")) ft.lr = r.Num(f, "lr", wf);
    if (f.contains("rope_type") && !f.at("rope_type").is_null())
      ft.rope_type = r.Str(f, "rope_type", wf);
    if (f.contains("factor")) ft.factor = r.NumOrNull(f, "factor", wf);
    out.finetune = ft;
  }
  return out;
}

}  // namespace

const ExperimentEval* ExperimentScheme::At(std::int64_t length) const {
  for (const auto& e : eval) {
    if (e.length == length) return &e;
  }
  return nullptr;
}

std::optional<double> ExperimentScheme::Ratio(std::int64_t multiple,
                                              std::int64_t train_length) const {
  const ExperimentEval* a = At(train_length);
  const ExperimentEval* b = At(multiple * train_length);
  if (a == nullptr || b == nullptr || !a->bits_per_byte || !b->bits_per_byte) return std::nullopt;
  return *b->bits_per_byte / *a->bits_per_byte;
}

const ExperimentScheme* ExperimentResults::Find(const std::string& name) const {
  for (const auto& s : schemes) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string ExperimentResults::Describe() const {
  return fmt::format("{} of {} ({})",
                     quick ? "QUICK smoke run (--quick: few steps, not the "
                             "measurement)"
                           : "full run",
                     date, path);
}

std::string RatioCell(const ExperimentResults* r, const std::string& scheme,
                      const std::string& not_trained_reason) {
  if (r == nullptr) return "no results (posenc experiment extrapolation; report --experiment)";
  const std::string quick = r->quick ? " [quick run]" : "";
  const ExperimentScheme* s = r->Find(scheme);
  if (s == nullptr) {
    return not_trained_reason.empty() ? "not in this run" + quick
                                      : "not trained: " + not_trained_reason;
  }
  const ExperimentEval* a = s->At(r->train_length);
  const ExperimentEval* b = s->At(4 * r->train_length);
  if (a == nullptr || b == nullptr) return "4L not evaluated in this run" + quick;
  // The message itself is in section 9's table (once on the page).
  if (!b->bits_per_byte) return "no value past L (it errors there; message in section 9)" + quick;
  if (!a->bits_per_byte) return "no value at L: " + a->error + quick;
  return fmt::format("{:.3f} ({:.3f} -> {:.3f} bits/byte, L = {}){}",
                     *b->bits_per_byte / *a->bits_per_byte, *a->bits_per_byte, *b->bits_per_byte,
                     r->train_length, quick);
}

std::string FinetuneDescription(const ExperimentFinetune& f) {
  return fmt::format("T = {}, {} steps{}, {} tokens ({:.1f} % of pre-training), {}{}", f.length,
                     f.steps, f.batch > 0 ? fmt::format(" of {} windows", f.batch) : "",
                     Thousands(f.tokens), 100.0 * f.fraction_of_pretraining,
                     f.rope_type.empty()
                         ? std::string("plain RoPE (no scaling)")
                         : fmt::format("{} x{:g}", f.rope_type, f.factor.value_or(0)),
                     f.lr > 0 ? fmt::format(", peak lr {:g}", f.lr) : "");
}

std::string FinetunedRatios(const ExperimentResults* r, const std::string& scheme) {
  if (r == nullptr) return "";
  std::string cells;
  std::int64_t length = 0;
  for (const auto& s : r->schemes) {
    if (!s.finetune || s.trained_as != scheme) continue;
    const auto ratio = s.Ratio(4, r->train_length);
    const ExperimentEval* b = s.At(4 * r->train_length);
    cells += fmt::format(
        "{}{} {}", cells.empty() ? "" : ", ", s.name,
        ratio ? fmt::format("{:.3f} ({:.3f} at 4L)", *ratio, *b->bits_per_byte) : std::string("-"));
    length = s.finetune->length;
  }
  if (cells.empty()) return "";
  return fmt::format("; fine-tuned at T = {}: {}", length, cells);
}

ExperimentResults LoadExperimentResults(const std::string& dir) {
  const std::string file = (fs::path(dir) / "results.json").string();
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw IoError("--experiment: cannot read '" + file +
                  "' (run `posenc experiment "
                  "extrapolation -o " +
                  dir + "` first)");
  }
  std::ostringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::exception& e) {
    throw IoError("--experiment: '" + file + "' is not valid JSON (" + e.what() + ")");
  }
  const Reader r(file);
  ExperimentResults out;
  out.path = file;
  const json& c = r.Get(j, "config", "");
  out.quick = r.Get(c, "quick", "config.").is_boolean() && c.at("quick").get<bool>();
  out.train_length = r.Int(c, "train_length", "config.");
  out.steps = r.Int(c, "steps", "config.");
  out.seed = r.Int(c, "seed", "config.");
  out.threads = r.Int(c, "threads", "config.");
  out.seconds = r.Num(c, "seconds", "config.");
  for (const json& n : r.Array(c, "eval_lengths", "config.")) {
    if (!n.is_number_integer()) r.Fail("config.eval_lengths", "an array of integers");
    out.eval_lengths.push_back(n.get<std::int64_t>());
  }
  out.batch = c.value("batch", 0);
  out.eval_tokens = c.value("eval_tokens", 0);
  out.dtype = c.value("dtype", "");
  out.date = c.value("date", "");
  const json& corpus = r.Get(c, "corpus", "config.");
  out.corpus = corpus.is_object() ? corpus.value("description", "") : "";
  for (const char* split : {"train", "validation", "test"}) {
    if (corpus.is_object() && corpus.contains(split)) {
      const json& sp = corpus.at(split);
      out.splits.push_back({split, r.Int(sp, "documents", fmt::format("config.corpus.{}.", split)),
                            r.Int(sp, "bytes", fmt::format("config.corpus.{}.", split))});
    }
  }
  if (c.contains("model") && c.at("model").is_object()) {
    out.dim = c.at("model").value("dim", 0);
    out.heads = c.at("model").value("heads", 0);
    out.layers = c.at("model").value("layers", 0);
  }
  if (c.contains("machine") && c.at("machine").is_object())
    out.cpu = c.at("machine").value("cpu", "");
  if (c.contains("load_average") && c.at("load_average").is_object()) {
    out.load_before = c.at("load_average").value("before", 0.0);
    out.load_after = c.at("load_average").value("after", 0.0);
  }
  if (c.contains("speed") && c.at("speed").is_array()) {
    for (const json& s : c.at("speed")) {
      out.speed.push_back(
          {s.value("attention", ""), s.value("dtype", ""), s.value("tokens_per_s", 0.0)});
    }
  }
  const json& schemes = r.Get(j, "schemes", "");
  if (!schemes.is_object() || schemes.empty())
    r.Fail("schemes", "an object with one entry per scheme");
  for (const auto& [name, s] : schemes.items()) out.schemes.push_back(ReadScheme(r, name, s));
  return out;
}

std::optional<std::string> NewestExperimentDir(const std::vector<std::string>& dirs) {
  std::optional<std::string> best;
  fs::file_time_type best_time{};
  for (const auto& d : dirs) {
    std::error_code ec;
    const auto t = fs::last_write_time(fs::path(d) / "results.json", ec);
    if (ec) continue;
    if (!best || t > best_time) {
      best = d;
      best_time = t;
    }
  }
  return best;
}

std::string RepositoryExperimentDir() {
  return (fs::path(POSENC_SOURCE_DIR_FOR_REPORT) / "docs" / "experiments" / "extrapolation")
      .string();
}

}  // namespace posenc::report
