// Report section: sinusoidal absolute encodings (Vaswani et al. 2017, 3.5).
//
// Figures: the lesson's practice figure (100 positions, d = 32, dimensions
// 0-5 as curves), a positions x dimensions heatmap, PE(p).PE(p+k) against k
// for several p (one curve: the product depends on k only) with the
// PE(i).PE(j) matrix, and the rotation property PE(p+k) = M_k PE(p) measured
// for float64 and float32 tables. Every number quoted is computed here from
// posenc::SinusoidalTable / SinusoidalInvFreq.
#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "charts.h"
#include "posenc/sinusoidal.h"
#include "properties.h"
#include "sections.h"

namespace posenc::report {
namespace {

std::vector<double> Table64(const SinusoidalParams& p, std::int64_t offset, std::int64_t n) {
  std::vector<double> out(static_cast<std::size_t>(n * p.dim));
  SinusoidalTable(p, offset, n, TensorView::Contiguous(out.data(), DType::kFloat64, {n, p.dim}));
  return out;
}

std::vector<double> Table32(const SinusoidalParams& p, std::int64_t offset, std::int64_t n) {
  std::vector<float> f(static_cast<std::size_t>(n * p.dim));
  SinusoidalTable(p, offset, n, TensorView::Contiguous(f.data(), DType::kFloat32, {n, p.dim}));
  return std::vector<double>(f.begin(), f.end());
}

Chart PracticeFigure() {
  SinusoidalParams p;
  p.dim = 32;
  const std::int64_t n = 100;
  const auto pe = Table64(p, 0, n);
  const auto inv = SinusoidalInvFreq(p);
  Chart c = MakeChart("sinusoidal_curves", "PE(pos, i) for dimensions 0-5 (d = 32)",
                      LineSpec({"position", "position"}, {"value", "PE(pos, i)"},
                               {"dimension", "dimension", false, "line", false}));
  for (std::int64_t i = 0; i < 6; ++i) {
    for (std::int64_t pos = 0; pos < n; ++pos) {
      c.Add({{"dimension", fmt::format("{} ({})", i, i % 2 == 0 ? "sin" : "cos")},
             {"position", pos},
             {"value", pe[static_cast<std::size_t>(pos * p.dim + i)]}});
    }
  }
  c.caption = fmt::format(
      "The lesson's practice figure: 100 positions, d = 32, base 10000. Dimension 2i is a sine and "
      "2i+1 a cosine of the same frequency; their wavelengths 2*pi/omega_i are {:.1f}, {:.1f} and "
      "{:.1f} positions for i = 0, 1, 2, growing by 10000^(2/32) = {:.3f} per pair.",
      2 * std::numbers::pi / inv[0], 2 * std::numbers::pi / inv[1], 2 * std::numbers::pi / inv[2],
      inv[0] / inv[1]);
  return c;
}

Heatmap TableHeatmap(const ReportSizes& sizes) {
  SinusoidalParams p;
  p.dim = 128;
  Heatmap h;
  h.id = "sinusoidal_table";
  h.title = fmt::format("PE table: {} positions x {} dimensions", sizes.heatmap_positions, p.dim);
  h.rows = sizes.heatmap_positions;
  h.cols = p.dim;
  h.values = Table64(p, 0, h.rows);
  h.x_title = "dimension";
  h.y_title = "position";
  h.value_title = "PE";
  h.scheme = ColorScheme::kDiverging;
  // Near-constant columns: the value moves by less than kFlat over the table.
  constexpr double kFlat = 0.1;
  std::int64_t flat = 0, first_flat = -1;
  double half_range = 0.0;  // range of column d/2 (the first of the right half)
  for (std::int64_t j = 0; j < h.cols; ++j) {
    double lo = 1e300, hi = -1e300;
    for (std::int64_t r = 0; r < h.rows; ++r) {
      const double v = h.values[static_cast<std::size_t>(r * h.cols + j)];
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    if (hi - lo < kFlat) {
      ++flat;
      if (first_flat < 0) first_flat = j;
    }
    if (j == h.cols / 2) half_range = hi - lo;
  }
  h.caption = fmt::format(
      "Each row is one position's code (d = {}). Low dimensions oscillate fast, high dimensions "
      "barely move across {} positions: pair i is near-constant when {} * 10000^(-2i/d) << 1. "
      "Measured: {} of the {} dimensions ({:.0f} %{}) change by less than {} over the table "
      "(sin near 0, cos near 1); dimension {} (the first of the right half) still spans {:.2f}. "
      "Max |PE| measured: {}.",
      p.dim, h.rows, h.rows, flat, h.cols, 100.0 * static_cast<double>(flat) / h.cols,
      first_flat < 0 ? std::string() : fmt::format(", dimensions {} and up", first_flat), kFlat,
      h.cols / 2, half_range, Sci(MaxAbs(h.values)));
  return h;
}

// PE(p).PE(p+k) against k for several p, and the PE(i).PE(j) matrix.
std::pair<Chart, Heatmap> DotFigures(const ReportSizes& sizes, std::vector<std::string>& summary) {
  SinusoidalParams p;
  p.dim = 128;
  const std::int64_t kmax = 200;
  const std::vector<std::int64_t> starts = {0, 100, 1000, 10000};
  Chart c = MakeChart("sinusoidal_dot", "PE(p) . PE(p+k) against k",
                      LineSpec({"k", "distance k"}, {"dot", "PE(p) . PE(p+k)"},
                               {"p", "start p", false, "line", true}));
  double worst = 0.0;
  std::vector<double> first;
  for (std::int64_t start : starts) {
    const auto pe = Table64(p, start, kmax + 1);
    for (std::int64_t k = 0; k <= kmax; ++k) {
      double dot = 0.0;
      for (std::int64_t j = 0; j < p.dim; ++j) {
        dot += pe[static_cast<std::size_t>(j)] * pe[static_cast<std::size_t>(k * p.dim + j)];
      }
      if (start == starts.front()) first.push_back(dot);
      worst = std::max(worst, std::abs(dot - first[static_cast<std::size_t>(k)]));
      c.Add({{"p", fmt::format("p = {}", start)}, {"k", k}, {"dot", dot}});
    }
  }
  c.caption = fmt::format(
      "d = {}. The four curves (p = 0, 100, 1000, 10000) lie on top of each other: PE(p).PE(p+k) = "
      "sum_i cos(k omega_i) depends on k only. Largest gap between the curves measured: {} "
      "(float64 rounding). Only k >= 0 is drawn: cos is even, so the product at -k equals the one "
      "at k. It decays, but not monotonically.",
      p.dim, Sci(worst));
  summary.push_back(
      fmt::format("sinusoidal: PE(p).PE(p+k) depends on k only (max gap over p {})", Sci(worst)));

  CodeTable t{sizes.similarity, p.dim, Table64(p, 0, sizes.similarity)};
  Heatmap h;
  h.id = "sinusoidal_similarity";
  h.title = fmt::format("PE(i) . PE(j) for i, j < {}", sizes.similarity);
  h.rows = h.cols = sizes.similarity;
  h.values = RowGram(t);
  h.x_title = "position j";
  h.y_title = "position i";
  h.value_title = "PE(i).PE(j)";
  h.scheme = ColorScheme::kSequential;  // domain [min, max] of the measured values
  h.caption = fmt::format(
      "Every diagonal band is constant: the dot product of two codes is a function of i - j. "
      "The diagonal is d/2 = {} (each sin^2 + cos^2 pair adds 1). Values measured from {:.2f} "
      "to {:.2f} (the colour scale spans them).",
      p.dim / 2, *std::min_element(h.values.begin(), h.values.end()),
      *std::max_element(h.values.begin(), h.values.end()));
  return {c, h};
}

// max_p |M_k PE(p) - PE(p+k)| against k, for float64 and float32 tables.
Chart RotationFigure(std::vector<std::string>& summary) {
  SinusoidalParams p;
  p.dim = 64;
  const auto inv = SinusoidalInvFreq(p);
  const std::int64_t np = 1000;
  const std::vector<std::int64_t> ks = {1,   2,   5,    10,   20,   50,   100,
                                        200, 500, 1000, 2000, 5000, 10000};
  Chart c =
      MakeChart("sinusoidal_rotation", "Rotation property: |M_k PE(p) - PE(p+k)|",
                LineSpec({"k", "shift k", AxisScale::kLog},
                         {"error", "max over p < 1000 of |M_k PE(p) - PE(p+k)|", AxisScale::kLog},
                         {"table", "table dtype", true, "line", false}));
  double worst64 = 0.0;
  for (const char* dtype : {"float64", "float32"}) {
    const bool f32 = std::string(dtype) == "float32";
    for (std::int64_t k : ks) {
      const auto a = f32 ? Table32(p, 0, np) : Table64(p, 0, np);
      const auto b = f32 ? Table32(p, k, np) : Table64(p, k, np);
      double err = 0.0;
      for (std::int64_t r = 0; r < np; ++r) {
        for (std::int64_t i = 0; i < p.dim / 2; ++i) {
          const double ang = static_cast<double>(k) * inv[static_cast<std::size_t>(i)];
          const double cb = std::cos(ang), sb = std::sin(ang);
          const double s = a[static_cast<std::size_t>(r * p.dim + 2 * i)];
          const double co = a[static_cast<std::size_t>(r * p.dim + 2 * i + 1)];
          const double s2 = s * cb + co * sb;
          const double c2 = co * cb - s * sb;
          err = std::max({err, std::abs(s2 - b[static_cast<std::size_t>(r * p.dim + 2 * i)]),
                          std::abs(c2 - b[static_cast<std::size_t>(r * p.dim + 2 * i + 1)])});
        }
      }
      if (!f32) worst64 = std::max(worst64, err);
      // A log axis cannot show 0: an exact match is drawn at 1e-17.
      c.Add({{"table", dtype}, {"k", k}, {"error", std::max(err, 1e-17)}});
    }
  }
  c.caption = fmt::format(
      "PE(p+k) is PE(p) rotated: each (sin, cos) pair turns by k omega_i, a matrix M_k that does "
      "not depend on p. Measured for d = {} over p < {}: the float64 table matches to {} at worst; "
      "the float32 table carries its own rounding (about 2^-24 per value).",
      p.dim, np, Sci(worst64));
  summary.push_back(
      fmt::format("sinusoidal: rotation property holds to {} (float64)", Sci(worst64)));
  return c;
}

}  // namespace

Section SinusoidalSection(const ReportOptions& options) {
  const ReportSizes sizes = SizesFor(options.detail);
  Section s;
  s.id = "sinusoidal";
  s.title = "Sinusoidal encodings";
  s.paragraphs = {
      "PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)) "
      "(Vaswani et al. 2017), added to the token embeddings. No parameters, defined for every "
      "position, bounded by 1."};
  s.blocks.emplace_back(PracticeFigure());
  s.blocks.emplace_back(TableHeatmap(sizes));
  std::vector<std::string> summary;
  auto [dot, similarity] = DotFigures(sizes, summary);
  s.blocks.emplace_back(std::move(dot));
  s.blocks.emplace_back(std::move(similarity));
  s.blocks.emplace_back(RotationFigure(summary));
  s.summary = std::move(summary);
  return s;
}

}  // namespace posenc::report
