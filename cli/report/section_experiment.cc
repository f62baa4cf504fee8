// Report section "Train short, test long": the results of `posenc experiment
// extrapolation` (experiment.h), read from `posenc report --experiment DIR`.
//
// Figures: bits per byte against evaluation length per scheme (log x, the
// train length L marked), the loss by position inside the longest window,
// the training curves (validation bits/byte against step), the fine-tuning
// curves of the +ft rows (validation at their target length T against
// fine-tuning step; only when the run has them), and a table with every
// number, the tokens it averages and each fine-tuned row's settings. Schemes that cannot run at a
// length (the learned table past L) appear as their error message, never as
// a point. Without --experiment the report reads the committed run
// (DefaultExperimentDir, html.h) and says so; without any results the section
// says how to produce them.
#include <fmt/format.h>

#include "charts.h"
#include "experiment.h"
#include "properties.h"
#include "sections.h"

namespace posenc::report {
namespace {

std::string Bpb(const std::optional<double>& v) {
  return v ? fmt::format("{:.4f}", *v) : std::string("-");
}

Chart LengthChart(const ExperimentResults& r, std::vector<std::string>& errors) {
  Chart c = MakeChart(
      "experiment_length", "Bits per byte against evaluation length (trained at L)",
      WithRules(LineSpec({"length", "evaluation length (bytes)", AxisScale::kLog},
                         {"bits_per_byte", "bits per byte (test)"}, {"scheme", "scheme", true}),
                "x", {{static_cast<double>(r.train_length), "train length L"}}));
  for (const auto& s : r.schemes) {
    for (const auto& e : s.eval) {
      if (e.bits_per_byte) {
        c.Add({{"scheme", s.name},
               {"length", e.length},
               {"bits_per_byte", *e.bits_per_byte},
               {"tokens", e.tokens}});
      } else {
        errors.push_back(fmt::format("{} at {}", s.name, e.length));
      }
    }
  }
  c.caption = fmt::format(
      "Each point averages the same {} held-out test bytes (Brown test documents never seen in "
      "training), cut into non-overlapping windows of the evaluation length. Lower is better; a "
      "scheme that extrapolates gets flat or falling curves past L (more context), one that does "
      "not rises.{}",
      Thousands(r.eval_tokens),
      errors.empty()
          ? ""
          : " Not drawn (the scheme cannot run there; its error is in the table below): " +
                errors.front() +
                (errors.size() > 1 ? fmt::format(" (and {} more lengths)", errors.size() - 1)
                                   : std::string()) +
                ".");
  return c;
}

Chart PositionChart(const ExperimentResults& r) {
  const std::int64_t longest = r.eval_lengths.empty() ? 0 : r.eval_lengths.back();
  Chart c = MakeChart(
      "experiment_position", fmt::format("Loss by position inside a window of {} bytes", longest),
      WithRules(LineSpec({"position", "position in the window (bin start)"},
                         {"bits_per_byte", "bits per byte (test)"}, {"scheme", "scheme", false}),
                "x", {{static_cast<double>(r.train_length), "L"}}));
  std::int64_t tokens = 0;
  for (const auto& s : r.schemes) {
    for (const auto& b : s.loss_by_position) {
      c.Add({{"scheme", s.name},
             {"position", b.start},
             {"end", b.end},
             {"bits_per_byte", b.bits_per_byte},
             {"tokens", b.tokens},
             {"window", s.loss_by_position_length}});
      tokens = std::max(tokens, b.tokens);
    }
  }
  c.caption = fmt::format(
      "Binned loss at each position of the longest windows ({} bytes; a scheme that cannot run "
      "there shows its longest length instead). Each bin averages {} bytes. Left of L every "
      "scheme is in its training range; right of it only the extrapolation remains.",
      longest, Thousands(tokens));
  return c;
}

// One record per validation point of a scheme's curve from step `from_step`
// on (with its window length when `with_length`); returns the validation
// bytes of the last point (`tokens` when there is none).
std::int64_t AddCurve(Chart& c, const ExperimentScheme& s, std::int64_t from_step, bool with_length,
                      std::int64_t tokens) {
  for (const auto& p : s.curve) {
    if (p.step < from_step) continue;
    Json rec = {{"scheme", s.name},
                {"step", p.step},
                {"val_bits_per_byte", p.val_bits_per_byte},
                {"val_tokens", p.val_tokens}};
    if (with_length) rec["length"] = s.curve_length;
    if (p.train_bits_per_byte) rec["train_bits_per_byte"] = *p.train_bits_per_byte;
    c.Add(rec);
    tokens = p.val_tokens;
  }
  return tokens;
}

Chart CurveChart(const ExperimentResults& r) {
  Chart c =
      MakeChart("experiment_training", "Training curves: validation bits per byte against step",
                LineSpec({"step", "optimiser step"},
                         {"val_bits_per_byte", "bits per byte (validation, at L)"},
                         {"scheme", "scheme", false}));
  std::int64_t tokens = 0;
  for (const auto& s : r.schemes) {
    if (s.finetune) continue;  // drawn at T in FinetuneChart
    // Step 0 is left out: the untrained loss (8 bits) would flatten the plot.
    tokens = AddCurve(c, s, /*from_step=*/1, /*with_length=*/false, tokens);
  }
  c.caption = fmt::format(
      "Validation loss on {} bytes of held-out validation documents at the train length, every "
      "{} steps; {} windows of {} bytes per step, the same data order for every scheme. How much "
      "each curve still fell over the last quarter of training: the table's last column.",
      Thousands(tokens),
      r.schemes.empty() || r.schemes.front().curve.size() < 2 ? 0 : r.schemes.front().curve[1].step,
      r.batch, r.train_length);
  return c;
}

const ExperimentFinetune* FirstFinetune(const ExperimentResults& r) {
  for (const auto& s : r.schemes) {
    if (s.finetune) return &*s.finetune;
  }
  return nullptr;
}

Chart FinetuneChart(const ExperimentResults& r, const ExperimentFinetune& f) {
  Chart c = MakeChart(
      "experiment_finetune",
      fmt::format("Fine-tuning curves: validation bits per byte at T = {} against step", f.length),
      LineSpec(
          {"step", "fine-tuning step"},
          {"val_bits_per_byte", fmt::format("bits per byte (validation, at T = {})", f.length)},
          {"scheme", "scheme", false}));
  std::int64_t tokens = 0;
  for (const auto& s : r.schemes) {
    if (s.finetune) tokens = AddCurve(c, s, /*from_step=*/0, /*with_length=*/true, tokens);
  }
  c.caption = fmt::format(
      "Each +ft row starts from the same trained rope weights (step 0: the trained model with "
      "the row's fixed scaling, before any fine-tuning) and trains on at T = {} with the same "
      "optimiser settings, seed and data order: {}. Validation on {} bytes of held-out "
      "validation documents in windows of T. rope+ft is the control: long windows without "
      "scaling.",
      f.length, FinetuneDescription(f), Thousands(tokens));
  return c;
}

Table ResultsTable(const ExperimentResults& r) {
  Table t;
  t.id = "experiment_table";
  t.title = "Train short, test long: every number";
  t.header = {"scheme", "trained as", "parameters", "training tokens/s"};
  for (std::int64_t n : r.eval_lengths) {
    t.header.push_back(
        fmt::format("bits/byte at {} ({}L)", n, n / std::max<std::int64_t>(r.train_length, 1)));
  }
  t.header.push_back("4L ÷ L");
  t.header.push_back(
      "validation drop over the last quarter (of training at L; +ft rows: of fine-tuning at T)");
  const ExperimentFinetune* ft = FirstFinetune(r);
  if (ft != nullptr) t.header.push_back("fine-tuning");
  for (const auto& s : r.schemes) {
    std::vector<std::string> row = {s.name, s.trained_as, Thousands(s.params),
                                    fmt::format("{:.0f}", s.train_tokens_per_s)};
    std::int64_t first_error = 0;  // the message once, then a pointer to it
    for (std::int64_t n : r.eval_lengths) {
      const ExperimentEval* e = s.At(n);
      if (e == nullptr) {
        row.push_back("-");
      } else if (e->bits_per_byte) {
        row.push_back(fmt::format("{:.4f}", *e->bits_per_byte));
      } else if (first_error == 0 || e->error != s.At(first_error)->error) {
        row.push_back("error: " + e->error);
        first_error = n;
      } else {
        row.push_back(fmt::format("error (as at {})", first_error));
      }
    }
    const auto ratio = s.Ratio(4, r.train_length);
    row.push_back(ratio ? fmt::format("{:.3f}", *ratio) : "-");
    row.push_back(s.val_drop_last_quarter ? fmt::format("{:.4f}", *s.val_drop_last_quarter) : "-");
    if (ft != nullptr) row.push_back(s.finetune ? FinetuneDescription(*s.finetune) : "-");
    t.rows.push_back(std::move(row));
  }
  t.caption = fmt::format(
      "Test bits per byte ({} bytes per length); rope+pi, rope+ntk and rope+yarn are the trained "
      "rope model evaluated with PI (linear), dynamic NTK and YaRN frequencies from posenc's "
      "scaling code (factor = length / L), no training.{} training tokens/s: measured during "
      "this run ({} threads, {}){}.",
      Thousands(r.eval_tokens),
      ft == nullptr
          ? ""
          : fmt::format(
                " The +ft rows are the trained rope model fine-tuned at T = {} (rope+ft: no "
                "scaling, the control; rope+pi+ft: linear, rope+ntk+ft: static NTK-aware base, "
                "rope+yarn+ft: YaRN, each with the fixed factor T / L = {:g} at every length).",
                ft->length,
                static_cast<double>(ft->length) / std::max<std::int64_t>(r.train_length, 1)),
      r.threads, r.cpu, ft == nullptr ? "" : "; for the +ft rows: while fine-tuning at T");
  return t;
}

}  // namespace

Section ExperimentSection(const ReportOptions& options) {
  Section s;
  s.id = "experiment";
  s.title = "Train short, test long";
  if (!options.experiment) {
    s.paragraphs = {
        "What each encoding does past the length it was trained at, measured in small trained "
        "models on real text (Press et al. 2022, Figure 1; Peng et al. 2023).",
        "No results in this report. Produce them with `posenc experiment extrapolation -o DIR` "
        "(about 14-20 minutes on 2 cores; --quick for a 2- to 4-minute smoke run), then "
        "`posenc report --experiment DIR`."};
    s.summary.push_back("experiment: no results (posenc report --experiment DIR)");
    return s;
  }
  const ExperimentResults& r = *options.experiment;
  std::string splits;
  for (const auto& sp : r.splits) {
    splits += fmt::format("{}{} {} documents / {} bytes", splits.empty() ? "" : ", ", sp.name,
                          sp.documents, Thousands(sp.bytes));
  }
  s.paragraphs = {
      options.experiment_is_default
          ? fmt::format(
                "Results of the committed run of `posenc experiment extrapolation` "
                "(docs/experiments/extrapolation, installed with the CLI), used by default: {} "
                "on {} ({} threads). `posenc report --experiment DIR` replaces it with your own "
                "run.",
                r.Describe(), r.cpu, r.threads)
          : fmt::format("Results of `posenc experiment extrapolation`: {}.", r.Describe()),
      fmt::format(
          "One byte-level decoder-only transformer per scheme (d = {}, {} heads, {} layers, "
          "pre-LayerNorm, GELU MLP, tied embeddings), identical except for its positional part, "
          "trained for {} steps of {} windows of L = {} bytes ({}, seed {}) with posenc's fused "
          "attention forward and backward, then evaluated on held-out text at L and beyond. "
          "Corpus: {} ({}). Run time {:.0f} s on {} threads ({}; load average {:.1f} before, "
          "{:.1f} after).",
          r.dim, r.heads, r.layers, r.steps, r.batch, r.train_length, r.dtype, r.seed, r.corpus,
          splits, r.seconds, r.threads, r.cpu, r.load_before, r.load_after)};
  if (r.quick) {
    s.paragraphs.push_back(
        "This is a QUICK smoke run (--quick): the models are barely trained and the test sample "
        "is small. Its numbers show that the pipeline works, not what the schemes do; run "
        "without --quick for the measurement.");
  }
  if (!r.speed.empty()) {
    std::string speed;
    for (const auto& sp : r.speed) {
      speed += fmt::format("{}{} attention, {}: {:.0f}", speed.empty() ? "" : "; ", sp.attention,
                           sp.dtype, sp.tokens_per_s);
    }
    s.paragraphs.push_back(
        "Training speed of the alibi model end to end (tokens/s, same run): " + speed + ".");
  }
  std::vector<std::string> errors;
  s.blocks.emplace_back(LengthChart(r, errors));
  s.blocks.emplace_back(PositionChart(r));
  s.blocks.emplace_back(CurveChart(r));
  if (const ExperimentFinetune* ft = FirstFinetune(r)) {
    s.paragraphs.push_back(fmt::format(
        "Fine-tuned context extension (rows ending in +ft; Chen et al. 2023, PI; Peng et al. "
        "2023, YaRN): after training, the rope model trains on at the target length T = {} "
        "once per frequency scheme, each from the same trained weights with the same optimiser, "
        "seed and data order: {}. Each row is then evaluated like the others, past T too. "
        "rope+ft (no scaling) is the control: what having seen long windows does on its own.",
        ft->length, FinetuneDescription(*ft)));
    s.blocks.emplace_back(FinetuneChart(r, *ft));
  }
  s.blocks.emplace_back(ResultsTable(r));
  for (const auto& sc : r.schemes) {
    const auto ratio = sc.Ratio(4, r.train_length);
    s.summary.push_back(fmt::format(
        "experiment{}: {} bits/byte at L {}, 4L/L {}{}", r.quick ? " (quick)" : "", sc.name,
        Bpb(sc.At(r.train_length) ? sc.At(r.train_length)->bits_per_byte : std::nullopt),
        ratio ? fmt::format("{:.3f}", *ratio) : "-",
        sc.finetune ? fmt::format(" (fine-tuned: {})", FinetuneDescription(*sc.finetune)) : ""));
  }
  return s;
}

}  // namespace posenc::report
