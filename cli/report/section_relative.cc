// Report section 6: relative positions (Shaw et al. 2018, T5 / Raffel et al.
// 2020, DeBERTa / He et al. 2021).
//
// Figures: the lesson's 6 x 6 matrix rel[i][j] = i - j
// (posenc::RelativePositionMatrix); T5's distance -> bucket map for the
// bidirectional (encoder) and causal (decoder) directions over -300..300
// (posenc::T5Buckets, 32 buckets, max_distance 128); DeBERTa-v3's log buckets
// (posenc::BuildRelativePosition, bucket_size 256, max_position 512) over
// -600..600; Shaw's clipped index clip(j - i, -k, k) + k for k = 4 on a
// 16 x 16 grid (posenc::ShawIndexMatrix).
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "charts.h"
#include "posenc/deberta.h"
#include "posenc/fire.h"
#include "posenc/relative.h"
#include "posenc/shaw.h"
#include "posenc/t5.h"
#include "posenc/transformer_xl.h"
#include "properties.h"
#include "sections.h"

namespace posenc::report {
namespace {

Chart LessonMatrix() {
  const std::int64_t n = 6;
  const auto rel = RelativePositionMatrix(n);
  MatrixStyle style;
  style.value_field = "rel";
  style.value_title = "i - j";
  style.diverging = true;
  style.label_field = "rel";
  style.light_label_above = 4;
  style.size = 240;
  Chart c = MakeChart("relative_matrix", "The relative position matrix rel[i][j] = i - j (L = 6)",
                      MatrixSpec({"j", "key j"}, {"i", "query i"}, style));
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t j = 0; j < n; ++j)
      c.Add({{"i", i}, {"j", j}, {"rel", rel[static_cast<std::size_t>(i * n + j)]}});
  }
  c.caption = fmt::format(
      "posenc::RelativePositionMatrix(6). The diagonal is 0, the first row {} ... {}: every "
      "diagonal holds one value, so a method that looks a term up by rel shares it along the "
      "diagonal. The sign is a convention (T5 and Shaw use j - i; DeBERTa and Transformer-XL i - "
      "j).",
      rel[0], rel[5]);
  return c;
}

Chart T5Figure(std::vector<std::string>& summary) {
  const std::int64_t lo = -300, count = 601;
  Chart c = MakeChart(
      "t5_buckets", "T5: relative position j - i -> bucket (32 buckets, max_distance 128)",
      LineSpec({"relative", "relative position j - i (key minus query)"}, {"bucket", "bucket"},
               {"direction", "direction", false, "line", false}));
  std::string text;
  std::vector<std::int64_t> saturation;  // per direction: first distance in the last bucket
  std::int64_t max_distance = 0;
  for (T5Direction dir : {T5Direction::kBidirectional, T5Direction::kCausal}) {
    T5BucketParams p;
    p.direction = dir;
    max_distance = p.max_distance;
    const auto b = T5Buckets(p, lo, count);
    const std::set<std::int64_t> distinct(b.begin(), b.end());
    for (std::int64_t r = 0; r < count; ++r) {
      c.Add({{"direction", std::string(T5DirectionName(dir))},
             {"relative", lo + r},
             {"bucket", b[static_cast<std::size_t>(r)]}});
    }
    const T5Bucketer bk(p);
    // First distance from which every farther key shares the last bucket.
    std::int64_t sat = 0;
    for (std::int64_t n = 1; n <= 300; ++n) {
      const std::int64_t rel = dir == T5Direction::kCausal ? -n : n;
      if (bk.Bucket(rel) != bk.Bucket(dir == T5Direction::kCausal ? -300 : 300)) sat = n + 1;
    }
    saturation.push_back(sat);
    text += fmt::format(
        "{}: {} distinct buckets over -300..300, exact for |rel| < {}, last bucket "
        "from |rel| = {}. ",
        T5DirectionName(dir), distinct.size(), bk.max_exact(), sat);
  }
  c.caption = fmt::format(
      "posenc::T5Buckets. Small distances get a bucket each, larger ones share "
      "logarithmically wider buckets, and every distance from {} on (bidirectional; causal: "
      "from {}) shares the last one: the bias saturates there, before max_distance = {} "
      "(the log buckets round down). Bidirectional uses half the buckets per sign; causal "
      "sends every future key (j > i) to bucket 0. {}",
      saturation[0], saturation[1], max_distance, text);
  summary.push_back("T5 buckets: " + text);
  return c;
}

