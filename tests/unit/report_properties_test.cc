// The measured properties of `posenc report` (cli/report/properties.h,
// compare.h), the table-CSV parser of `posenc plot` and the HTML assembly.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compare.h"
#include "figures.h"
#include "html.h"
#include "plot.h"
#include "posenc/alibi.h"
#include "posenc/error.h"
#include "posenc/positions.h"
#include "posenc/t5.h"
#include "progress.h"
#include "properties.h"
#include "sections.h"

namespace posenc::report {
namespace {

CompareSetup SmallSetup() {
  CompareSetup s;
  s.length = 64;
  s.shift_length = 12;
  s.timing_repeats = 1;
  s.shape.seq = 256;
  return s;
}

TEST(ReportProperties, MaxAbsAndMinRowDistance) {
  EXPECT_EQ(MaxAbs({}), 0.0);
  EXPECT_EQ(MaxAbs({0.5, -3.0, 2.0}), 3.0);
  // Rows (0,0), (3,4), (3,5): closest pair is the last two, distance 1.
  CodeTable t{3, 2, {0, 0, 3, 4, 3, 5}};
  EXPECT_DOUBLE_EQ(MinRowDistance(t), 1.0);
  CodeTable same{2, 2, {1, 2, 1, 2}};
  EXPECT_EQ(MinRowDistance(same), 0.0);
}

TEST(ReportProperties, MinRowDistanceNeedsTwoRows) {
  EXPECT_THROW(MinRowDistance(CodeTable{1, 2, {1, 2}}), InvalidArgument);
}

TEST(ReportProperties, MinRowDistanceRejectsWrongSize) {
  EXPECT_THROW(MinRowDistance(CodeTable{2, 2, {1, 2, 3}}), InvalidArgument);
}

TEST(ReportProperties, ShiftChangeOfRelativeAndAbsoluteScores) {
  EXPECT_EQ(ShiftChange([](std::int64_t i, std::int64_t j) { return double(j - i); }, 8, {1, 5}),
            0.0);
  // s = i * j: s(i+1, j+1) - s(i, j) = i + j + 1, max 15 at i = j = 7; max |s| = 49.
  EXPECT_DOUBLE_EQ(
      ShiftChange([](std::int64_t i, std::int64_t j) { return double(i * j); }, 8, {1}),
      15.0 / 49.0);
}

TEST(ReportProperties, ShiftChangeRejectsBadArguments) {
  const ScoreFn f = [](std::int64_t, std::int64_t) { return 1.0; };
  EXPECT_THROW(ShiftChange(f, 0, {1}), InvalidArgument);
  EXPECT_THROW(ShiftChange(f, 4, {}), InvalidArgument);
  EXPECT_THROW(ShiftChange(f, 4, {0}), InvalidArgument);
}

TEST(ReportProperties, DistinctValues) {
  EXPECT_EQ(DistinctValues([](std::int64_t k) { return double(std::abs(k)); }, 10), 10);
  EXPECT_EQ(DistinctValues([](std::int64_t k) { return double(k); }, 10), 19);
  EXPECT_THROW(DistinctValues([](std::int64_t) { return 0.0; }, 0), InvalidArgument);
}

TEST(ReportProperties, Formatting) {
  EXPECT_EQ(Thousands(393216), "393,216");
  EXPECT_EQ(Thousands(-1000), "-1,000");
  EXPECT_EQ(Thousands(12), "12");
  EXPECT_EQ(Bytes(805306368.0), "805.3 MB");
  EXPECT_EQ(Sci(0.0), "0");
  EXPECT_EQ(Sci(2.5e-16), "2.50e-16");
  EXPECT_EQ(PastEndName(PastEnd::kErrors), "errors");
  EXPECT_EQ(DenseBiasBytes(ModelShape{}), 12LL * 4096 * 4096 * 4);
  EXPECT_THROW(NanosPer([] {}, 1.0, 0), InvalidArgument);
}

// The cost column: every method on one shape and in one unit, each through
// the kernel that runs it (fused, table add + fused, or the reference where
// no fused kernel exists), timed alternately with that kernel without a term.
TEST(ReportCompare, CostOfEveryMethodOnOneShape) {
  CompareSetup s;
  s.shape.hidden = 128;
  s.shape.heads = 4;
  s.cost_seq = 48;
  s.timing_repeats = 1;
  const CostShape shape = CostShapeFor(s);
  EXPECT_EQ(shape.seq, 48);
  EXPECT_EQ(shape.heads, 4);
  EXPECT_EQ(shape.head_dim, 32);
  const std::map<std::string, std::string> kernels = {
      {"sinusoidal", "table add + fused kernel"},
      {"learned", "table add + fused kernel"},
      {"RoPE", "fused kernel"},
      {"ALiBi", "fused kernel"},
      {"T5 buckets", "fused kernel"},
      {"Shaw", "fused kernel"},
      {"FIRE", "fused kernel"},
      {"Transformer-XL", "reference (float64; no fused kernel)"},
      {"DeBERTa", "reference (float64; no fused kernel)"}};
  for (const auto& [method, kernel] : kernels) {
    SCOPED_TRACE(method);
    const MethodCost c = MeasureCost(method, s);
    EXPECT_GT(c.ns_per_token, 0.0);
    EXPECT_GT(c.none_ns_per_token, 0.0);
    EXPECT_EQ(c.kernel, kernel);
  }
  try {
    MeasureCost("NoPE-ish", s);
    ADD_FAILURE() << "no error for an unknown method";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("method: got NoPE-ish"), std::string::npos) << e.what();
  }
}

TEST(ReportCompare, SinusoidalIsBoundedUniqueAndRelative) {
  const MethodMeasure m = MeasureSinusoidal(SmallSetup());
  EXPECT_EQ(m.extra_params, 0);
  EXPECT_TRUE(m.bounded);
  EXPECT_LE(m.max_abs_at_4l, 1.0);
  EXPECT_GT(m.max_abs_at_l, 0.99);
  EXPECT_GT(m.min_code_distance, 0.1);  // distinct positions, distinct codes
  EXPECT_LT(m.shift_change, 1e-12);     // PE(i).PE(j) depends on i - j only
  EXPECT_EQ(m.past_end, PastEnd::kContinues);
  EXPECT_EQ(m.attention_bytes, 0.0);
}

TEST(ReportCompare, LearnedIsUniqueButAbsoluteAndErrorsPastItsEnd) {
  const MethodMeasure m = MeasureLearned(SmallSetup());
  EXPECT_EQ(m.extra_params, 512 * 768);
  EXPECT_GT(m.min_code_distance, 0.0);
  EXPECT_GT(m.shift_change, 1e-3);  // random rows: no relative structure
  EXPECT_EQ(m.past_end, PastEnd::kErrors);
  EXPECT_NE(m.past_end_detail.find("512"), std::string::npos);
}

TEST(ReportCompare, RopeIsRelativeAndNormPreserving) {
  const MethodMeasure m = MeasureRope(SmallSetup());
  EXPECT_EQ(m.extra_params, 0);
  EXPECT_TRUE(m.bounded);
  EXPECT_LE(m.max_abs_at_4l, 1.0 + 1e-15);
  EXPECT_GT(m.min_code_distance, 0.0);
  EXPECT_LT(m.shift_change, 1e-12);
  EXPECT_EQ(m.past_end, PastEnd::kExtrapolates);
  EXPECT_EQ(m.attention_bytes, 256.0 * 64 * 2 * 4);
}

TEST(ReportCompare, AlibiGrowsAsSlopeTimesDistance) {
  const CompareSetup s = SmallSetup();
  const MethodMeasure m = MeasureAlibi(s);
  AlibiParams p;
  p.num_heads = s.shape.heads;
  double slope = 0.0;  // the largest slope (12 heads: 2^-0.5, an interleaved head)
  for (double v : AlibiSlopes(p)) slope = std::max(slope, v);
  EXPECT_LE(m.max_abs_at_l, slope * s.length);
  EXPECT_NEAR(m.max_abs_at_l, slope * (s.length - 1), 1e-12);
  EXPECT_NEAR(m.max_abs_at_4l, slope * (4 * s.length - 1), 1e-12);
  EXPECT_FALSE(m.bounded);
  EXPECT_EQ(m.shift_change, 0.0);
  EXPECT_EQ(m.distinct_distances, s.length);  // one value per |i - j|
  EXPECT_EQ(m.attention_bytes, 12.0 * 256 * 256 * 4);
}

TEST(ReportCompare, FireIsBoundedRelativeBelowLAndInterpolates) {
  const CompareSetup s = SmallSetup();
  const MethodMeasure m = MeasureFire(s);
  EXPECT_EQ(m.extra_params, ((2 + 12) * 32 + 12 + 2) * 12);  // f, c and L per layer
  EXPECT_TRUE(m.bounded);  // every pair within the bound of f on x in [0, 1]
  EXPECT_GT(m.max_abs_at_l, 0.0);
  EXPECT_EQ(m.shift_change, 0.0);             // positions below |L| = 512: a function of i - j
  EXPECT_EQ(m.distinct_distances, s.length);  // psi is injective on distances
  EXPECT_EQ(m.past_end, PastEnd::kInterpolates);
  EXPECT_NE(m.past_end_detail.find("2^24 - 1"), std::string::npos);
  EXPECT_EQ(m.attention_bytes, 0.0);
}

TEST(ReportCompare, T5IsRelativeAndSaturates) {
  const CompareSetup s = SmallSetup();
  const MethodMeasure m = MeasureT5(s);
  EXPECT_EQ(m.extra_params, 32 * 12);  // one [32 buckets, 12 heads] table for all layers
  EXPECT_TRUE(m.bounded);
  EXPECT_GT(m.max_abs_at_l, 0.0);
  // One bias value per bucket reached by the distances (-L, L).
  const auto buckets = T5Buckets(T5BucketParams{}, -(s.length - 1), 2 * s.length - 1);
  EXPECT_EQ(
      m.distinct_distances,
      static_cast<std::int64_t>(std::set<std::int64_t>(buckets.begin(), buckets.end()).size()));
  EXPECT_EQ(m.shift_change, 0.0);
  EXPECT_EQ(m.past_end, PastEnd::kSaturates);
  EXPECT_EQ(m.attention_bytes, 12.0 * 256 * 256 * 4);
}

TEST(ReportCompare, ShawHasTwoKPlusOneDistinctTerms) {
  const MethodMeasure m = MeasureShaw(SmallSetup());
  EXPECT_EQ(kShawClip, 4);                     // the report's one k (section 6 and this table)
  EXPECT_EQ(m.extra_params, 2 * 9 * 64 * 12);  // a^K, a^V [2k+1, D] per layer, k = 4
  EXPECT_TRUE(m.bounded);
  EXPECT_EQ(m.distinct_distances, 2 * kShawClip + 1);  // clip(j - i, -k, k): 2k + 1 rows
  EXPECT_EQ(m.shift_change, 0.0);
  EXPECT_EQ(m.past_end, PastEnd::kSaturates);
  EXPECT_EQ(m.attention_bytes, 12.0 * 256 * 9 * 4);
}

TEST(ReportCompare, TransformerXLIsBoundedRelativeAndDistinctPerDistance) {
  const CompareSetup s = SmallSetup();
  const MethodMeasure m = MeasureTransformerXL(s);
  EXPECT_EQ(m.extra_params, (768 * 768 + 2 * 768) * 12);
  EXPECT_TRUE(m.bounded);
  EXPECT_LE(m.max_abs_at_4l, 1.0);
  // Each distance 0..L-1 its own value, every future key (i < j) none: L + 1.
  EXPECT_EQ(m.distinct_distances, s.length + 1);
  EXPECT_EQ(m.shift_change, 0.0);
  EXPECT_EQ(m.past_end, PastEnd::kExtrapolates);
}

TEST(ReportCompare, DebertaIsExactNearAndClampsFar) {
  const CompareSetup s = SmallSetup();
  const MethodMeasure m = MeasureDeberta(s);
  EXPECT_EQ(m.extra_params, 512 * 768);
  EXPECT_TRUE(m.bounded);
  EXPECT_EQ(m.distinct_distances, 2 * s.length - 1);  // |i - j| < 64 <= 128: exact buckets
  EXPECT_EQ(m.shift_change, 0.0);
  EXPECT_EQ(m.past_end, PastEnd::kSaturates);
  EXPECT_NE(m.past_end_detail.find("512 rows"), std::string::npos) << m.past_end_detail;
}

TEST(ReportPlot, ParsesConsecutiveTable) {
  const Heatmap h = HeatmapFromTableCsv("position,c0,c1\n5,1,-2\n6,0.5,3\n", "x", "posenc table x");
  EXPECT_EQ(h.rows, 2);
  EXPECT_EQ(h.cols, 2);
  EXPECT_EQ(h.y0, 5);
  EXPECT_EQ(h.y_title, "position");
  EXPECT_EQ(h.values, (std::vector<double>{1, -2, 0.5, 3}));
  EXPECT_EQ(h.scheme, ColorScheme::kDiverging);
}

TEST(ReportPlot, IdListsAreDrawnByRow) {
  const Heatmap g = HeatmapFromTableCsv("position,c0\n0,1\n9,2\n", "x", "c");
  EXPECT_EQ(g.y_title, "row");
  EXPECT_EQ(g.y0, 0);
  EXPECT_NE(g.caption.find("0, 9"), std::string::npos);
  EXPECT_EQ(g.scheme, ColorScheme::kSequential);
}

TEST(ReportPlot, RejectsBadHeader) {
  EXPECT_THROW(HeatmapFromTableCsv("pos,c0\n0,1\n", "x", "c"), InvalidArgument);
}

TEST(ReportPlot, RejectsEmptyCsv) {
  EXPECT_THROW(HeatmapFromTableCsv("", "x", "c"), InvalidArgument);
  EXPECT_THROW(HeatmapFromTableCsv("position,c0\n", "x", "c"), InvalidArgument);
}

TEST(ReportPlot, RejectsRaggedRow) {
  EXPECT_THROW(HeatmapFromTableCsv("position,c0,c1\n0,1\n", "x", "c"), InvalidArgument);
  try {
    HeatmapFromTableCsv("position,c0,c1\n0,1,2\n1,3\n", "x", "c");
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "table csv line 3 cells: got 2, expected 3 (the header's count)");
  }
}

