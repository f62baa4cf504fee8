// Computations behind the learned, attention-map and numerics sections (see
// figures.h).
#include "figures.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include "posenc/deberta.h"
#include "posenc/error.h"
#include "posenc/positions.h"
#include "posenc/shaw.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5.h"
#include "posenc/transformer_xl.h"

namespace posenc::report {
namespace {

std::vector<double> Normal(std::mt19937_64& rng, std::int64_t n, double stddev) {
  std::normal_distribution<double> normal(0.0, stddev);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = normal(rng);
  return v;
}

}  // namespace

std::vector<std::int64_t> LogSpacedPositions(std::int64_t max_position, int per_octave) {
  Require(max_position >= 1 && max_position <= kMaxPosition, "max_position", max_position,
          "an integer in [1, 2^24 - 1]");
  Require(per_octave >= 1 && per_octave <= 1024, "per_octave", per_octave,
          "an integer in [1, 1024]");
  std::vector<std::int64_t> out;
  for (int k = 0;; ++k) {
    const double x = std::exp2(static_cast<double>(k) / per_octave);
    const auto p = static_cast<std::int64_t>(std::llround(x));
    if (p >= max_position) break;
    if (out.empty() || p > out.back()) out.push_back(p);
  }
  out.push_back(max_position);
  return out;
}

std::vector<double> RopeCosSinError(RopeNumerics numerics, DType storage, std::int64_t head_dim,
                                    const std::vector<std::int64_t>& positions) {
  Require(head_dim >= 2 && head_dim <= 1024 && head_dim % 2 == 0, "head_dim", head_dim,
          "an even integer in [2, 1024]");
  Require(!positions.empty(), "positions.size()", positions.size(), "at least 1");
  RopeParams p;
  p.head_dim = head_dim;
  p.numerics = numerics;
  const auto n = static_cast<std::int64_t>(positions.size());
  const std::size_t bytes = static_cast<std::size_t>(n * head_dim) * DTypeSize(storage);
  std::vector<unsigned char> cos(bytes), sin(bytes);
  RopeCosSin(p, Positions::Ids(positions.data(), n), n,
             TensorView::Contiguous(cos.data(), storage, {n, head_dim}),
             TensorView::Contiguous(sin.data(), storage, {n, head_dim}));
  const std::int64_t half = head_dim / 2;
  std::vector<long double> inv(static_cast<std::size_t>(half));
  for (std::int64_t j = 0; j < half; ++j) {
    inv[static_cast<std::size_t>(j)] = std::pow(
        10000.0L, -2.0L * static_cast<long double>(j) / static_cast<long double>(head_dim));
  }
  std::vector<double> err(static_cast<std::size_t>(n), 0.0);
  for (std::int64_t r = 0; r < n; ++r) {
    const auto pos = static_cast<long double>(positions[static_cast<std::size_t>(r)]);
    double worst = 0.0;
    for (std::int64_t c = 0; c < head_dim; ++c) {
      const long double angle = pos * inv[static_cast<std::size_t>(c % half)];
      const double ec = static_cast<double>(
          std::abs(static_cast<long double>(LoadAsDouble(cos.data(), storage, r * head_dim + c)) -
                   std::cos(angle)));
      const double es = static_cast<double>(
          std::abs(static_cast<long double>(LoadAsDouble(sin.data(), storage, r * head_dim + c)) -
                   std::sin(angle)));
      worst = std::max({worst, ec, es});
    }
    err[static_cast<std::size_t>(r)] = worst;
  }
  return err;
}

std::vector<double> LearnedRowNorms(const LearnedTable& table) {
  std::vector<double> out(static_cast<std::size_t>(table.max_positions()));
  const auto& v = table.values();
  for (std::int64_t r = 0; r < table.max_positions(); ++r) {
    double s = 0.0;
    for (std::int64_t c = 0; c < table.dim(); ++c) {
      const double x = v[static_cast<std::size_t>(r * table.dim() + c)];
      s += x * x;
    }
    out[static_cast<std::size_t>(r)] = std::sqrt(s);
  }
  return out;
}

std::string LearnedPastEndMessage(const LearnedTable& table) {
  std::vector<float> out(static_cast<std::size_t>(table.dim()));
  try {
    table.Lookup(Positions::Offset(table.max_positions()), 1,
                 TensorView::Contiguous(out.data(), DType::kFloat32, {1, table.dim()}));
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

const std::vector<AttentionPanel>& AttentionPanels() {
  using P = AttentionPanel;
  static const std::vector<P> panels = {P::kNone, P::kSinusoidal,    P::kLearned,
                                        P::kRope, P::kAlibi,         P::kT5,
                                        P::kShaw, P::kTransformerXL, P::kDeBERTa};
  return panels;
}

std::string AttentionPanelName(AttentionPanel panel) {
  using P = AttentionPanel;
  switch (panel) {
    case P::kNone:
      return "none";
    case P::kSinusoidal:
      return "sinusoidal";
    case P::kLearned:
      return "learned";
    case P::kRope:
      return "rope";
    case P::kAlibi:
      return "alibi";
    case P::kT5:
      return "t5";
    case P::kShaw:
      return "shaw";
    case P::kTransformerXL:
      return "transformer_xl";
    case P::kDeBERTa:
      return "deberta";
  }
  return "";
}

namespace {

// What a panel's scheme points into: it must outlive the scheme.
struct SchemeTables {
  std::vector<double> t1, t2, t3;
  std::optional<T5BiasTable> t5;
};

// Adds `code` to q and k entry by entry (the identity projection of x + PE).
void AddToQK(const std::vector<double>& code, std::vector<double>& q, std::vector<double>& k) {
  for (std::size_t at = 0; at < code.size(); ++at) {
    q[at] += code[at];
    k[at] += code[at];
  }
}

// Shaw's scheme with random key and value tables of clip `s.shaw_clip`, drawn from `rng`.
PositionScheme RandomShawScheme(const AttentionMapSetup& s, std::mt19937_64& rng,
                                SchemeTables& tables) {
  const std::int64_t d = s.dim;
  ShawParams sp;
  sp.clip = s.shaw_clip;
  sp.head_dim = d;
  tables.t1 = Normal(rng, sp.TableRows() * d, 1.0);
  tables.t2 = Normal(rng, sp.TableRows() * d, 1.0);
  return posenc::ShawScheme(
      sp, TensorView::Contiguous(tables.t1.data(), DType::kFloat64, {sp.TableRows(), d}),
      TensorView::Contiguous(tables.t2.data(), DType::kFloat64, {sp.TableRows(), d}));
}

// Transformer-XL's scheme: the sinusoidal R projected by a random W_R, and
// random u and v, all drawn from `rng` in that order.
PositionScheme RandomTransformerXLScheme(const AttentionMapSetup& s, std::mt19937_64& rng,
                                         SchemeTables& tables) {
  const std::int64_t n = s.tokens, d = s.dim;
  TransformerXLParams xp;
  xp.dim = d;
  std::vector<double> r(static_cast<std::size_t>(n * d));
  TransformerXLPositionEmbedding(xp, n, TensorView::Contiguous(r.data(), DType::kFloat64, {n, d}));
  const auto w = Normal(rng, d * d, 1.0 / std::sqrt(static_cast<double>(d)));  // W_R
  tables.t3.assign(static_cast<std::size_t>(n * d), 0.0);                      // RW = W_R R
  for (std::int64_t row = 0; row < n; ++row) {
    for (std::int64_t o = 0; o < d; ++o) {
      double acc = 0.0;
      for (std::int64_t i = 0; i < d; ++i) {
        acc += w[static_cast<std::size_t>(o * d + i)] * r[static_cast<std::size_t>(row * d + i)];
      }
      tables.t3[static_cast<std::size_t>(row * d + o)] = acc;
    }
  }
  tables.t1 = Normal(rng, d, 1.0);  // u
  tables.t2 = Normal(rng, d, 1.0);  // v
  return posenc::TransformerXLScheme(
      TensorView::Contiguous(tables.t1.data(), DType::kFloat64, {1, d}),
      TensorView::Contiguous(tables.t2.data(), DType::kFloat64, {1, d}),
      TensorView::Contiguous(tables.t3.data(), DType::kFloat64, {n, 1, d}));
}

// DeBERTa's scheme with random key and query tables drawn from `rng`.
PositionScheme RandomDebertaScheme(const AttentionMapSetup& s, std::mt19937_64& rng,
                                   SchemeTables& tables) {
  const std::int64_t d = s.dim;
  DebertaParams dp;
  dp.head_dim = d;
  const std::int64_t rows = 2 * dp.AttSpan();
  tables.t1 = Normal(rng, rows * d, 1.0);
  tables.t2 = Normal(rng, rows * d, 1.0);
  return posenc::DebertaScheme(
      dp, TensorView::Contiguous(tables.t1.data(), DType::kFloat64, {rows, 1, d}),
      TensorView::Contiguous(tables.t2.data(), DType::kFloat64, {rows, 1, d}));
}

// Sets params.scheme for `panel`; absolute panels add their codes to q and k
// instead. Tables are drawn from `rng` and kept in `tables`.
void SetPanelScheme(AttentionPanel panel, const AttentionMapSetup& s, std::mt19937_64& rng,
                    std::vector<double>& q, std::vector<double>& k, SchemeTables& tables,
                    AttentionParams& params) {
  const std::int64_t n = s.tokens, d = s.dim;
  using K = AttentionPanel;
  switch (panel) {
    case K::kNone:
      params.scheme = PositionScheme::None();
      break;
    case K::kLearned:
      // A learned table at initialisation: N(0, 0.02^2) per entry.
      AddToQK(Normal(rng, n * d, 0.02), q, k);
      params.scheme = PositionScheme::None();
      break;
    case K::kSinusoidal: {
      // Sinusoidal absolute codes: the score gains PE(i).PE(j) and the cross terms.
      SinusoidalParams sp;
      sp.dim = d;
      std::vector<double> pe(static_cast<std::size_t>(n * d));
      SinusoidalTable(sp, 0, n, TensorView::Contiguous(pe.data(), DType::kFloat64, {n, d}));
      AddToQK(pe, q, k);
      params.scheme = PositionScheme::None();
      break;
    }
    case K::kRope: {
      RopeParams rp;
      rp.head_dim = d;
      params.scheme = RopeScheme(rp);
      break;
    }
    case K::kAlibi:
      params.scheme = AlibiScheme({s.alibi_slope});
      break;
    case K::kT5:
      tables.t5.emplace(T5BucketParams{}, 1);
      tables.t5->InitNormal(s.seed, 1.0);
      params.scheme = T5Scheme(*tables.t5);
      break;
    case K::kShaw:
      params.scheme = RandomShawScheme(s, rng, tables);
      break;
    case K::kTransformerXL:
      params.scheme = RandomTransformerXLScheme(s, rng, tables);
      break;
    case K::kDeBERTa:
      params.scheme = RandomDebertaScheme(s, rng, tables);
      break;
  }
}

}  // namespace

std::vector<double> AttentionMap(AttentionPanel panel, const AttentionMapSetup& s) {
  Require(s.tokens >= 2 && s.tokens <= 512, "tokens", s.tokens, "an integer in [2, 512]");
  Require(s.dim >= 2 && s.dim <= 256 && s.dim % 2 == 0, "dim", s.dim,
          "an even integer in [2, 256]");
  const std::int64_t n = s.tokens, d = s.dim;
  std::mt19937_64 rng(s.seed);
  auto q = Normal(rng, n * d, 1.0), k = Normal(rng, n * d, 1.0), v = Normal(rng, n * d, 1.0);
  std::vector<double> out(static_cast<std::size_t>(n * d));
  std::vector<double> probs(static_cast<std::size_t>(n * n));
  AttentionParams params;
  params.mask = s.mask;
  // Scheme tables: drawn after q, k, v so that every scheme sees the same input.
  SchemeTables tables;
  SetPanelScheme(panel, s, rng, q, k, tables, params);
  const TensorView pv = TensorView::Contiguous(probs.data(), DType::kFloat64, {1, 1, n, n});
  AttentionReference(params, TensorView::Contiguous(q.data(), DType::kFloat64, {1, n, 1, d}),
                     TensorView::Contiguous(k.data(), DType::kFloat64, {1, n, 1, d}),
                     TensorView::Contiguous(v.data(), DType::kFloat64, {1, n, 1, d}),
                     TensorView::Contiguous(out.data(), DType::kFloat64, {1, n, 1, d}), &pv);
  return probs;
}

}  // namespace posenc::report
