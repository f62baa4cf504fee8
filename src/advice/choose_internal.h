// Private to src/advice/: the pieces of posenc/choose.h shared by its two
// files (choose.cc: request, evidence, rules and ranking; choose_config.cc:
// the exact config change for an existing model, checked by the loader).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/model_config.h"

namespace posenc::advice {

using nlohmann::json;

// snprintf into a std::string (the library does not link fmt).
std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));

// Evidence of a reason: a measurement's file, field and value; a citation;
// an absence (the evidence file's field that has no entry for `what`).
json Measured(const std::string& source, const std::string& field, json value);
json Citation(const std::string& text);
json Absent(const std::string& field, const std::string& what);

// A number of a row's measurement (nullopt for null/absent).
std::optional<double> Number(const json& j, const char* key);
// The eval entry of `row` at length n (null when not measured).
const json* EvalAt(const json& row, std::int64_t n);
// The measured multiples of the row's train length, ascending.
std::vector<std::int64_t> Multiples(const json& row);
// The multiple of L that answers a request at target / train = m: the
// smallest measured one >= m, else the longest.
std::int64_t MultipleFor(const json& row, double m);

// One answer candidate while the rules run.
struct Candidate {
  std::string scheme;
  std::string verdict;  // filled by Rank()
  json reasons = json::array();
  json config;  // with --from
  bool measured = false;
  bool ruled_out = false;
  bool capped = false;  // at most "possible"
  std::string literature_verdict;
  double score = std::numeric_limits<double>::infinity();
  std::int64_t multiple = 0;  // the score is bits/byte at multiple x L
  int order = 0;              // literature order

  void Reason(std::string text, json evidence) {
    reasons.push_back({{"text", std::move(text)}, {"evidence", std::move(evidence)}});
  }
  void RuleOut(std::string text, json evidence) {
    ruled_out = true;
    Reason("ruled out: " + std::move(text), std::move(evidence));
  }
  void Cap(std::string text, json evidence) {
    capped = true;
    Reason(std::move(text), std::move(evidence));
  }
};

// choose_rank.cc: verdicts and order (recommended within kChooseTolerance of
// the best uncapped measured score, then possible, then ruled out), and the
// stability of each measured candidate across the committed runs (after Rank).
void Rank(std::vector<Candidate>& cs);
void AddStability(std::vector<Candidate>& cs, const json& evidence, double m);

// The model given by --from: its loaded config, the raw text of a
// config.json ("" for GGUF) and what choose reads from it.
struct FromModel {
  std::string path;
  ModelConfig config;
  std::string json_text;            // config.json text; empty for GGUF
  std::string scheme;               // "rope", "alibi", "mrope" (what it runs now)
  std::string rope_type;            // the current rope type ("default", "llama3", ...)
  std::int64_t train_length = 0;    // original_max_position_embeddings (0: unknown)
  std::int64_t context_length = 0;  // max_position_embeddings (0: unknown)
};

// Loads and classifies a --from file (IoError / ConfigError from the loader).
FromModel LoadFromModel(const std::string& path);

// The exact change that gives `model` the RoPE frequency scheme `rope_type`
// ("default" = unscaled RoPE, "linear", "dynamic", "ntk", "yarn") for a model
// trained at `train` and used at `target` tokens, checked by loading the
// changed config (config.json) or by posenc's scaling code (GGUF), with the
// wavelengths of a few pairs before and after. Throws ConfigError if the
// change does not load (a bug: the test suite runs it on every golden config).
nlohmann::json SuggestRopeChange(const FromModel& model, const std::string& rope_type,
                                 std::int64_t train, std::int64_t target);

}  // namespace posenc::advice
