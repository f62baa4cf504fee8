// The results of `posenc experiment extrapolation` (DIR/results.json, written
// by python/posenc/experiments/extrapolation/output.py), read for the
// report's "Train short, test long" section, its comparison table and the
// tour. The reader checks the schema and reports a malformed file as an
// IoError naming the file and the key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace posenc::report {

struct ExperimentEval {
  std::int64_t length = 0;
  std::optional<double> bits_per_byte;  // empty when the scheme cannot run at this length
  std::int64_t tokens = 0;
  std::string error;  // the message, when it cannot run
};

struct ExperimentBin {
  std::int64_t start = 0, end = 0;  // positions [start, end) of the window
  double bits_per_byte = 0;
  std::int64_t tokens = 0;
};

struct ExperimentPoint {
  std::int64_t step = 0;
  std::optional<double> train_bits_per_byte;  // empty at step 0
  double val_bits_per_byte = 0;
  std::int64_t val_tokens = 0;
};

// How a fine-tuned row (rope+ft, rope+pi+ft, rope+ntk+ft, rope+yarn+ft) was
// trained on from the trained model: at `length` T for `steps` steps.
struct ExperimentFinetune {
  std::int64_t length = 0, steps = 0, tokens = 0, batch = 0;
  double fraction_of_pretraining = 0, lr = 0;
  std::string rope_type;         // "" for plain RoPE (the control)
  std::optional<double> factor;  // T / L, empty for plain RoPE
};

struct ExperimentScheme {
  std::string name, trained_as;
  std::int64_t params = 0;
  double train_tokens_per_s = 0;
  std::vector<ExperimentEval> eval;
  std::vector<ExperimentBin> loss_by_position;
  std::int64_t loss_by_position_length = 0;
  std::vector<ExperimentPoint> curve;  // trained and fine-tuned rows only
  std::int64_t curve_length = 0;       // validation window of the curve (0: L)
  std::optional<double> val_drop_last_quarter;
  std::optional<ExperimentFinetune> finetune;  // fine-tuned rows only

  const ExperimentEval* At(std::int64_t length) const;
  // bits/byte at multiple x L over bits/byte at L (empty if either is missing).
  std::optional<double> Ratio(std::int64_t multiple, std::int64_t train_length) const;
};

struct ExperimentSpeed {
  std::string attention, dtype;
  double tokens_per_s = 0;
};

struct ExperimentResults {
  std::string path;  // the results.json read
  bool quick = false;
  std::string corpus, date, cpu, dtype;
  std::int64_t train_length = 0, steps = 0, batch = 0, seed = 0, threads = 0;
  std::int64_t eval_tokens = 0, dim = 0, heads = 0, layers = 0;
  double seconds = 0, load_before = 0, load_after = 0;
  std::vector<std::int64_t> eval_lengths;
  struct SplitSize {
    std::string name;
    std::int64_t documents = 0, bytes = 0;
  };
  std::vector<SplitSize> splits;
  std::vector<ExperimentScheme> schemes;  // in the file's order
  std::vector<ExperimentSpeed> speed;

  const ExperimentScheme* Find(const std::string& name) const;
  // "quick smoke run" or "full run", with the date.
  std::string Describe() const;
};

// "T = 512, 200 steps, 819,200 tokens (20.0 % of pre-training), linear x4.0, peak lr 0.0005".
std::string FinetuneDescription(const ExperimentFinetune& f);

// The comparison table's measured cell for a scheme ("rope", "alibi", ...):
// "1.234 (2.70 -> 3.33 bits/byte)", "no value past L" (the error is quoted
// in section 9's table), "not trained: why", or
// how to produce the results when `results` is null.
std::string RatioCell(const ExperimentResults* results, const std::string& scheme,
                      const std::string& not_trained_reason);

// The fine-tuned rows of a trained scheme for its comparison-table cell:
// "; fine-tuned at T = 512 (rope+ft 1.02, rope+pi+ft 1.01, ...)", or "" when
// the results have none.
std::string FinetunedRatios(const ExperimentResults* results, const std::string& scheme);

// Reads DIR/results.json; throws IoError when it is missing or malformed.
ExperimentResults LoadExperimentResults(const std::string& dir);

// The newest results.json among `dirs` that exist (by modification time),
// or empty when none does. Never throws for a missing file.
std::optional<std::string> NewestExperimentDir(const std::vector<std::string>& dirs);

// Where the repository keeps the last full run (docs/experiments/extrapolation).
std::string RepositoryExperimentDir();

}  // namespace posenc::report
