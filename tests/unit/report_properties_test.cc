// The measured properties of `posenc report` (cli/report/properties.h,
// compare.h), the table-CSV parser of `posenc plot` and the HTML assembly.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "compare.h"
#include "html.h"
#include "plot.h"
#include "posenc/alibi.h"
#include "posenc/error.h"
#include "progress.h"
#include "properties.h"

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
  EXPECT_DOUBLE_EQ(ShiftChange([](std::int64_t i, std::int64_t j) { return double(i * j); }, 8, {1}),
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

TEST(ReportCompare, SinusoidalIsBoundedUniqueAndRelative) {
  const MethodMeasure m = MeasureSinusoidal(SmallSetup());
  EXPECT_EQ(m.extra_params, 0);
  EXPECT_TRUE(m.bounded);
  EXPECT_LE(m.max_abs_at_4l, 1.0);
  EXPECT_GT(m.max_abs_at_l, 0.99);
  EXPECT_GT(m.min_code_distance, 0.1);        // distinct positions, distinct codes
  EXPECT_LT(m.shift_change, 1e-12);           // PE(i).PE(j) depends on i - j only
  EXPECT_EQ(m.past_end, PastEnd::kContinues);
  EXPECT_EQ(m.attention_bytes, 0.0);
  EXPECT_GT(m.ns_per_token, 0.0);
}

TEST(ReportCompare, LearnedIsUniqueButAbsoluteAndErrorsPastItsEnd) {
  const MethodMeasure m = MeasureLearned(SmallSetup());
  EXPECT_EQ(m.extra_params, 512 * 768);
  EXPECT_GT(m.min_code_distance, 0.0);
  EXPECT_GT(m.shift_change, 1e-3);            // random rows: no relative structure
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
}

TEST(ReportPlot, RejectsNonFiniteValue) {
  EXPECT_THROW(HeatmapFromTableCsv("position,c0\n0,nan\n", "x", "c"), InvalidArgument);
  EXPECT_THROW(HeatmapFromTableCsv("position,c0\n0,abc\n", "x", "c"), InvalidArgument);
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

}  // namespace
}  // namespace posenc::report
