// Comparison-table measurements of the score-side relative methods: T5
// buckets, Shaw's clipped tables, Transformer-XL's sinusoidal relative term
// and DeBERTa's disentangled c2p / p2c terms (see compare.h; properties.h
// describes each measurement). Tables are random (untrained): the measured
// properties (bounded, distinct values, relative, saturation) are those of
// the mechanism, whatever the trained values.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "compare.h"
#include "posenc/deberta.h"
#include "posenc/shaw.h"
#include "posenc/t5.h"
#include "posenc/transformer_xl.h"
#include "sections.h"

namespace posenc::report {
namespace {

std::vector<double> Normal(std::uint64_t seed, std::int64_t n, double stddev) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, stddev);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = normal(rng);
  return v;
}

void SetBounded(MethodMeasure& m) { m.bounded = m.max_abs_at_4l <= m.max_abs_at_l * (1.0 + 1e-9); }

// max |f(k)| for distances k in (-length, length).
double MaxOverDistances(const std::function<double(std::int64_t)>& f, std::int64_t length) {
  double mx = 0.0;
  for (std::int64_t k = -length + 1; k < length; ++k) mx = std::max(mx, std::abs(f(k)));
  return mx;
}

}  // namespace

MethodMeasure MeasureT5(const CompareSetup& s) {
  MethodMeasure m;
  m.method = "T5 buckets";
  m.enters = "scores (a learned bias per bucket of j - i, added before the softmax)";
  T5BucketParams bp;  // 32 buckets, max_distance 128, bidirectional (encoder)
  T5BiasTable table(bp, s.shape.heads);
  table.InitNormal(1, 1.0 / std::sqrt(static_cast<double>(s.shape.hidden)));
  m.extra_params = table.num_buckets() * table.heads();
  m.params_note = fmt::format("[{} buckets, {} heads], held by layer 0 and shared by all layers",
                              table.num_buckets(), table.heads());
  auto bias = [&](std::int64_t k) { return static_cast<double>(table.Bias(0, 0, k)); };
  double at_l = 0.0, at_4l = 0.0;
  for (std::int64_t h = 0; h < table.heads(); ++h) {
    at_l = std::max(
        at_l,
        MaxOverDistances([&](std::int64_t k) { return double(table.Bias(h, 0, k)); }, s.length));
    at_4l = std::max(at_4l,
                     MaxOverDistances([&](std::int64_t k) { return double(table.Bias(h, 0, k)); },
                                      4 * s.length));
  }
  m.max_abs_at_l = at_l;
  m.max_abs_at_4l = at_4l;
  SetBounded(m);
  m.distinct_distances = DistinctValues(bias, s.length);
  m.shift_change =
      ShiftChange([&](std::int64_t i, std::int64_t j) { return double(table.Bias(0, i, j)); },
                  s.shift_length, kCompareShifts);
  const T5Bucketer& b = table.bucketer();
  m.past_end = PastEnd::kSaturates;
  // The first distance from which every farther key shares the last bucket
  // (before max_distance: the log buckets round up to it).
  const std::int64_t last = b.Bucket(kMaxPosition);
  std::int64_t sat = 1;
  for (std::int64_t n = 1; n <= bp.max_distance; ++n) {
    if (b.Bucket(n) != last) sat = n + 1;
  }
  m.past_end_detail =
      fmt::format("every j - i >= {} shares the last bucket (bucket({}) = bucket(2^24 - 1) = {})",
                  sat, sat, last);
  m.attention_bytes = static_cast<double>(DenseBiasBytes(s.shape));
  m.memory_note = fmt::format(
      "HF compute_bias materialises position_bias [1, {}, {}, {}] float32, "
      "once for all layers",
      s.shape.heads, s.shape.seq, s.shape.seq);
  m.used_in = "T5, mT5, Flan-T5, UL2, LongT5 (local)";
  return m;
}