TEST(ReportPlot, RejectsNonFiniteValue) {
  EXPECT_THROW(HeatmapFromTableCsv("position,c0\n0,nan\n", "x", "c"), InvalidArgument);
  EXPECT_THROW(HeatmapFromTableCsv("position,c0\n0,abc\n", "x", "c"), InvalidArgument);
  try {  // the message names the line, the cell and what is allowed
    HeatmapFromTableCsv("position,c0,c1\n0,1,2\n1,3,4x\n", "x", "c");
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "table csv line 3: got 4x, expected a finite number");
  }
}

TEST(ReportPlot, ReadsALastLineWithoutNewlineAndSkipsEmptyLines) {
  const Heatmap h = HeatmapFromTableCsv("position,c0,c1\n0,1,2\n\n1,3,-4", "x", "c");
  EXPECT_EQ(h.rows, 2);
  EXPECT_EQ(h.values, (std::vector<double>{1, 2, 3, -4}));
  EXPECT_EQ(h.y_title, "position");
}

Report TinyReport() {
  Report r;
  Section s;
  s.id = "s";
  s.title = "A </script> title";
  s.paragraphs = {"x < y & z"};
  Heatmap h;
  h.id = "h";
  h.title = "heat";
  h.caption = "ends with </script><!--";
  h.rows = 2;
  h.cols = 2;
  h.values = {0, 1, 2, 3};
  s.blocks.emplace_back(h);
  Chart c;
  c.id = "c";
  c.title = "chart";
  c.spec = {{"mark", "line"}};
  c.Add({{"a", 1}, {"b", "x,y"}});
  s.blocks.emplace_back(c);
  r.sections.push_back(s);
  return r;
}

