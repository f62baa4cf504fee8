// `posenc tour [--json]`: walks through the lesson's claims about positional
// encodings, each backed by numbers computed here with the public API:
//  1. the sinusoidal table (10 x 16), printed;
//  2. a learned table (10 x 768): shape, entries, statistics;
//  3. PE(pos + k) is a fixed rotation R_k of PE(pos) (measured error);
//  4. RoPE keeps norms and makes q.k depend only on m - n (measured);
//  5. what a position past a learned table's end does (the error message);
//  6. without positions word order is invisible: "dog bites man" vs "man
//     bites dog" through one attention layer per scheme (posenc/demo.h);
//  7. train short, test long: the numbers of the last `posenc experiment
//     extrapolation` run (which one: SectionExtrapolation), or how to produce
//     them;
//  8. which encoding for which model: `posenc choose` on two requests.
// Design: a list of section functions (kTourSections); output: RunTour.
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "choose_text.h"
#include "commands.h"
#include "output.h"
#include "posenc/choose.h"
#include "posenc/demo.h"
#include "posenc/error.h"
#include "posenc/learned.h"
#include "posenc/rope.h"
#include "posenc/sinusoidal.h"
#include "report/experiment.h"

namespace posenc::cli {
namespace {

// One section of the tour: readable lines and the numbers behind them.
struct TourArgs {
  bool json = false;
  std::string output;
  std::string experiment;  // --experiment DIR ("" = search the default places)
};

class TourSection {
 public:
  TourSection(std::string title, const TourArgs* args) : title_(std::move(title)), args_(args) {}
  const TourArgs& args() const { return *args_; }
  template <typename... Args>
  void Line(fmt::format_string<Args...> format, Args&&... args) {
    lines_.push_back(fmt::format(format, std::forward<Args>(args)...));
  }
  // A measured value, printed in --json output under "values".
  void Value(const std::string& key, nlohmann::json value) { values_[key] = std::move(value); }

  const std::string& title() const { return title_; }
  const std::vector<std::string>& lines() const { return lines_; }
  const nlohmann::json& values() const { return values_; }