MethodMeasure MeasureShaw(const CompareSetup& s) {
  MethodMeasure m;
  m.method = "Shaw";
  m.enters = "scores and values (q . a^K[clip(j - i)] in the logit, a^V added to v_j)";
  ShawParams p;
  p.clip = kShawClip;  // the report's one k (section 6)
  p.head_dim = s.shape.hidden / s.shape.heads;
  const std::int64_t rows = p.TableRows(), d = p.head_dim;
  m.extra_params = 2 * rows * d * s.shape.layers;
  m.params_note =
      fmt::format("a^K and a^V [{}, {}] per layer, shared by heads (k = {})", rows, d, p.clip);
  const auto a_key = Normal(3, rows * d, 0.02);
  const auto q = Normal(4, d, 1.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  // term[idx] = scale * q . a^K[idx]: one query row against keys covering every index.
  std::vector<double> term(static_cast<std::size_t>(rows));
  ShawKeyLogitsMatrix(p, TensorView::Contiguous(a_key.data(), DType::kFloat64, {rows, d}),
                      TensorView::Contiguous(q.data(), DType::kFloat64, {1, d}), p.clip, rows,
                      scale, TensorView::Contiguous(term.data(), DType::kFloat64, {1, rows}),
                      BiasWrite::kOverwrite);
  auto score = [&](std::int64_t i, std::int64_t j) {
    return term[static_cast<std::size_t>(ShawIndex(p.clip, i, j))];
  };
  m.max_abs_at_l = MaxOverDistances([&](std::int64_t k) { return score(0, k); }, s.length);
  m.max_abs_at_4l = MaxOverDistances([&](std::int64_t k) { return score(0, k); }, 4 * s.length);
  SetBounded(m);
  m.distinct_distances = DistinctValues([&](std::int64_t k) { return score(0, k); }, s.length);
  m.shift_change = ShiftChange(score, s.shift_length, kCompareShifts);
  m.past_end = PastEnd::kSaturates;
  m.past_end_detail = fmt::format("|j - i| >= {} share the first / last row (clipped)", p.clip);
  m.attention_bytes = static_cast<double>(s.shape.heads * s.shape.seq * rows * 4);
  m.memory_note = fmt::format("q . a^K products [{}, {}, {}] float32 per layer, gathered per pair",
                              s.shape.heads, s.shape.seq, rows);
  m.used_in = "Shaw et al. 2018, Music Transformer, HF BERT relative_key";
  return m;
}

MethodMeasure MeasureTransformerXL(const CompareSetup& s) {
  MethodMeasure m;
  m.method = "Transformer-XL";
  m.enters = "scores ((q + u) . k + (q + v) . W_R R_(i-j))";
  const std::int64_t dm = s.shape.hidden, d = dm / s.shape.heads;
  m.extra_params = (dm * dm + 2 * dm) * s.shape.layers;
  m.params_note = fmt::format("W_R [{0}, {0}] + u, v [{1}, {2}] per layer", dm, s.shape.heads, d);
  TransformerXLParams p;
  p.dim = dm;
  // R over distances klen-1 .. 0 (HF order): row klen - 1 - dist.
  auto r_table = [&](std::int64_t klen) {
    std::vector<double> r(static_cast<std::size_t>(klen * dm));
    TransformerXLPositionEmbedding(p, klen,
                                   TensorView::Contiguous(r.data(), DType::kFloat64, {klen, dm}));
    return r;
  };
  m.max_abs_at_l = MaxAbs(r_table(s.length));
  m.max_abs_at_4l = MaxAbs(r_table(4 * s.length));
  SetBounded(m);
  // Position-only score w . R_(i-j) with w = W_R^T (q + v) folded into one random vector;
  // future keys (i < j) get no R term (0), as in the direct form.
  const std::int64_t klen = std::max(s.length, s.shift_length + kCompareMaxShift);
  const auto r = r_table(klen);
  const auto w = Normal(5, dm, 1.0 / std::sqrt(static_cast<double>(dm)));
  std::vector<double> by_distance(static_cast<std::size_t>(klen));
  for (std::int64_t dist = 0; dist < klen; ++dist) {
    const std::int64_t row = TransformerXLRow(klen, dist);
    double acc = 0.0;
    for (std::int64_t c = 0; c < dm; ++c)
      acc += w[static_cast<std::size_t>(c)] * r[static_cast<std::size_t>(row * dm + c)];
    by_distance[static_cast<std::size_t>(dist)] = acc;
  }
  auto score = [&](std::int64_t i, std::int64_t j) {
    return i >= j ? by_distance[static_cast<std::size_t>(i - j)] : 0.0;
  };
  m.distinct_distances = DistinctValues([&](std::int64_t k) { return score(k, 0); }, s.length);
  m.shift_change = ShiftChange(score, s.shift_length, kCompareShifts);
  m.past_end = PastEnd::kExtrapolates;
  m.past_end_detail =
      "R is a sinusoid defined at every distance (clamp_len 0), but W_R only saw "
      "distances up to the training length + memory; clamp_len > 0 saturates";
  m.attention_bytes = static_cast<double>(s.shape.seq * dm * 4);
  m.memory_note = fmt::format(
      "RW = W_R R [{}, {}] float32 per layer (HF also forms BD [{}, S, S] "
      "before rel_shift)",
      s.shape.seq, dm, s.shape.heads);
  m.used_in = "Transformer-XL, XLNet";
  return m;
}

MethodMeasure MeasureDeberta(const CompareSetup& s) {
  MethodMeasure m;
  m.method = "DeBERTa";
  m.enters = "scores (q . Kr[c2p] + k . Qr[p2c], disentangled)";
  DebertaParams p;  // v3: 256 buckets, max 512, c2p|p2c
  p.head_dim = s.shape.hidden / s.shape.heads;
  const DebertaRelative rel(p);
  const std::int64_t rows = 2 * rel.att_span(), d = p.head_dim;
  m.extra_params = rows * s.shape.hidden;
  m.params_note =
      fmt::format("rel_embeddings [{}, {}] shared by all layers; share_att_key reuses Wq, Wk", rows,
                  s.shape.hidden);
  const auto kr = Normal(6, rows * d, 0.02);
  const auto q = Normal(7, d, 1.0);
  std::vector<double> term(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    double acc = 0.0;
    for (std::int64_t c = 0; c < d; ++c)
      acc += q[static_cast<std::size_t>(c)] * kr[static_cast<std::size_t>(r * d + c)];
    term[static_cast<std::size_t>(r)] = acc * rel.scale();
  }
  auto score = [&](std::int64_t i, std::int64_t j) {
    return term[static_cast<std::size_t>(rel.C2PIndex(i, j))];
  };
  m.max_abs_at_l = MaxOverDistances([&](std::int64_t k) { return score(k, 0); }, s.length);
  m.max_abs_at_4l = MaxOverDistances([&](std::int64_t k) { return score(k, 0); }, 4 * s.length);
  SetBounded(m);
  m.distinct_distances = DistinctValues([&](std::int64_t k) { return score(k, 0); }, s.length);
  m.shift_change = ShiftChange(score, s.shift_length, kCompareShifts);
  std::int64_t sat = 0;  // first distance from which the c2p row is clamped to the last
  for (std::int64_t k = 1; k <= 4 * p.max_relative_positions; ++k) {
    if (rel.C2PIndex(k, 0) != rows - 1) sat = k + 1;
  }
  m.past_end = PastEnd::kSaturates;
  m.past_end_detail = fmt::format(
      "log buckets up to |i - j| = {}, then the index clamps to the last "
      "of {} rows",
      sat - 1, rows);
  m.attention_bytes = static_cast<double>(2 * s.shape.heads * s.shape.seq * rows * 4);
  m.memory_note =
      fmt::format("c2p and p2c products [{}, {}, {}] float32 per layer, gathered per pair",
                  s.shape.heads, s.shape.seq, rows);
  m.used_in = "DeBERTa, DeBERTa-v2/v3, mDeBERTa";
  return m;
}

}  // namespace posenc::report
