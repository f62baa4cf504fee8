// Report section 5: ALiBi (Press, Smith, Lewis 2022, "Train Short, Test
// Long").
//
// Figures: the slopes of every head for 8 heads (a power of two: the
// geometric series 2^(-8k/8)) and 12 heads (not one: the 8-head series, then
// every other slope of the 16-head series), from posenc::AlibiSlopes; the
// bias -m_h * distance of every head of 8 against distance; one head's
// causal bias matrix from posenc::AlibiBiasMatrix (masked cells blank).
#include <cmath>

#include <fmt/format.h>

#include "charts.h"
#include "posenc/alibi.h"
#include "properties.h"
#include "sections.h"

namespace posenc::report {
namespace {

std::vector<double> Slopes(std::int64_t heads) {
  AlibiParams p;
  p.num_heads = heads;
  return AlibiSlopes(p);
}

Chart SlopesFigure(std::vector<std::string>& summary) {
  Chart c =
      MakeChart("alibi_slopes", "Slope m_h of every head (8 and 12 heads)",
                LineSpec({"head", "head h (1-based)"}, {"slope", "slope m_h", AxisScale::kLog},
                         {"heads", "heads", true, "line", true}));
  const auto s8 = Slopes(8);
  const auto s12 = Slopes(12);
  for (const auto& [name, slopes] : {std::pair{"8 heads", s8}, std::pair{"12 heads", s12}}) {
    for (std::size_t h = 0; h < slopes.size(); ++h) {
      c.Add({{"heads", name},
             {"head", static_cast<std::int64_t>(h + 1)},
             {"slope", slopes[h]},
             {"log2_slope", std::log2(slopes[h])}});
    }
  }
  c.spec["encoding"]["tooltip"].push_back({{"field", "log2_slope"},
                                           {"type", "quantitative"},
                                           {"title", "log2 slope"},
                                           {"format", ".4~g"}});
  // Heads 1-8 coincide: a thick 8-head line under a thin 12-head one keeps both visible
  // (the mark's own strokeWidth would override the encoding).
  c.spec["mark"].erase("strokeWidth");
  c.spec["encoding"]["strokeWidth"] = {
      {"field", "heads"},
      {"type", "nominal"},
      {"scale", {{"domain", {"8 heads", "12 heads"}}, {"range", {6, 1.6}}}},
      {"legend", nullptr}};
  std::string extra;
  for (std::size_t h = 8; h < s12.size(); ++h)
    extra += fmt::format("{}2^{:g}", extra.empty() ? "" : ", ", std::log2(s12[h]));
  c.caption = fmt::format(
      "8 heads: m_h = 2^(-8h/8) = 2^-{:g} ... 2^{:g}, a geometric series. 12 is not a power of "
      "two: heads 1-8 take the 8-head series and heads 9-12 every other slope of the 16-head "
      "series ({}), so the slopes interleave instead of continuing the series. Heads 1-8 of "
      "both series coincide: the thin 12-head line runs on top of the thick 8-head one.",
      -std::log2(s8.front()), std::log2(s8.back()), extra);
  summary.push_back(fmt::format("ALiBi: 8 heads slopes 2^{:g}..2^{:g}; 12 heads add {}",
                                std::log2(s8.front()), std::log2(s8.back()), extra));
  return c;
}

Chart BiasFigure() {
  const auto slopes = Slopes(8);
  const std::int64_t n = 64;
  Chart c = MakeChart("alibi_bias", "Bias -m_h (i - j) against distance (8 heads)",
                      LineSpec({"distance", "distance i - j"}, {"bias", "bias added to the score"},
                               {"head", "head", false, "line", false}));
  double deepest = 0.0;
  for (std::size_t h = 0; h < slopes.size(); ++h) {
    for (std::int64_t k = 0; k < n; ++k) {
      const double b = AlibiBiasValue(slopes[h], AlibiForm::kCausal, k, 0);
      deepest = std::min(deepest, b);
      c.Add({{"head", fmt::format("h{} (m = 2^{:g})", h + 1, std::log2(slopes[h]))},
             {"distance", k},
             {"bias", b}});
    }
  }
  c.caption = fmt::format(
      "Straight lines through 0: the penalty grows linearly with distance, steeply for head 1 "
      "(reaching {:g} at distance {}) and barely for head 8, so the heads see different ranges. "
      "The bias has no parameters and is defined at every distance: at twice the trained length "
      "it simply keeps growing.",
      deepest, n - 1);
  return c;
}

Chart MatrixFigure() {
  const std::int64_t n = 64;
  const auto slopes = Slopes(8);
  const std::int64_t head = 2;  // h3, slope 2^-3
  std::vector<double> bias(static_cast<std::size_t>(8 * n * n));
  AlibiGeometry g;
  g.query_len = n;
  g.key_len = n;
  g.form = AlibiForm::kCausal;
  AlibiBiasMatrix(slopes, g, TensorView::Contiguous(bias.data(), DType::kFloat64, {8, n, n}));
  MatrixStyle style;
  style.value_field = "bias";
  style.value_title = "bias";
  style.size = 320;
  style.axis_values = {0, 8, 16, 24, 32, 40, 48, 56, 63};
  Chart c = MakeChart("alibi_matrix",
                      fmt::format("Causal bias matrix of head {} (m = 2^{:g}), {} x {}", head + 1,
                                  std::log2(slopes[head]), n, n),
                      MatrixSpec({"key", "key j"}, {"query", "query i"}, style));
  std::int64_t masked = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      const double b = bias[static_cast<std::size_t>((head * n + i) * n + j)];
      if (std::isinf(b)) {
        ++masked;
        continue;
      }
      c.Add({{"query", i}, {"key", j}, {"bias", b}});
    }
  }
  c.caption = fmt::format(
      "posenc::AlibiBiasMatrix (causal form). Each diagonal is constant (the bias depends on i - j "
      "only); the {} masked cells above the diagonal (-infinity, future keys) are left blank. "
      "Bottom-left corner: {:g}.",
      masked, bias[static_cast<std::size_t>((head * n + n - 1) * n)]);
  return c;
}

}  // namespace

Section AlibiSection(const ReportOptions&) {
  Section s;
  s.id = "alibi";
  s.title = "ALiBi";
  s.paragraphs = {
      "ALiBi adds no embedding: head h adds -m_h * |i - j| to the attention score of query i and "
      "key j, with fixed slopes m_h in a geometric series. Recent tokens win, distant ones fade, "
      "at a rate that differs per head."};
  std::vector<std::string> summary;
  s.blocks.emplace_back(SlopesFigure(summary));
  s.blocks.emplace_back(BiasFigure());
  s.blocks.emplace_back(MatrixFigure());
  s.summary = std::move(summary);
  return s;
}

}  // namespace posenc::report