TEST(ReportHtml, DataJsonIsSafeInsideAScriptElement) {
  const std::string json = FigureDataJson(TinyReport());
  EXPECT_EQ(json.find("</"), std::string::npos);
  EXPECT_EQ(json.find("<!--"), std::string::npos);
  const auto parsed = nlohmann::json::parse(json);
  ASSERT_EQ(parsed["figures"].size(), 2u);
  EXPECT_FALSE(parsed["figures"][0].contains("caption"));  // captions live in the HTML
  EXPECT_EQ(parsed["figures"][0]["values"].size(), 4u);
  EXPECT_EQ(parsed["figures"][1]["spec"]["data"]["values"][0]["b"], "x,y");
}

TEST(ReportHtml, DataJsonEscapesEveryScriptEndAndKeepsTheText) {
  // "</" and "<!" anywhere in a string (start, end, repeated, next to a
  // lone '<') are escaped, and the JSON still reads back as the same text.
  Report r;
  Section s;
  s.id = "s";
  Chart c;
  c.id = "c";
  c.spec = {{"mark", "line"}};
  const std::vector<std::string> texts = {"</script>", "a<!--b", "<<//<!<!", "x < y", "end<", "<"};
  for (std::size_t i = 0; i < texts.size(); ++i) {
    c.Add({{"i", static_cast<int>(i)}, {"t", texts[i]}});
  }
  s.blocks.emplace_back(c);
  r.sections.push_back(s);
  const std::string json = FigureDataJson(r);
  EXPECT_EQ(json.find("</"), std::string::npos);
  EXPECT_EQ(json.find("<!"), std::string::npos);
  const auto values = nlohmann::json::parse(json)["figures"][0]["spec"]["data"]["values"];
  ASSERT_EQ(values.size(), texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(values[i]["t"], texts[i]) << i;
}

TEST(ReportHtml, PageInlinesLibraryAndEscapesText) {
  const ChartLibrary lib{"/*VEGA*/", "/*VL*/", "/*EMBED*/"};
  const std::string html = RenderHtml(TinyReport(), lib);
  EXPECT_NE(html.find("/*VEGA*/"), std::string::npos);
  EXPECT_NE(html.find("/*EMBED*/"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_NE(html.find("x &lt; y &amp; z"), std::string::npos);
  EXPECT_NE(html.find("A &lt;/script&gt; title"), std::string::npos);
}

TEST(ReportHtml, CsvOfEachBlock) {
  const Report r = TinyReport();
  EXPECT_EQ(BlockCsv(r.sections[0].blocks[0]), "row \\ column,0,1\n0,0,1\n1,2,3\n");
  EXPECT_EQ(BlockCsv(r.sections[0].blocks[1]), "a,b\n1,\"x,y\"\n");
}

TEST(ReportHtml, MissingChartLibraryIsAnIoErrorNamingThePath) {
  ::setenv("POSENC_NODE_MODULES", "/nonexistent/node_modules", 1);
  try {
    LoadChartLibrary();
    ADD_FAILURE() << "expected IoError";
  } catch (const IoError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("/nonexistent/node_modules/vega/build/vega.min.js"), std::string::npos);
    EXPECT_NE(what.find("scripts/setup.sh"), std::string::npos);
  }
  ::unsetenv("POSENC_NODE_MODULES");
}

TEST(ReportHtml, NonFiniteDataIsABuilderBug) {
  Chart c;
  c.id = "c";
  EXPECT_THROW(c.Add({{"v", std::nan("")}}), std::logic_error);
  Heatmap h;
  h.id = "h";
  h.rows = 1;
  h.cols = 2;
  h.values = {1.0};
  EXPECT_THROW(h.Check(), std::logic_error);
}

TEST(ReportProgress, SilentWhenNotATerminal) {
  Progress p(3, ProgressMode::kNever);
  EXPECT_FALSE(p.enabled());
  p.Step("a");
  p.Step("b");
  EXPECT_EQ(p.done(), 2);
}

// ---- sections 1, 3, 5-8: the measured figures ----

ReportOptions Quick() {
  ReportOptions o;
  o.detail = ReportDetail::kQuick;
  return o;
}

template <typename T>
const T& Find(const Section& s, const std::string& id) {
  for (const auto& b : s.blocks) {
    if (BlockId(b) == id) return std::get<T>(b);
  }
  throw std::logic_error("no block " + id);
}

TEST(ReportSections, PermutationOnlyNoPositionsIsOrderBlind) {
  const Section s = PermutationSection(Quick());
  const Table& t = Find<Table>(s, "permutation");
  ASSERT_EQ(t.rows.size(), 9u);
  for (const auto& row : t.rows) {
    EXPECT_EQ(row[3], row[0] == "none" ? "no" : "yes") << row[0];
    if (row[0] == "none") {
      EXPECT_LE(std::stod(row[1]), 1e-12);
    }
  }
  const Chart& c = Find<Chart>(s, "permutation_pooled");
  ASSERT_EQ(c.records.size(), 9u);
  for (const auto& r : c.records) {
    EXPECT_EQ(r["order_aware"] == "yes", r["measured"].get<double>() > 1e-9) << r.dump();
  }
}

TEST(ReportSections, AlibiTwelveHeadsInterleaveTheSixteenHeadSeries) {
  const Section s = AlibiSection(Quick());
  std::map<std::string, std::vector<double>> slopes;
  for (const auto& r : Find<Chart>(s, "alibi_slopes").records) {
    slopes[r["heads"].get<std::string>()].push_back(r["slope"].get<double>());
  }
  ASSERT_EQ(slopes["8 heads"].size(), 8u);
  ASSERT_EQ(slopes["12 heads"].size(), 12u);
  for (int h = 0; h < 8; ++h) {
    EXPECT_DOUBLE_EQ(slopes["8 heads"][h], std::exp2(-(h + 1)));
    EXPECT_DOUBLE_EQ(slopes["12 heads"][h], slopes["8 heads"][h]);
  }
  for (int h = 8; h < 12; ++h) EXPECT_NEAR(slopes["12 heads"][h], std::exp2(-0.5 - (h - 8)), 1e-15);
  // Causal 64 x 64 matrix of head 3 (slope 1/8): masked cells are absent.
  const Chart& m = Find<Chart>(s, "alibi_matrix");
  ASSERT_EQ(m.records.size(), 64u * 65 / 2);
  for (const auto& r : m.records) {
    const auto i = r["query"].get<std::int64_t>(), j = r["key"].get<std::int64_t>();
    ASSERT_LE(j, i);
    EXPECT_DOUBLE_EQ(r["bias"].get<double>(), -0.125 * double(i - j));
  }
}

TEST(ReportSections, RelativeBucketsAndClipping) {
  const Section s = RelativeSection(Quick());
  for (const auto& r : Find<Chart>(s, "relative_matrix").records) {
    EXPECT_EQ(r["rel"].get<std::int64_t>(),
              r["i"].get<std::int64_t>() - r["j"].get<std::int64_t>());
  }
  std::map<std::pair<std::string, std::int64_t>, std::int64_t> t5;
  for (const auto& r : Find<Chart>(s, "t5_buckets").records) {
    t5[{r["direction"].get<std::string>(), r["relative"].get<std::int64_t>()}] =
        r["bucket"].get<std::int64_t>();
  }
  EXPECT_EQ(t5.size(), 2u * 601);
  EXPECT_EQ((t5[{"bidirectional", 0}]), 0);
  EXPECT_EQ((t5[{"bidirectional", 5}]), 16 + 5);  // exact below max_exact = 8
  EXPECT_EQ((t5[{"bidirectional", -300}]), 15);   // saturated, negative half
  EXPECT_EQ((t5[{"bidirectional", 300}]), 31);    // saturated, positive half
  EXPECT_EQ((t5[{"causal", 300}]), 0);            // future keys: bucket 0
  EXPECT_EQ((t5[{"causal", -300}]), 31);
  std::map<std::int64_t, std::int64_t> deberta;
  for (const auto& r : Find<Chart>(s, "deberta_buckets").records) {
    deberta[r["relative"].get<std::int64_t>()] = r["bucket"].get<std::int64_t>();
  }
  ASSERT_EQ(deberta.size(), 1201u);
  for (const auto& [rel, b] : deberta) {
    EXPECT_EQ(b, -deberta[-rel]) << rel;  // odd
    if (std::abs(rel) <= 128) {
      EXPECT_EQ(b, rel);  // exact near
    }
  }
  EXPECT_LT(deberta[600], 600);  // logarithmic far
  for (const auto& r : Find<Chart>(s, "shaw_clip").records) {
    const auto d = r["j"].get<std::int64_t>() - r["i"].get<std::int64_t>();
    EXPECT_EQ(r["index"].get<std::int64_t>(), std::clamp<std::int64_t>(d, -4, 4) + 4);
    EXPECT_EQ(r["clipped"].get<std::int64_t>(), std::clamp<std::int64_t>(d, -4, 4));
  }
}

// The captions state what their figure's data says (issue 35).
TEST(ReportSections, CaptionsAreComputedFromTheirData) {
  // Sinusoidal: the near-constant columns (range < 0.1), counted from the table.
  const Section sin = SinusoidalSection(Quick());
  const Heatmap& h = Find<Heatmap>(sin, "sinusoidal_table");
  std::int64_t flat = 0;
  for (std::int64_t c = 0; c < h.cols; ++c) {
    double lo = 1e300, hi = -1e300;
    for (std::int64_t r = 0; r < h.rows; ++r) {
      lo = std::min(lo, h.values[static_cast<std::size_t>(r * h.cols + c)]);
      hi = std::max(hi, h.values[static_cast<std::size_t>(r * h.cols + c)]);
    }
    flat += hi - lo < 0.1 ? 1 : 0;
  }
  EXPECT_GT(flat, 0);
  EXPECT_LT(flat, h.cols / 2);  // not "the right half"
  EXPECT_NE(
      h.caption.find(std::to_string(flat) + " of the " + std::to_string(h.cols) + " dimensions"),
      std::string::npos)
      << h.caption;
  EXPECT_EQ(Find<Heatmap>(sin, "sinusoidal_similarity").scheme, ColorScheme::kSequential);
  // T5: saturation from the bucket function, before max_distance.
  const Section rel = RelativeSection(Quick());
  const std::string& t5 = Find<Chart>(rel, "t5_buckets").caption;
  EXPECT_NE(t5.find("every distance from 91 on (bidirectional; causal: from 113)"),
            std::string::npos)
      << t5;
  EXPECT_EQ(t5.find("past max_distance"), std::string::npos) << t5;
  // Shaw: one k.
  EXPECT_NE(Find<Chart>(rel, "shaw_clip").caption.find("k = " + std::to_string(kShawClip)),
            std::string::npos);
  EXPECT_GT(Find<Chart>(rel, "fire_x").records.size(), 0u);
  EXPECT_EQ(Find<Heatmap>(rel, "transformer_xl_r").rows, 128);
}

TEST(ReportSections, AttentionMapsHaveNoEmptyPanel) {
  const Section s = AttentionSection(Quick());
  std::set<std::string> panels;
  for (const auto& r : Find<Chart>(s, "attention_maps").records) {
    panels.insert(r["scheme"].get<std::string>());
  }
  EXPECT_EQ(panels.size(), 9u);  // 3 columns x 3 rows
  EXPECT_EQ(panels.count("sinusoidal"), 1u);
  EXPECT_EQ(panels.count("learned"), 1u);
  EXPECT_EQ(Find<Chart>(s, "attention_maps").spec["columns"].get<int>() * 3,
            static_cast<int>(panels.size()));
}

TEST(ReportSections, LearnedRowNormsAndPastEndMessage) {
  LearnedInitParams p;
  p.max_positions = 512;
  p.dim = 768;
  p.seed = 1;
  const LearnedTable t = LearnedTable::RandomNormal(p);
  const auto norms = LearnedRowNorms(t);
  ASSERT_EQ(norms.size(), 512u);
  double sum = 0.0;
  for (double n : norms) sum += n;
  EXPECT_NEAR(sum / 512, 0.02 * std::sqrt(768.0), 0.01);  // E|x| ~ sigma sqrt(d)
  double row7 = 0.0;
  for (std::int64_t c = 0; c < 768; ++c) row7 += double(t.At(7, c)) * t.At(7, c);
  EXPECT_NEAR(norms[7], std::sqrt(row7), 1e-12);
  const std::string msg = LearnedPastEndMessage(t);
  EXPECT_NE(msg.find("512"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[0, 511]"), std::string::npos) << msg;
  const Section s = LearnedSection(Quick());
  EXPECT_EQ(Find<Chart>(s, "learned_norm").records.size(), 512u);
}

TEST(ReportSections, AttentionMapsAreCausalDistributions) {
  AttentionMapSetup setup;
  setup.tokens = 12;
  setup.dim = 8;
  const auto none = AttentionMap(AttentionPanel::kNone, setup);
  EXPECT_EQ(AttentionPanels().size(), 9u);  // a full 3 x 3 grid
  for (AttentionPanel panel : AttentionPanels()) {
    const auto p = AttentionMap(panel, setup);
    ASSERT_EQ(p.size(), 144u);
    double change = 0.0;
    for (int i = 0; i < 12; ++i) {
      double row = 0.0;
      for (int j = 0; j < 12; ++j) {
        const double v = p[static_cast<std::size_t>(i * 12 + j)];
        if (j > i) {
          EXPECT_EQ(v, 0.0);  // causal
        }
        row += v;
        change = std::max(change, std::abs(v - none[static_cast<std::size_t>(i * 12 + j)]));
      }
      EXPECT_NEAR(row, 1.0, 1e-12);
    }
    if (panel != AttentionPanel::kNone) {
      EXPECT_GT(change, 1e-3) << AttentionPanelName(panel);
    }
  }
  EXPECT_EQ(AttentionMap(AttentionPanel::kNone, setup), none);  // deterministic
}

TEST(ReportSections, AttentionMapRejectsTooFewTokens) {
  AttentionMapSetup setup;
  setup.tokens = 1;
  EXPECT_THROW(AttentionMap(AttentionPanel::kNone, setup), InvalidArgument);
}

TEST(ReportSections, AttentionMapRejectsOddDim) {
  AttentionMapSetup setup;
  setup.dim = 7;
  EXPECT_THROW(AttentionMap(AttentionPanel::kRope, setup), InvalidArgument);
}

TEST(ReportSections, LogSpacedPositionsCoverOneToMax) {
  const auto p = LogSpacedPositions(kMaxPosition, 8);
  EXPECT_EQ(p.front(), 1);
  EXPECT_EQ(p.back(), kMaxPosition);
  for (std::size_t i = 1; i < p.size(); ++i) EXPECT_GT(p[i], p[i - 1]);
  EXPECT_GT(p.size(), 150u);  // 24 octaves x 8, less the duplicates of small p
  EXPECT_EQ(LogSpacedPositions(1, 4), std::vector<std::int64_t>{1});
}

TEST(ReportSections, LogSpacedPositionsRejectsBadMax) {
  EXPECT_THROW(LogSpacedPositions(0, 8), InvalidArgument);
  EXPECT_THROW(LogSpacedPositions(kMaxPosition + 1, 8), InvalidArgument);
}

TEST(ReportSections, LogSpacedPositionsRejectsBadDensity) {
  EXPECT_THROW(LogSpacedPositions(100, 0), InvalidArgument);
}

TEST(ReportSections, RopeCosSinErrorByPolicy) {
  const std::vector<std::int64_t> pos = {1, 1000, 65536, kMaxPosition};
  const auto acc32 = RopeCosSinError(RopeNumerics::kAccurate, DType::kFloat32, 64, pos);
  for (double e : acc32) EXPECT_LE(e, std::exp2(-24) + 1e-8);  // rope.h: storage rounding only
  for (double e : RopeCosSinError(RopeNumerics::kAccurate, DType::kBFloat16, 64, pos)) {
    EXPECT_LE(e, std::exp2(-9) + 1e-9);  // bfloat16: 8 significant bits
    EXPECT_GT(e, 1e-5);
  }
  const auto hf32 = RopeCosSinError(RopeNumerics::kHF, DType::kFloat32, 64, pos);
  EXPECT_LT(hf32[0], 1e-6);  // small angles: float32 is enough
  EXPECT_GT(hf32[3], 0.1);   // float32 angle p * inv_freq at p ~ 2^24: O(1) error
  EXPECT_GT(hf32[2], hf32[1]);
}

TEST(ReportSections, RopeCosSinErrorRejectsOddHeadDim) {
  EXPECT_THROW(RopeCosSinError(RopeNumerics::kAccurate, DType::kFloat32, 63, {1}), InvalidArgument);
}

TEST(ReportSections, NumericsSectionHasFourSeries) {
  const Section s = NumericsSection(Quick());
  std::set<std::string> series;
  for (const auto& r : Find<Chart>(s, "rope_numerics").records)
    series.insert(r["series"].get<std::string>());
  EXPECT_EQ(series, (std::set<std::string>{"accurate, float32", "accurate, bfloat16", "hf, float32",
                                           "hf, bfloat16"}));
}

}  // namespace
}  // namespace posenc::report
