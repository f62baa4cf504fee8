// Report section 7: attention maps under each positional scheme.
//
// One input (deterministic random q, k, v: 32 tokens, head dim 32, one head,
// causal mask) run through posenc::AttentionReference with the schemes none,
// sinusoidal and learned (their codes added to q and k), rope, alibi, t5,
// shaw, transformer_xl and deberta (figures.h AttentionMap); the nine
// probability matrices are drawn side by side as small multiples (3 x 3, no
// empty panel) on a shared colour scale, the caption saying what each panel
// shows.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "charts.h"
#include "figures.h"
#include "properties.h"
#include "sections.h"

namespace posenc::report {
namespace {

// The one thing each panel shows.
std::string Takeaway(AttentionPanel panel) {
  using P = AttentionPanel;
  switch (panel) {
    case P::kNone:
      return "no position: the map is the content scores alone, the reference";
    case P::kSinusoidal:
      return "PE(i) added to q_i and k_i: PE(i).PE(j) is largest near the diagonal, so nearby "
             "keys gain weight";
    case P::kLearned:
      return "a learned table at initialisation (N(0, 0.02^2)) barely moves the map: all of its "
             "position structure has to come from training";
    case P::kRope:
      return "q and k rotated: the same content scores, re-weighted by the distance i - j "
             "only";
    case P::kAlibi:
      return "a linear penalty on distance: rows concentrate on the last few keys";
    case P::kT5:
      return "one learned scalar per bucket: far keys share a bucket and a bias";
    case P::kShaw:
      return "q . a^K[clip(j - i)]: every key beyond k of the query gets the same term";
    case P::kTransformerXL:
      return "q . W_R R_(i-j) plus global biases u, v: a sinusoidal distance term, projected";
    case P::kDeBERTa:
      return "content-to-position and position-to-content terms over log buckets";
  }
  return "";
}

}  // namespace

Section AttentionSection(const ReportOptions&) {
  const AttentionMapSetup setup;
  MatrixStyle style;
  style.value_field = "p";
  style.value_title = "attention probability";
  style.facet_field = "scheme";
  style.columns = 3;  // 9 panels: a full 3 x 3 grid
  style.size = 170;
  style.axis_values = {0, 8, 16, 24, 31};
  for (AttentionPanel panel : AttentionPanels()) {
    style.facet_order.emplace_back(AttentionPanelName(panel));
  }
  Chart c = MakeChart(
      "attention_maps",
      fmt::format("Attention probabilities of one input under each scheme ({} tokens, causal)",
                  setup.tokens),
      MatrixSpec({"key", "key j"}, {"query", "query i"}, style));
  // Row 0 always holds a 1: a square-root colour scale keeps the rest visible.
  c.spec["spec"]["encoding"]["color"]["scale"]["type"] = "sqrt";
  const auto none = AttentionMap(AttentionPanel::kNone, setup);
  std::string diag, takeaways;
  for (AttentionPanel panel : AttentionPanels()) {
    const auto p = panel == AttentionPanel::kNone ? none : AttentionMap(panel, setup);
    const std::string name = AttentionPanelName(panel);
    double mean_diag = 0.0, change = 0.0;
    for (std::int64_t i = 0; i < setup.tokens; ++i) {
      mean_diag +=
          p[static_cast<std::size_t>(i * setup.tokens + i)] / static_cast<double>(setup.tokens);
      for (std::int64_t j = 0; j <= i; ++j) {
        const std::size_t at = static_cast<std::size_t>(i * setup.tokens + j);
        change = std::max(change, std::abs(p[at] - none[at]));
        c.Add({{"scheme", name}, {"query", i}, {"key", j}, {"p", p[at]}});
      }
    }
    diag += fmt::format("{}{}: mean P(i, i) {:.3f}, max |P - P_none| {:.3f}",
                        diag.empty() ? "" : "; ", name, mean_diag, change);
    takeaways += fmt::format("{}{}: {}", takeaways.empty() ? "" : "; ", name, Takeaway(panel));
  }
  c.caption = fmt::format(
      "The same q, k, v (N(0, 1), seed {}, head dim {}) with each scheme; scheme tables are "
      "random too (T5 N(0, 1) per bucket, Shaw k = {}, Transformer-XL u, v and W_R, DeBERTa "
      "256/512 buckets), so the maps show the mechanism, not a trained model; the trained "
      "models are in section 9. ALiBi uses slope {:g} (head 1 of 8). What each panel shows: "
      "{}. Measured: {}.",
      setup.seed, setup.dim, setup.shaw_clip, setup.alibi_slope, takeaways, diag);
  Section s;
  s.id = "attention";
  s.title = "Attention maps";
  s.paragraphs = {
      "Where position enters changes what attention looks at. Each panel is softmax(q k^T / "
      "sqrt(d) + position terms) for the same input; rows are queries, columns keys, the upper "
      "triangle is masked (causal)."};
  s.blocks.emplace_back(std::move(c));
  return s;
}

}  // namespace posenc::report
