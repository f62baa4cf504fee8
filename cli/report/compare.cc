// Comparison-table measurements (see compare.h) and the report section that
// shows them. Everything is computed through the public API.
#include "compare.h"

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "posenc/alibi.h"
#include "posenc/error.h"
#include "posenc/learned.h"
#include "posenc/rope.h"
#include "posenc/sinusoidal.h"
#include "sections.h"

namespace posenc::report {
namespace {

std::vector<double> SinTable(std::int64_t dim, std::int64_t offset, std::int64_t n) {
  SinusoidalParams p;
  p.dim = dim;
  std::vector<double> out(static_cast<std::size_t>(n * dim));
  SinusoidalTable(p, offset, n, TensorView::Contiguous(out.data(), DType::kFloat64, {n, dim}));
  return out;
}

double RowDot(const std::vector<double>& t, std::int64_t cols, std::int64_t i, std::int64_t j) {
  double s = 0.0;
  for (std::int64_t c = 0; c < cols; ++c) {
    s += t[static_cast<std::size_t>(i * cols + c)] * t[static_cast<std::size_t>(j * cols + c)];
  }
  return s;
}

const std::vector<std::int64_t>& kShifts = kCompareShifts;
constexpr std::int64_t kMaxShift = kCompareMaxShift;

void SetBounded(MethodMeasure& m) { m.bounded = m.max_abs_at_4l <= m.max_abs_at_l * (1.0 + 1e-9); }

}  // namespace

MethodMeasure MeasureSinusoidal(const CompareSetup& s) {
  MethodMeasure m;
  m.method = "sinusoidal";
  m.enters = "input (added to the token embeddings)";
  m.extra_params = 0;
  const std::int64_t d = s.shape.hidden;
  m.max_abs_at_l = MaxAbs(SinTable(d, 0, s.length));
  m.max_abs_at_4l = MaxAbs(SinTable(d, 0, 4 * s.length));
  SetBounded(m);
  m.min_code_distance = MinRowDistance(CodeTable{s.length, d, SinTable(d, 0, s.length)});
  const std::int64_t n = s.shift_length + kMaxShift;
  const auto t = SinTable(d, 0, n);
  m.shift_change = ShiftChange([&](std::int64_t i, std::int64_t j) { return RowDot(t, d, i, j); },
                               s.shift_length, kShifts);
  const auto last = SinTable(d, kMaxPosition, 1);
  m.past_end = PastEnd::kContinues;
  m.past_end_detail = fmt::format("defined up to 2^24 - 1; max |PE| there {}", Sci(MaxAbs(last)));
  m.attention_bytes = 0;
  m.memory_note = "none (the table is added before attention)";
  m.used_in = "Transformer (2017), DistilBERT, Transformer-XL (its R)";
  return m;
}

MethodMeasure MeasureLearned(const CompareSetup& s) {
  MethodMeasure m;
  m.method = "learned";
  m.enters = "input (added to the token embeddings)";
  LearnedInitParams init;
  init.max_positions = s.shape.max_positions;
  init.dim = s.shape.hidden;
  init.seed = 1;
  const LearnedTable table = LearnedTable::RandomNormal(init);
  m.extra_params = table.max_positions() * table.dim();
  const std::int64_t rows = std::min(s.length, table.max_positions());
  if (rows != s.length) m.length = rows;  // the table has no row past max_positions
  std::vector<double> values(table.values().begin(), table.values().begin() + rows * table.dim());
  m.max_abs_at_l = MaxAbs(values);
  m.max_abs_at_4l = MaxAbs(std::vector<double>(table.values().begin(), table.values().end()));
  m.bounded = true;  // a finite table: bounded by its largest entry, whatever L
  m.min_code_distance = MinRowDistance(CodeTable{rows, table.dim(), values});
  const std::int64_t n = std::min<std::int64_t>(s.shift_length + kMaxShift, table.max_positions());
  std::vector<double> t(table.values().begin(), table.values().begin() + n * table.dim());
  std::vector<std::int64_t> shifts;
  for (std::int64_t sh : kShifts) {
    if (s.shift_length + sh <= n) shifts.push_back(sh);
  }
  m.shift_change =
      ShiftChange([&](std::int64_t i, std::int64_t j) { return RowDot(t, table.dim(), i, j); },
                  s.shift_length, shifts);
  std::vector<float> out(static_cast<std::size_t>(table.dim()));
  try {
    table.Lookup(Positions::Offset(table.max_positions()), 1,
                 TensorView::Contiguous(out.data(), DType::kFloat32, {1, table.dim()}));
    m.past_end = PastEnd::kContinues;
    m.past_end_detail = "lookup past the end succeeded";
  } catch (const InvalidArgument&) {
    m.past_end = PastEnd::kErrors;  // the message itself is quoted once, in section 3
    m.past_end_detail = std::string("position ") + std::to_string(table.max_positions()) +
                        ": InvalidArgument (quoted in section 3)";
  }
  m.attention_bytes = 0;
  m.memory_note = "none (the table is added before attention)";
  m.used_in = "BERT, GPT-2, RoBERTa, ViT";
  return m;
}

MethodMeasure MeasureRope(const CompareSetup& s) {
  MethodMeasure m;
  m.method = "RoPE";
  m.enters = "q and k (rotated before the dot product)";
  m.extra_params = 0;
  const std::int64_t head_dim = s.shape.hidden / s.shape.heads;
  RopeParams p;
  p.head_dim = head_dim;
  auto cos_sin = [&](std::int64_t n) {
    std::vector<double> cs(static_cast<std::size_t>(n * head_dim * 2));
    std::vector<double> c(static_cast<std::size_t>(n * head_dim)), sn(c.size());
    RopeCosSin(p, Positions::Offset(0), n,
               TensorView::Contiguous(c.data(), DType::kFloat64, {n, head_dim}),
               TensorView::Contiguous(sn.data(), DType::kFloat64, {n, head_dim}));
    for (std::int64_t r = 0; r < n; ++r) {
      for (std::int64_t k = 0; k < head_dim; ++k) {
        cs[static_cast<std::size_t>(r * 2 * head_dim + k)] =
            c[static_cast<std::size_t>(r * head_dim + k)];
        cs[static_cast<std::size_t>(r * 2 * head_dim + head_dim + k)] =
            sn[static_cast<std::size_t>(r * head_dim + k)];
      }
    }
    return cs;
  };
  m.max_abs_at_l = MaxAbs(cos_sin(s.length));
  m.max_abs_at_4l = MaxAbs(cos_sin(4 * s.length));
  SetBounded(m);
  m.min_code_distance = MinRowDistance(CodeTable{s.length, 2 * head_dim, cos_sin(s.length)});
  // Position-only score <R_i q, R_j k> for fixed random q, k.
  const std::int64_t n = s.shift_length + kMaxShift;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  std::vector<double> q(static_cast<std::size_t>(n * head_dim)), k(q.size());
  std::vector<double> q0(static_cast<std::size_t>(head_dim)), k0(q0.size());
  for (auto& v : q0) v = normal(rng);
  for (auto& v : k0) v = normal(rng);
  for (std::int64_t r = 0; r < n; ++r) {
    std::copy(q0.begin(), q0.end(), q.begin() + r * head_dim);
    std::copy(k0.begin(), k0.end(), k.begin() + r * head_dim);
  }
  ApplyRopeQK(p, TensorView::Contiguous(q.data(), DType::kFloat64, {1, n, 1, head_dim}),
              TensorView::Contiguous(k.data(), DType::kFloat64, {1, n, 1, head_dim}),
              AttentionLayout::kBSHD, Positions::Offset(0));
  m.shift_change = ShiftChange(
      [&](std::int64_t i, std::int64_t j) {
        double dot = 0.0;
        for (std::int64_t c = 0; c < head_dim; ++c) {
          dot += q[static_cast<std::size_t>(i * head_dim + c)] *
                 k[static_cast<std::size_t>(j * head_dim + c)];
        }
        return dot;
      },
      s.shift_length, kShifts);
  m.past_end = PastEnd::kExtrapolates;
  m.past_end_detail =
      "defined up to 2^24 - 1, but low-frequency pairs reach angles never seen "
      "in training (hence the scaling schemes)";
  const std::int64_t seq = s.shape.seq;
  m.attention_bytes = static_cast<double>(seq * head_dim * 2 * 4);
  m.memory_note =
      fmt::format("cos/sin cache [{}, {}] x 2 float32 (shared by layers)", seq, head_dim);
  m.used_in = "Llama, Mistral, Qwen, Gemma, GPT-NeoX, DeepSeek, Phi-3";
  return m;
}

MethodMeasure MeasureAlibi(const CompareSetup& s) {
  MethodMeasure m;
  m.method = "ALiBi";
  m.enters = "scores (a bias -m_h |i - j| added before the softmax)";
  m.extra_params = 0;
  AlibiParams p;
  p.num_heads = s.shape.heads;
  const std::vector<double> slopes = AlibiSlopes(p);
  auto max_bias = [&](std::int64_t len) {
    double mx = 0.0;
    for (double slope : slopes) {
      for (std::int64_t k = 0; k < len; ++k) {
        mx = std::max(mx, std::abs(AlibiBiasValue(slope, AlibiForm::kSymmetric, 0, k)));
      }
    }
    return mx;
  };
  m.max_abs_at_l = max_bias(s.length);
  m.max_abs_at_4l = max_bias(4 * s.length);
  SetBounded(m);
  m.distinct_distances = DistinctValues(
      [&](std::int64_t k) { return AlibiBiasValue(slopes[0], AlibiForm::kSymmetric, 0, k); },
      s.length);
  m.shift_change = ShiftChange(
      [&](std::int64_t i, std::int64_t j) {
        return AlibiBiasValue(slopes[0], AlibiForm::kSymmetric, i, j);
      },
      s.shift_length, kShifts);
  m.past_end = PastEnd::kExtrapolates;
  m.past_end_detail = "the bias keeps growing linearly with distance (the paper's extrapolation)";
  m.attention_bytes = static_cast<double>(DenseBiasBytes(s.shape));
  m.memory_note = fmt::format(
      "[{}, {}, {}] float32 bias per layer if materialised; 0 in fused "
      "kernels that compute it from the {} slopes",
      s.shape.heads, s.shape.seq, s.shape.seq, s.shape.heads);
  m.used_in = "BLOOM, MPT, Falcon (ALiBi variants), Baichuan-13B";
  return m;
}

namespace {

using ExperimentNames = std::map<std::string, std::pair<std::string, std::string>>;

// The measurement setup for the report's detail level and thread count.
CompareSetup SetupFor(const ReportOptions& options) {
  const ReportSizes sizes = SizesFor(options.detail);
  CompareSetup setup;
  setup.length = sizes.unique_positions;
  setup.shift_length = sizes.shift_length;
  setup.timing_repeats = sizes.timing_repeats;
  setup.cost_seq = sizes.cost_seq;
  setup.threads = options.threads;
  return setup;
}

// The properties table (the lesson's four design requirements, then past the
// trained length) with its id, title and header and no rows.
Table PropertiesTable(const CompareSetup& setup) {
  Table t;
  t.id = "comparison";
  t.title = "Comparison of methods: properties (measured)";
  t.header = {"method",
              "where position enters",
              fmt::format("bounded: max |value| at L = {} / 4L", setup.length),
              "continuous",
              fmt::format("unique: min distance between codes (L = {})", setup.length),
              "relative: score change under a common shift",
              "defined past the trained length L?",
              "works past it? bits/byte at 4L ÷ at L (trained models, section 9)"};
  return t;
}

// The costs table with its id, title and header and no rows.
Table CostsTable(const CompareSetup& setup, const CostShape& cost) {
  Table costs;
  costs.id = "comparison_costs";
  costs.title = "Comparison of methods: costs";
  costs.header = {
      "method",
      fmt::format("extra parameters ({} layers, d = {})", setup.shape.layers, setup.shape.hidden),
      fmt::format("extra memory in attention at S = {}", setup.shape.seq),
      fmt::format("ns per token: one layer's forward, [1, {}, {}, {}] float32, causal", cost.seq,
                  cost.heads, cost.head_dim),
      "× the same kernel without position",
      "used in"};
  return costs;
}

// Continuity of each method, from its formula (the same words as section 11).
std::map<std::string, std::string> ContinuousCells() {
  return {{"sinusoidal", "yes (sin, cos of p)"},    {"learned", "no (a row per position)"},
          {"RoPE", "yes (angles p θ_i)"},           {"ALiBi", "yes (linear in i - j)"},
          {"T5 buckets", "no (buckets)"},           {"Shaw", "no (clipped lookup)"},
          {"Transformer-XL", "yes (sinusoidal R)"}, {"DeBERTa", "no (log buckets)"},
          {"FIRE", "yes (MLP of log distance)"}};
}

// Comparison-table method -> experiment scheme, and why a method is not trained there.
ExperimentNames ExperimentSchemes() {
  return {{"sinusoidal", {"sinusoidal", ""}},
          {"learned", {"learned", ""}},
          {"RoPE", {"rope", ""}},
          {"ALiBi", {"alibi", ""}},
          {"T5 buckets", {"t5", ""}},
          {"Shaw", {"shaw", ""}},
          {"Transformer-XL",
           {"transformer_xl",
            "no fused kernel (the float64 reference is too slow to "
            "train)"}},
          {"DeBERTa", {"deberta", "an encoder scheme without a fused kernel"}}};
}

// The "where position enters" cell: a long text keeps its head and its
// bracketed rest becomes a note of `t`.
std::string EntersCell(Table& t, const MethodMeasure& m) {
  const std::size_t paren = m.enters.find(" (");
  return m.enters.size() > 40 && paren != std::string::npos
             ? t.Noted(m.enters.substr(0, paren),
                       m.method + ": " + m.enters.substr(paren + 2, m.enters.size() - paren - 3))
             : m.enters;
}

// The "bounded" cell: the largest value at L and 4L, or a finite table's rows (noted in `t`).
std::string BoundedCell(Table& t, const MethodMeasure& m) {
  return m.length > 0
             ? t.Noted(fmt::format("yes: {} over its {} rows", Sci(m.max_abs_at_l), m.length),
                       m.method + ": a finite table; there is no row past them")
             : fmt::format("{}: {} / {}", m.bounded ? "yes" : "no (grows with L)",
                           Sci(m.max_abs_at_l), Sci(m.max_abs_at_4l));
}

// The "works past it?" cell: the trained models' ratio (noted in `t`), or "-"
// for a method the experiment does not name.
std::string MeasuredCell(Table& t, const MethodMeasure& m, const ReportOptions& options,
                         const ExperimentNames& experiment_names) {
  if (!experiment_names.count(m.method)) return "-";
  const auto& [scheme, not_trained] = experiment_names.at(m.method);
  std::string finetuned = FinetunedRatios(options.experiment.get(), scheme);
  if (finetuned.rfind("; ", 0) == 0) finetuned = finetuned.substr(2);
  return !not_trained.empty() &&
                 (options.experiment == nullptr || options.experiment->Find(scheme) == nullptr)
             ? t.Noted("not trained", m.method + ": " + not_trained)
             : t.Noted(RatioCell(options.experiment.get(), scheme, not_trained),
                       finetuned.empty() ? "" : m.method + ", " + finetuned);
}

// Appends m's row (short cells, the detail in footnotes) and its links to the properties table.
void AddPropertiesRow(Table& t, const MethodMeasure& m, const ReportOptions& options,
                      const std::map<std::string, std::string>& continuous,
                      const ExperimentNames& experiment_names) {
  const std::string enters = EntersCell(t, m);
  const std::string bounded = BoundedCell(t, m);
  const std::string past_end =
      t.Noted(PastEndName(m.past_end), m.method + ": " + m.past_end_detail);
  const std::string measured = MeasuredCell(t, m, options, experiment_names);
  t.rows.push_back(
      {m.method, enters, bounded, continuous.count(m.method) ? continuous.at(m.method) : "-",
       m.min_code_distance >= 0
           ? fmt::format("yes: {}{}", Sci(m.min_code_distance),
                         m.length > 0 ? fmt::format(" (L = {}, its rows)", m.length) : "")
           : fmt::format("distances only: {} values", m.distinct_distances),
       fmt::format("{}: {}", m.shift_change < 1e-6 ? "relative" : "absolute", Sci(m.shift_change)),
       past_end, measured});
  std::vector<std::string> links(t.rows.back().size());
  links[3] = "#fig-choose_properties";
  if (experiment_names.count(m.method)) links[7] = "#experiment";
  t.links.push_back(std::move(links));
}

// Times m's method and appends its row to the costs table.
void AddCostsRow(Table& costs, const MethodMeasure& m, const CompareSetup& setup) {
  const MethodCost c = MeasureCost(m.method, setup);
  costs.rows.push_back({m.method,
                        costs.Noted(Thousands(m.extra_params),
                                    m.params_note.empty() ? "" : m.method + ": " + m.params_note),
                        costs.Noted(Bytes(m.attention_bytes), m.method + ": " + m.memory_note),
                        fmt::format("{:.0f} ({})", c.ns_per_token, c.kernel),
                        fmt::format("{:.2f}×", c.ns_per_token / c.none_ns_per_token), m.used_in});
  costs.links.push_back({"", "", "", "", "", ""});
}

// The one-line terminal summary of m.
std::string SummaryLine(const MethodMeasure& m) {
  return fmt::format("{}: bounded {}, min code distance {}, shift change {}, past end {}", m.method,
                     m.bounded ? "yes" : "no",
                     m.min_code_distance >= 0 ? Sci(m.min_code_distance) : "n/a",
                     Sci(m.shift_change), PastEndName(m.past_end));
}

// The caption of the properties table: how each cell is measured.
std::string PropertiesCaption(const CompareSetup& setup) {
  return fmt::format(
      "Every cell is measured when the report is built, except continuous (from the formula). "
      "bounded: largest |positional term| for positions or distances below L and below 4L "
      "(learned: its own rows). unique: smallest Euclidean distance between the codes of two "
      "positions below L (RoPE: the cos/sin rows); a relative method has no code per position, so "
      "its cell counts the distinct values of its term over |i - j| < L. relative: max |s(i+t, "
      "j+t) - s(i, j)| / max "
      "|s| over i, j < {} and t in {{1, 7, 100}} for the position-only score (PE(i).PE(j), "
      "E_i.E_j, <R_i q, R_j k>, the ALiBi / T5 bias, q . a^K[idx], w . R_(i-j), q . Kr[c2p], "
      "FIRE's bias at the paper's initialisation; relative tables random, untrained). Defined "
      "past the trained length says only that the method gives a value there; the next "
      "column measures whether a trained model still works. Numbers in brackets are the notes "
      "under the table. d = {}, {} heads, learned table {} "
      "rows (N(0, 0.02^2) initialisation, untrained), Shaw k = {}.",
      setup.shift_length, setup.shape.hidden, setup.shape.heads, setup.shape.max_positions,
      kShawClip);
}

// The caption of the costs table: the shape and how the speed is timed.
std::string CostsCaption(const CompareSetup& setup, const CostShape& cost) {
  return fmt::format(
      "Parameters and memory for {} layers, d = {}, {} heads, S = {}. Speed: every method on one "
      "shape, in one unit, measured when the report is built ({} thread(s), best of {} "
      "alternating runs): one attention layer's forward with the method's positional work -- "
      "the table added to the input [1, {}, {}] for sinusoidal and learned, posenc's fused kernel "
      "for RoPE, ALiBi, T5, Shaw and FIRE, and the float64 reference for Transformer-XL and "
      "DeBERTa, which have no fused kernel (so their ns per token are not comparable with the "
      "fused rows; their ratio is). The ratio divides by attention without a positional term "
      "through the same kernel, timed alternately. Section 11 times forward and backward of the "
      "fused schemes at S = 2048.",
      setup.shape.layers, setup.shape.hidden, setup.shape.heads, setup.shape.seq, setup.threads,
      std::max(1, setup.timing_repeats), cost.seq, cost.heads * cost.head_dim);
}

}  // namespace

Section CompareSection(const ReportOptions& options) {
  const CompareSetup setup = SetupFor(options);
  std::vector<MethodMeasure> rows = {
      MeasureSinusoidal(setup),    MeasureLearned(setup), MeasureRope(setup),
      MeasureAlibi(setup),         MeasureT5(setup),      MeasureShaw(setup),
      MeasureTransformerXL(setup), MeasureDeberta(setup), MeasureFire(setup)};
  // Properties and costs, in two tables with short cells.
  Table t = PropertiesTable(setup);
  const CostShape cost = CostShapeFor(setup);
  Table costs = CostsTable(setup, cost);
  const std::map<std::string, std::string> continuous = ContinuousCells();
  const ExperimentNames experiment_names = ExperimentSchemes();
  Section s;
  for (const auto& m : rows) {
    AddPropertiesRow(t, m, options, continuous, experiment_names);
    AddCostsRow(costs, m, setup);
    s.summary.push_back(SummaryLine(m));
  }
  t.caption = PropertiesCaption(setup);
  costs.caption = CostsCaption(setup, cost);
  s.id = "comparison";
  s.title = "Comparison table";
  s.paragraphs = {
      "The table the lesson leaves empty, filled with values measured on this build "
      "of the library."};
  s.blocks.emplace_back(std::move(t));
  s.blocks.emplace_back(std::move(costs));
  return s;
}

}  // namespace posenc::report