 private:
  std::string title_;
  const TourArgs* args_;
  std::vector<std::string> lines_;
  nlohmann::json values_ = nlohmann::json::object();
};

double Norm(const float* v, std::int64_t n) {
  double s = 0;
  for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(v[i]) * v[i];
  return std::sqrt(s);
}

double Dot(const float* a, const float* b, std::int64_t n) {
  double s = 0;
  for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

std::vector<float> SinTable32(const SinusoidalParams& p, std::int64_t offset, std::int64_t n) {
  std::vector<float> t(static_cast<std::size_t>(n * p.dim));
  SinusoidalTable(p, offset, n, TensorView::Contiguous(t.data(), DType::kFloat32, {n, p.dim}));
  return t;
}

// --- 1 ---------------------------------------------------------------------------

void SectionSinusoidalTable(TourSection& s) {
  SinusoidalParams p;
  p.dim = 16;
  const std::int64_t n = 10;
  const std::vector<float> t = SinTable32(p, 0, n);
  const std::vector<double> inv = SinusoidalInvFreq(p);
  s.Line("PE(pos, 2i) = sin(pos * w_i), PE(pos, 2i+1) = cos(pos * w_i), w_i = 10000^(-2i/d).");
  s.Line("Vaswani et al. 2017; layout 'interleaved' (HF DistilBERT). d = 16, positions 0..9:");
  std::string header = "  pos";
  for (int c = 0; c < p.dim; ++c)
    header += fmt::format(" {:>7}", (c % 2 == 0 ? "sin" : "cos") + std::to_string(c / 2));
  s.Line("{}", header);
  double worst_norm = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    std::string row = fmt::format("  {:>3}", r);
    for (std::int64_t c = 0; c < p.dim; ++c)
      row += fmt::format(" {:>7.4f}", t[static_cast<std::size_t>(r * p.dim + c)]);
    s.Line("{}", row);
    worst_norm =
        std::max(worst_norm,
                 std::fabs(Norm(&t[static_cast<std::size_t>(r * p.dim)], p.dim) - std::sqrt(8.0)));
  }
  s.Line(
      "Frequencies run from w_0 = {:.6g} (a period of {:.4g} positions) down to w_7 = {:.6g} "
      "(a period of {:.6g}).",
      inv[0], 2 * std::numbers::pi / inv[0], inv[7], 2 * std::numbers::pi / inv[7]);
  s.Line("PE[1][0] = {} = sin(1). Every row has norm sqrt(d/2) = {:.6f} (max deviation {:.2e}).",
         t[16], std::sqrt(8.0), worst_norm);
  s.Value("shape", {n, p.dim});
  s.Value("pe_1_0", t[16]);
  s.Value("row_norm_max_deviation", worst_norm);
  s.Value("table", std::vector<float>(t.begin(), t.end()));
}

// --- 2 ---------------------------------------------------------------------------

void SectionLearnedTable(TourSection& s) {
  const LearnedInitParams init{10, 768, 0.02, 0};
  const LearnedTable t = LearnedTable::RandomNormal(init);
  const auto& v = t.values();
  double sum = 0, sq = 0;
  for (float x : v) {
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  const double count = static_cast<double>(v.size());
  const double mean = sum / count, sd = std::sqrt(sq / count - mean * mean);
  s.Line(
      "A learned table (BERT position_embeddings, GPT-2 wpe) is a trainable [max_positions, d] "
      "parameter, initialised N(0, 0.02^2).");
  s.Line("shape [{}, {}] float32, seed {} (mt19937_64 + Box-Muller, portable).", t.max_positions(),
         t.dim(), init.seed);
  for (std::int64_t r : {0, 1, 9}) {
    s.Line("  row {}: [{:.5f}, {:.5f}, {:.5f}, {:.5f}, {:.5f}, ...]", r, t.At(r, 0), t.At(r, 1),
           t.At(r, 2), t.At(r, 3), t.At(r, 4));
  }
  // Neighbouring rows: unrelated at initialisation, close for the sinusoids.
  const double cos_learned = Dot(&v[0], &v[768], 768) / (Norm(&v[0], 768) * Norm(&v[768], 768));
  SinusoidalParams p;
  p.dim = 768;
  const std::vector<float> sin_rows = SinTable32(p, 0, 2);
  const double cos_sin = Dot(&sin_rows[0], &sin_rows[768], 768) /
                         (Norm(&sin_rows[0], 768) * Norm(&sin_rows[768], 768));
  s.Line("mean {:.3e}, std {:.5f} (target 0.02) over {} values.", mean, sd, v.size());
  s.Line(
      "cosine(row 0, row 1) = {:.4f}: at initialisation neighbours are unrelated; training must "
      "learn any notion of order (the sinusoidal rows 0 and 1 at d = 768 have cosine {:.4f}).",
      cos_learned, cos_sin);
  s.Value("shape", {t.max_positions(), t.dim()});
  s.Value("mean", mean);
  s.Value("stddev", sd);
  s.Value("cosine_rows_0_1", cos_learned);
  s.Value("sinusoidal_cosine_rows_0_1", cos_sin);
}

// --- 3 ---------------------------------------------------------------------------

// Max |PE(pos+k) - R_k PE(pos)| over pos in [0, 200), k in ks (interleaved).
template <typename T>
double MaxRotationError(const SinusoidalParams& p, DType dtype,
                        const std::vector<std::int64_t>& ks) {
  const std::int64_t n = 200 + 100;
  std::vector<T> t(static_cast<std::size_t>(n * p.dim));
  SinusoidalTable(p, 0, n, TensorView::Contiguous(t.data(), dtype, {n, p.dim}));
  const std::vector<double> inv = SinusoidalInvFreq(p);
  double worst = 0;
  for (std::int64_t k : ks) {
    for (std::int64_t pos = 0; pos < 200; ++pos) {
      const T* a = &t[static_cast<std::size_t>(pos * p.dim)];
      const T* b = &t[static_cast<std::size_t>((pos + k) * p.dim)];
      for (std::int64_t i = 0; i < p.dim / 2; ++i) {
        const double phi = static_cast<double>(k) * inv[static_cast<std::size_t>(i)];
        const double rs = std::cos(phi) * a[2 * i] + std::sin(phi) * a[2 * i + 1];
        const double rc = -std::sin(phi) * a[2 * i] + std::cos(phi) * a[2 * i + 1];
        worst = std::max({worst, std::fabs(b[2 * i] - rs), std::fabs(b[2 * i + 1] - rc)});
      }
    }
  }
  return worst;
}

void SectionShiftIsRotation(TourSection& s) {
  SinusoidalParams p;
  p.dim = 16;
  const std::vector<std::int64_t> ks = {1, 3, 10, 50, 100};
  const double err64 = MaxRotationError<double>(p, DType::kFloat64, ks);
  const double err32 = MaxRotationError<float>(p, DType::kFloat32, ks);
  s.Line(
      "sin(x + phi) = cos(phi) sin(x) + sin(phi) cos(x), cos(x + phi) = cos(phi) cos(x) - sin(phi) "
      "sin(x):");
  s.Line(
      "so PE(pos + k) = R_k PE(pos), R_k block-diagonal with 2x2 rotations by k * w_i, the same "
      "matrix for every pos. For k = 1, pair 0: [[{:.4f}, {:.4f}], [{:.4f}, {:.4f}]].",
      std::cos(1.0), std::sin(1.0), -std::sin(1.0), std::cos(1.0));
  s.Line("Measured over pos 0..199, k in {{1, 3, 10, 50, 100}}, d = 16:");
  s.Line("  max |PE(pos+k) - R_k PE(pos)| = {:.2e} (float64 table), {:.2e} (float32 table)", err64,
         err32);
  s.Line(
      "A linear map can therefore attend by relative offset; the rotation does not depend on pos.");
  s.Value("max_rotation_error_float64", err64);
  s.Value("max_rotation_error_float32", err32);
}

// --- 4 ---------------------------------------------------------------------------

// Rotates one head_dim vector per position (x is [1, S, 1, D] bshd).
std::vector<float> Rotate(const RopeParams& params, const std::vector<float>& v,
                          const std::vector<std::int64_t>& positions) {
  const std::int64_t seq = static_cast<std::int64_t>(positions.size()), d = params.head_dim;
  std::vector<float> x(static_cast<std::size_t>(seq * d));
  for (std::int64_t r = 0; r < seq; ++r) std::copy(v.begin(), v.end(), x.begin() + r * d);
  ApplyRope(params, TensorView::Contiguous(x.data(), DType::kFloat32, {1, seq, 1, d}),
            AttentionLayout::kBSHD, Positions::Ids(positions.data(), seq));
  return x;
}

void SectionRope(TourSection& s) {
  RopeParams params;
  params.head_dim = 64;
  const std::int64_t d = params.head_dim;
  std::vector<float> q(static_cast<std::size_t>(d)), k(static_cast<std::size_t>(d));
  for (std::int64_t i = 0; i < d; ++i) {
    q[static_cast<std::size_t>(i)] =
        static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 0.11));
    k[static_cast<std::size_t>(i)] =
        static_cast<float>(std::cos(0.53 * static_cast<double>(i) - 0.2));
  }
  // Pairs (m, n) with m - n = 5, and one with m - n = 6 for contrast.
  const std::vector<std::int64_t> m = {5, 105, 10005, 1000005, 16000005, 6};
  const std::vector<std::int64_t> n = {0, 100, 10000, 1000000, 16000000, 0};
  const std::vector<float> rq = Rotate(params, q, m), rk = Rotate(params, k, n);
  const double qn = Norm(q.data(), d);
  double norm_change = 0;
  for (std::size_t r = 0; r < m.size(); ++r) {
    norm_change = std::max(norm_change, std::fabs(Norm(&rq[r * 64], d) - qn) / qn);
  }
  std::vector<double> scores;
  for (std::size_t r = 0; r < m.size(); ++r) scores.push_back(Dot(&rq[r * 64], &rk[r * 64], d));
  double lo = scores[0], hi = scores[0];
  for (std::size_t r = 0; r + 1 < scores.size(); ++r) {
    lo = std::min(lo, scores[r]);
    hi = std::max(hi, scores[r]);
  }
  s.Line(
      "RoPE (Su et al. 2021) rotates q and k by their own positions: pair j of the vector at "
      "position p turns by p * theta^(-2j/d).");
  s.Line("head_dim 64, theta 10000, half-split pairing (Llama/NeoX), float32:");
  s.Line("  norms kept: max | ||R_p q|| - ||q|| | / ||q|| = {:.2e} over p in {{5, ..., 16000005}}",
         norm_change);
  s.Line("  <R_m q, R_n k> depends only on m - n:");
  for (std::size_t r = 0; r < m.size(); ++r) {
    s.Line("    m = {:>8}, n = {:>8}, m - n = {}: score {:.6f}", m[r], n[r], m[r] - n[r],
           scores[r]);
  }
  s.Line(
      "  the five scores at distance 5 agree to {:.2e}; distance 6 gives a different score "
      "({:.6f}); unrotated q.k = {:.6f}.",
      hi - lo, scores.back(), Dot(q.data(), k.data(), d));
  s.Value("max_relative_norm_change", norm_change);
  s.Value("scores_distance_5", std::vector<double>(scores.begin(), scores.end() - 1));
  s.Value("score_spread_distance_5", hi - lo);
  s.Value("score_distance_6", scores.back());
}

// --- 5 ---------------------------------------------------------------------------

void SectionPastTheEnd(TourSection& s) {
  const LearnedTable t = LearnedTable::RandomNormal({10, 768, 0.02, 0});
  const std::int64_t pos = 10;
  std::vector<float> out(768);
  std::string message;
  try {
    t.Lookup(Positions::Ids(&pos, 1), 1,
             TensorView::Contiguous(out.data(), DType::kFloat32, {1, 768}));
    message = "(no error)";
  } catch (const InvalidArgument& e) {
    message = e.what();
  }
  SinusoidalParams p;
  p.dim = 16;
  const std::int64_t far[2] = {10, 1000000};
  std::vector<float> pe(2 * 16);
  SinusoidalTableAt(p, far, 2, TensorView::Contiguous(pe.data(), DType::kFloat32, {2, 16}));
  s.Line("A learned table has no row past its end. Looking up position {} in the [10, 768] table:",
         pos);
  s.Line("  InvalidArgument: {}", message);
  s.Line(
      "posenc never wraps or clamps (HF raises an IndexError too). A formula has no end: the "
      "sinusoidal PE[10][0] = {:.6f} and PE[1000000][0] = {:.6f}, though the model never saw such "
      "positions in training.",
      pe[0], pe[16]);
  s.Line(
      "Whether a trained model can use positions past its training length is measured, not "
      "assumed, in the last section (`posenc experiment extrapolation`).");
  s.Value("error", message);
  s.Value("sinusoidal_pe_1000000_0", pe[16]);
}

// --- permutation (owned by the attention engineer: posenc/demo.h) -------------------

void SectionPermutation(TourSection& s) {
  const PermutationDemoParams params;
  s.Line("Attention without positions is permutation-equivariant: \"{}\" and \"{}\" give the same",
         params.first, params.second);
  s.Line(
      "outputs, permuted, and the same mean-pooled sentence vector. One bidirectional layer, d = "
      "{}, "
      "{} heads:",
      params.model_dim, params.heads);
  nlohmann::json values = nlohmann::json::object();
  for (const PermutationDemoResult& r : RunPermutationDemo(params)) {
    s.Line("  {:<16} pooled difference {:>12.4e}   order-aware: {}", r.scheme, r.pooled_difference,
           r.order_aware ? "yes" : "no");
    values[r.scheme] = r.pooled_difference;
  }
  s.Line(
      "Every positional scheme breaks the symmetry (`posenc demo permutation` for the details).");
  s.Value("pooled_difference", values);
}

// --- train short, test long (posenc experiment extrapolation) -------------------

void ExtrapolationLines(TourSection& s, const report::ExperimentResults& r, const char* key) {
  s.Line("{}: {}", r.quick ? "Smoke-test numbers" : "Measured", r.Describe());
  s.Line("  {:<12} {:>12} {:>12} {:>8}   (bits/byte on {} held-out test bytes; L = {})", "scheme",
         "at L", "at 4L", "4L / L", r.eval_tokens, r.train_length);
  nlohmann::json values = nlohmann::json::object();
  for (const auto& sc : r.schemes) {
    const auto* a = sc.At(r.train_length);
    const auto* b = sc.At(4 * r.train_length);
    auto cell = [](const report::ExperimentEval* e) {
      return e == nullptr       ? std::string("-")
             : e->bits_per_byte ? fmt::format("{:.4f}", *e->bits_per_byte)
                                : std::string("error");
    };
    const auto ratio = sc.Ratio(4, r.train_length);
    s.Line("  {:<12} {:>12} {:>12} {:>8}", sc.name, cell(a), cell(b),
           ratio ? fmt::format("{:.3f}", *ratio) : "-");
    if (b != nullptr && !b->bits_per_byte) s.Line("    {} at 4L: {}", sc.name, b->error);
    values[sc.name] = ratio ? nlohmann::json(*ratio) : nlohmann::json();
  }
  s.Value(key, values);
}

// The results of --experiment DIR, else of the newest of ./my-run (the
// README's full run), ./experiment-quick (scripts/run.sh's quick run) and the
// repository's docs/experiments/extrapolation; without any, how to produce
// them.
void SectionExtrapolation(TourSection& s) {
  s.Line(
      "The lesson says sinusoidal 'works for longer sequences', learned tables 'cannot "
      "generalize', RoPE and ALiBi extrapolate. `posenc experiment extrapolation` trains one "
      "small model per scheme at length L on the Brown corpus and measures bits/byte at L..16L "
      "(ratio 4L / L below 1: the longer context helps; above 1: the scheme breaks past L).");
  std::string dir = s.args().experiment;
  const std::string repo = report::RepositoryExperimentDir();
  if (dir.empty()) {
    dir = report::NewestExperimentDir({"my-run", "experiment-quick", repo}).value_or("");
  }
  if (dir.empty()) {
    s.Line(
        "No results yet: run `posenc experiment extrapolation -o my-run` (about 20 minutes on 2 "
        "cores; --quick for a 4-minute smoke run), then `posenc tour` again.");
    s.Value("results", nullptr);
    return;
  }
  const report::ExperimentResults r = report::LoadExperimentResults(dir);
  ExtrapolationLines(s, r, "ratio_4l_over_l");
  s.Value("results", r.path);
  if (r.quick && dir != repo && report::NewestExperimentDir({repo})) {
    ExtrapolationLines(s, report::LoadExperimentResults(repo), "repository_ratio_4l_over_l");
  }
}

// --- which encoding for which model (posenc choose) ------------------------------

void SectionChoose(TourSection& s) {
  s.Line(
      "The lesson's last question: which positional encoding for which model? `posenc choose` "
      "answers from posenc's measurements (docs/evidence/choose.json: the experiment runs, the "
      "scheme-cost benchmark, the engine support matrix), every reason with its evidence.");
  const std::string evidence = DefaultEvidencePath();
  nlohmann::json values = nlohmann::json::object();
  struct Ask {
    const char* command;
    const char* key;
    ChooseRequest request;
  };
  std::vector<Ask> asks(2);
  asks[0] = {"posenc choose --train-length 2048 --target-length 8192", "decoder_4x", {}};
  asks[0].request.train_length = 2048;
  asks[0].request.target_length = 8192;
  asks[1] = {"posenc choose --train-length 2048 --target-length 8192 --engine flash-attention",
             "decoder_4x_flash_attention", asks[0].request};
  asks[1].request.engines = {InferenceEngine::kFlashAttention};
  for (const Ask& a : asks) {
    const nlohmann::json answer = nlohmann::json::parse(ChooseEncodingJson(a.request, evidence));
    s.Line("$ {}", a.command);
    std::vector<std::string> lines = ChooseLines(answer, false);
    for (std::size_t i = 0; i < lines.size() && i < 5; ++i) s.Line("{}", lines[i]);
    if (lines.size() > 5)
      s.Line("    ... {} more (the command itself shows all, with reasons)", lines.size() - 5);
    nlohmann::json ranking = nlohmann::json::array();
    for (const auto& c : answer["candidates"]) {
      ranking.push_back({{"scheme", c["scheme"]}, {"verdict", c["verdict"]}});
    }
    values[a.key] = ranking;
  }
  s.Line(
      "Try it on your model: posenc choose --from config.json (or a .gguf) --target-length N "
      "[--finetune none|short|full] [--engine ...]; the answer includes the exact config "
      "change, checked by posenc's loader.");
  s.Value("choose", values);
}

// The tour, in order. To add a section, write `void SectionXxx(TourSection&
// s)` and add one line here.
struct TourEntry {
  const char* title;
  void (*run)(TourSection&);
};
const TourEntry kTourSections[] = {
    {"The sinusoidal table (10 positions x 16 dims)", SectionSinusoidalTable},
    {"A learned absolute table (10 positions x 768 dims)", SectionLearnedTable},
    {"Shifting a position is a fixed rotation: PE(pos + k) = R_k PE(pos)", SectionShiftIsRotation},
    {"RoPE keeps norms and makes q.k depend only on the distance", SectionRope},
    {"Past the end of a learned table", SectionPastTheEnd},
    {"Without positions, word order is invisible: dog bites man", SectionPermutation},
    {"Train short, test long: what the claims look like in trained models", SectionExtrapolation},
    {"Which encoding for which model? (posenc choose)", SectionChoose},
};

// Runs every section; text output prints each section's lines, --json prints
// {"sections": [{"title", "lines", "values"}]} with the measured values.
void RunTour(const TourArgs& args) {
  std::vector<TourSection> sections;
  for (const TourEntry& e : kTourSections) {
    sections.emplace_back(e.title, &args);
    e.run(sections.back());
  }
  Output out(args.output);
  std::ostream& os = out.stream();
  if (args.json) {
    nlohmann::json j;
    j["sections"] = nlohmann::json::array();
    for (const TourSection& sec : sections) {
      j["sections"].push_back(
          {{"title", sec.title()}, {"lines", sec.lines()}, {"values", sec.values()}});
    }
    os << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  } else {
    os << "posenc tour: positional encodings, claim by claim, with numbers computed now.\n";
    int i = 1;
    for (const TourSection& sec : sections) {
      os << "\n== " << i++ << ". " << sec.title() << " ==\n";
      for (const std::string& line : sec.lines()) os << line << '\n';
    }
  }
  out.Close();
}

}  // namespace

void RegisterTourCommand(CLI::App& app) {
  auto args = std::make_shared<TourArgs>();
  CLI::App* sub = app.add_subcommand(
      "tour", "A guided tour of positional encodings: each claim with numbers computed by posenc");
  sub->add_flag("--json", args->json, "Print the sections and measured values as JSON");
  sub->add_option("-o,--output", args->output, "Output file (default: stdout)");
  sub->add_option("--experiment", args->experiment,
                  "Results folder of `posenc experiment extrapolation` (default: the newest of "
                  "my-run, experiment-quick and the repository's "
                  "docs/experiments/extrapolation)");
  sub->callback([args] { RunTour(*args); });
}

}  // namespace posenc::cli
