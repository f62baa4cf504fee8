// Report section 3: learned absolute position embeddings (BERT, GPT-2).
//
// Figures: a 64 positions x 64 dimensions table drawn from
// posenc::LearnedTable::RandomNormal (N(0, 0.02^2), the HF initialisation,
// untrained), and what happens past its end: the InvalidArgument that
// LearnedTable::Lookup throws one position past the table (quoted verbatim)
// and the norm of every row of a BERT-base-sized table (512 x 768) up to
// max_positions, past which there is nothing to draw.
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "charts.h"
#include "figures.h"
#include "posenc/learned.h"
#include "properties.h"
#include "sections.h"

namespace posenc::report {
namespace {

Heatmap TableFigure() {
  LearnedInitParams p;
  p.max_positions = 64;
  p.dim = 64;
  p.seed = 1;
  const LearnedTable t = LearnedTable::RandomNormal(p);
  Heatmap h;
  h.id = "learned_table";
  h.title = "Learned table at initialisation: 64 positions x 64 dimensions";
  h.rows = t.max_positions();
  h.cols = t.dim();
  h.values.assign(t.values().begin(), t.values().end());
  h.x_title = "dimension";
  h.y_title = "position";
  h.value_title = "E[pos, i]";
  h.scheme = ColorScheme::kDiverging;
  h.caption = fmt::format(
      "posenc::LearnedTable::RandomNormal(seed 1), N(0, 0.02^2). Unlike the sinusoidal table "
      "there is no structure: neighbouring positions are as unrelated as distant ones until "
      "training shapes the rows. Max |E| here {}.",
      Sci(MaxAbs(h.values)));
  return h;
}

Chart NormFigure(std::vector<std::string>& summary) {
  LearnedInitParams p;
  p.max_positions = 512;
  p.dim = 768;
  p.seed = 1;
  const LearnedTable t = LearnedTable::RandomNormal(p);
  const auto norms = LearnedRowNorms(t);
  Chart c =
      MakeChart("learned_norm", "Norm of each row of a 512 x 768 table, and its end",
                WithRules(LineSpec({"position", "position"}, {"norm", "|E[pos]|"}), "x",
                          {{static_cast<double>(t.max_positions()), "max_positions: no row"}}));
  for (std::int64_t r = 0; r < t.max_positions(); ++r) {
    c.Add({{"position", r}, {"norm", norms[static_cast<std::size_t>(r)]}});
  }
  c.spec["layer"][0]["encoding"]["x"]["scale"] = {{"domain", {0, t.max_positions() + 64}}};
  const double mean =
      std::accumulate(norms.begin(), norms.end(), 0.0) / static_cast<double>(norms.size());
  c.caption = fmt::format(
      "Every row has norm about 0.02 sqrt(768) = {:.3f} (mean measured {:.3f}). Past position {} "
      "there is no row at all: Lookup({}) throws the InvalidArgument quoted above.",
      0.02 * std::sqrt(768.0), mean, t.max_positions() - 1, t.max_positions());
  summary.push_back(
      fmt::format("learned: mean row norm {:.3f}; position {} -> error", mean, t.max_positions()));
  return c;
}

}  // namespace

Section LearnedSection(const ReportOptions&) {
  LearnedInitParams p;
  p.max_positions = 512;
  p.dim = 768;
  p.seed = 1;
  const std::string message = LearnedPastEndMessage(LearnedTable::RandomNormal(p));
  Section s;
  s.id = "learned";
  s.title = "Learned absolute embeddings";
  s.paragraphs = {
      "BERT and GPT-2 learn one vector per position, a [max_positions, d] table added to the "
      "token embeddings. The table costs max_positions x d parameters and knows nothing past "
      "its last row.",
      "One position past a 512-row table, posenc::LearnedTable::Lookup says: " + message};
  std::vector<std::string> summary;
  s.blocks.emplace_back(TableFigure());
  s.blocks.emplace_back(NormFigure(summary));
  s.summary = std::move(summary);
  return s;
}

}  // namespace posenc::report