Chart DebertaFigure(std::vector<std::string>& summary) {
  const std::int64_t n = 1201, lo = -600;
  DebertaBucketParams p{256, 512};
  Chart c =
      MakeChart("deberta_buckets", "DeBERTa-v3: relative position i - j -> log bucket (256, 512)",
                LineSpec({"relative", "relative position i - j"}, {"bucket", "bucket"}));
  std::set<std::int64_t> distinct;
  std::int64_t top = 0;
  for (std::int64_t r = lo; r < lo + n; ++r) {
    const std::int64_t b = MakeLogBucketPosition(r, p.bucket_size, p.max_position);
    distinct.insert(b);
    top = std::max(top, b);
    c.Add({{"relative", r}, {"bucket", b}});
  }
  c.caption = fmt::format(
      "posenc::MakeLogBucketPosition with bucket_size 256, max_position 512: exact for |rel| <= "
      "128, logarithmic beyond, odd (bucket(-r) = -bucket(r)). Over -600..600 it takes {} "
      "distinct values, up to {} (past max_position the value keeps creeping up; the gather "
      "clamps it to the 2 x 256 table).",
      distinct.size(), top);
  summary.push_back(
      fmt::format("DeBERTa buckets: {} distinct over -600..600, max {}", distinct.size(), top));
  return c;
}

Chart ShawFigure() {
  const std::int64_t n = 16;
  ShawParams p;
  p.clip = kShawClip;
  p.head_dim = 1;
  const auto idx = ShawIndexMatrix(p, n, n);
  MatrixStyle style;
  style.value_field = "clipped";
  style.value_title = fmt::format("clip(j - i, -{}, {})", p.clip, p.clip);
  style.diverging = true;
  style.label_field = "clipped";
  style.light_label_above = p.clip - 1;
  style.size = 340;
  Chart c = MakeChart(
      "shaw_clip",
      fmt::format("Shaw: clipped distance clip(j - i, -k, k) for k = {} ({} x {})", p.clip, n, n),
      MatrixSpec({"j", "key j"}, {"i", "query i"}, style));
  std::int64_t saturated = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int64_t v = idx[static_cast<std::size_t>(i * n + j)];
      saturated += (v == 0 || v == 2 * p.clip) ? 1 : 0;
      c.Add({{"i", i}, {"j", j}, {"index", v}, {"clipped", v - p.clip}});
    }
  }
  c.caption = fmt::format(
      "posenc::ShawIndexMatrix with k = {} (the k of the whole report; Shaw et al. used 16): "
      "the number in each cell is clip(j - i, -{}, {}); the pair uses row clip(j - i) + k of "
      "a^K / a^V (2k + 1 = {} rows). Only the band |j - i| < {} has its own rows; {} of the {} "
      "cells sit on the two clipped rows (-{} and {}), so beyond k every distance looks the "
      "same.",
      p.clip, p.clip, p.clip, p.TableRows(), p.clip, saturated, n * n, p.clip, p.clip);
  return c;
}

// Transformer-XL's R: the sinusoid of the distance (not of the position),
// rows in distance order, from posenc::TransformerXLPositionEmbedding.
Heatmap TransformerXLFigure() {
  TransformerXLParams p;
  p.dim = 64;
  const std::int64_t klen = 128;
  std::vector<double> r(static_cast<std::size_t>(klen * p.dim));
  TransformerXLPositionEmbedding(p, klen,
                                 TensorView::Contiguous(r.data(), DType::kFloat64, {klen, p.dim}));
  Heatmap h;
  h.id = "transformer_xl_r";
  h.title = fmt::format("Transformer-XL: R_(i-j) for distances 0..{} (d = {})", klen - 1, p.dim);
  h.rows = klen;
  h.cols = p.dim;
  h.values.resize(r.size());
  for (std::int64_t d = 0; d < klen; ++d) {  // row d of the figure: distance d
    const std::int64_t row = TransformerXLRow(klen, d);
    std::copy_n(r.begin() + row * p.dim, p.dim, h.values.begin() + d * p.dim);
  }
  h.x_title = "dimension ([sin | cos] halves)";
  h.y_title = "distance i - j";
  h.value_title = "R";
  h.scheme = ColorScheme::kDiverging;
  h.caption = fmt::format(
      "posenc::TransformerXLPositionEmbedding (klen {}, d = {}, base 10^4): the sinusoidal "
      "table of section 2, indexed by the distance i - j instead of the position, with "
      "[sin | cos] halves. The score adds (q_i + v) . W_R R_(i-j) and u . k_j to the content "
      "term: W_R, u and v are learned, R is fixed, so the position term depends on i - j "
      "only (relative, measured in the comparison table). Row 0 (distance 0) is [0 ... 0 | "
      "1 ... 1]; max |R| measured {}.",
      klen, p.dim, Sci(MaxAbs(h.values)));
  return h;
}

