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
#include <set>

#include <fmt/format.h>

#include "charts.h"
#include "posenc/deberta.h"
#include "posenc/relative.h"
#include "posenc/shaw.h"
#include "posenc/t5.h"
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

}  // namespace

Section RelativeSection(const ReportOptions&) {
  Section s;
  s.id = "relative";
  s.title = "Relative positions";
  s.paragraphs = {
      "Relative methods give the score of query i and key j a term that depends on their "
      "difference only. They differ in how a difference becomes a term: T5 and DeBERTa bucket "
      "it (exact near, logarithmic far), Shaw clips it to +-k, ALiBi (section 5) multiplies it by "
      "a slope."};
  std::vector<std::string> summary;
  s.blocks.emplace_back(LessonMatrix());
  s.blocks.emplace_back(T5Figure(summary));
  s.blocks.emplace_back(DebertaFigure(summary));
  s.blocks.emplace_back(ShawFigure());
  s.summary = std::move(summary);
  return s;
}

}  // namespace posenc::report