// FIRE's normalised distance x = psi(i - j) / psi(max(i, |L|)), psi(d) =
// log(c d + 1), at the paper's initial c and L (posenc::FireWeights).
Chart FireFigure(std::vector<std::string>& summary) {
  const FireWeights w;
  const double eps = FireParams{}.eps;
  auto psi = [&](double d) { return std::log(std::abs(w.c * d) + 1.0); };
  Chart c = MakeChart("fire_x",
                      fmt::format("FIRE: normalised distance x fed to its MLP (c = {:g}, L = {:g})",
                                  w.c, w.threshold),
                      LineSpec({"distance", "distance i - j", AxisScale::kLog},
                               {"x", "x = psi(i - j) / psi(max(i, L))"},
                               {"query", "query position i", false, "line", false}));
  std::string text;
  for (std::int64_t q : {128, 512, 2048, 8192}) {
    const double norm = psi(std::max<double>(static_cast<double>(q), std::abs(w.threshold))) + eps;
    for (std::int64_t k = 0; k <= 60; ++k) {
      const double d = std::round(std::pow(static_cast<double>(q), k / 60.0));
      if (k > 0 && d == std::round(std::pow(static_cast<double>(q), (k - 1) / 60.0))) continue;
      c.Add({{"query", fmt::format("i = {}", q)}, {"distance", d}, {"x", psi(d) / norm}});
    }
    text += fmt::format("{}i = {}: x at distance 128 is {:.3f}, at its farthest key {:.3f}",
                        text.empty() ? "" : "; ", q, psi(128.0) / norm,
                        psi(static_cast<double>(q)) / norm);
  }
  c.caption = fmt::format(
      "FIRE (Li et al. 2024, posenc/fire.h) is a relative bias like T5's, but continuous: a "
      "small learned MLP (shared by the heads) maps the distance, log-compressed and "
      "normalised to x in [0, 1], to one bias per head. Up to i = |L| the normaliser is the "
      "constant psi(L), so x depends on the distance only; past it the normaliser grows with i "
      "and a longer context is squeezed back into [0, 1] (progressive interpolation): the same "
      "distance gets a smaller x. Measured: {}. Its MLP is learned, so there is no canonical "
      "bias to draw; its measured row is in the comparison table and its trained model in "
      "section 9.",
      text);
  summary.push_back("FIRE x: " + text);
  return c;
}

}  // namespace

Section RelativeSection(const ReportOptions&) {
  Section s;
  s.id = "relative";
  s.title = "Relative positions";
  s.paragraphs = {
      "Relative methods give the score of query i and key j a term that depends on their "
      "difference only. They differ in how a difference becomes a term: T5 and DeBERTa bucket "
      "it (exact near, logarithmic far), Shaw clips it to +-k, ALiBi (section 5) multiplies it by "
      "a slope, Transformer-XL feeds a sinusoid of it through a learned projection, and FIRE "
      "(Li et al. 2024) feeds its log-compressed, normalised value to a small learned MLP."};
  std::vector<std::string> summary;
  s.blocks.emplace_back(LessonMatrix());
  s.blocks.emplace_back(T5Figure(summary));
  s.blocks.emplace_back(DebertaFigure(summary));
  s.blocks.emplace_back(ShawFigure());
  s.blocks.emplace_back(TransformerXLFigure());
  s.blocks.emplace_back(FireFigure(summary));
  s.summary = std::move(summary);
  return s;
}

}  // namespace posenc::report
