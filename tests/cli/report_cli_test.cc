// `posenc report` and `posenc plot` end to end: files written, summary
// printed, no progress bar on a non-terminal stderr, and one-line errors.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "cli_util.h"
#include "test_util.h"

namespace posenc::test {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

TEST(ReportCli, QuickReportWritesPageAndData) {
  const std::string dir = TempDir("report_cli_quick");
  const auto r = RunCli("report --quick -o " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << "stderr is not a terminal: no progress bar expected: " << r.err;
  EXPECT_NE(r.out.find("wrote " + dir + "/index.html"), std::string::npos) << r.out;
  const std::string html = Slurp(fs::path(dir) / "index.html");
  EXPECT_NE(html.find("id=\"comparison\""), std::string::npos);
  EXPECT_NE(html.find("vegaEmbed"), std::string::npos);  // the library is inlined
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  for (const char* f : {"permutation", "permutation_pooled", "sinusoidal_curves", "learned_table",
                        "learned_norm", "rope_decay", "rope_scaling", "alibi_slopes", "alibi_bias",
                        "alibi_matrix", "relative_matrix", "t5_buckets", "deberta_buckets",
                        "shaw_clip", "attention_maps", "rope_numerics", "comparison"}) {
    EXPECT_TRUE(fs::exists(fs::path(dir) / "data" / (std::string(f) + ".csv"))) << f;
  }
  // The practice figure's data: 6 dimensions x 100 positions + a header.
  std::istringstream csv(Slurp(fs::path(dir) / "data" / "sinusoidal_curves.csv"));
  std::string line;
  int lines = 0;
  while (std::getline(csv, line)) ++lines;
  EXPECT_EQ(lines, 601);
}

TEST(ReportCli, ConfigAddsAFigure) {
  const std::string dir = TempDir("report_cli_config");
  const auto r = RunCli("report --quick -o " + dir + " --config " +
                        SourcePath("examples/configs/llama-3.1-8b.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(fs::path(dir) / "data" / "config_0_llama_3_1_8b.csv"));
}

TEST(ReportCli, GgufConfigsAddFigures) {
  const std::string dir = TempDir("report_cli_gguf");
  const std::string gguf = SourcePath("tests/golden/gguf/");
  const auto r =
      RunCli("report --quick -o " + dir + " --config " + gguf +
             "b_llama31_8b_llama3_rope_freqs.gguf --config " + gguf + "f_bloom_alibi.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(fs::path(dir) / "data" / "config_0_b_llama31_8b_llama3_rope_freqs.csv"));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "data" / "config_1_alibi.csv"));
}

TEST(ReportCli, MissingConfigIsIoError) {
  const auto r = RunCli("report --quick -o " + TempDir("report_cli_missing") +
                        " --config /nonexistent/config.json");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("--config: cannot read '/nonexistent/config.json'"), std::string::npos)
      << r.err;
}

TEST(ReportCli, UnwritableOutputIsIoError) {
  const auto r = RunCli("report --quick -o /proc/posenc_report");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("/proc/posenc_report"), std::string::npos) << r.err;
}

TEST(ReportCli, BadThreadsIsInvalidArgument) {
  const auto r = RunCli("report --quick --threads 0 -o " + TempDir("report_cli_threads"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--threads: got 0"), std::string::npos) << r.err;
}

TEST(ReportCli, MissingChartLibraryNamesSetup) {
  ::setenv("POSENC_NODE_MODULES", "/nonexistent/node_modules", 1);  // inherited by the child
  const auto r = RunCli("report --quick -o " + TempDir("report_cli_nolib"));
  ::unsetenv("POSENC_NODE_MODULES");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("/nonexistent/node_modules/vega/build/vega.min.js"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("scripts/setup.sh"), std::string::npos) << r.err;
}

TEST(ReportCli, PlotWritesOneFigure) {
  const std::string file = TempDir("plot_cli") + "/p.html";
  const auto r = RunCli("plot sinusoidal --positions 16 --dim 8 -o " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("16 x 8 heatmap"), std::string::npos);
  const std::string html = Slurp(file);
  EXPECT_NE(html.find("\"rows\":16"), std::string::npos);
  EXPECT_NE(html.find("posenc table sinusoidal --positions 16 --dim 8"), std::string::npos);
}

TEST(ReportCli, PlotNeedsOutput) {
  const auto r = RunCli("plot sinusoidal --positions 4 --dim 4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("-o: got (none)"), std::string::npos) << r.err;
}

TEST(ReportCli, PlotRejectsFormat) {
  const auto r = RunCli("plot sinusoidal --positions 4 --dim 4 --format csv -o x.html");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--format"), std::string::npos) << r.err;
}

TEST(ReportCli, PlotNeedsMethod) {
  const auto r = RunCli("plot -o x.html");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("METHOD"), std::string::npos) << r.err;
}

TEST(ReportCli, PlotPassesTableErrorsThrough) {
  const auto r =
      RunCli("plot sinusoidal --positions 4 --dim 0 -o " + TempDir("plot_cli_bad") + "/p.html");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("dim"), std::string::npos) << r.err;
}

TEST(PlaygroundCli, WritesThePageWithTheModule) {
  const std::string wasm = TempDir("playground_cli_module");
  std::ofstream(fs::path(wasm) / "posenc.js") << "var createPosencModule = function () {};";
  std::ofstream(fs::path(wasm) / "posenc.wasm", std::ios::binary) << std::string("\0asm", 4);
  const std::string dir = TempDir("playground_cli_out") + "/pg";
  const auto r = RunCliAfter("POSENC_WASM_DIR='" + wasm + "' ", "playground -o " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + dir + "/index.html"), std::string::npos) << r.out;
  const std::string html = Slurp(fs::path(dir) / "index.html");
  EXPECT_NE(html.find("id=\"posenc-wasm\">AGFzbQ==</script>"), std::string::npos);
  EXPECT_NE(html.find("vegaEmbed"), std::string::npos);  // drawn with the report's charts
}

TEST(PlaygroundCli, WithoutTheModuleOneLineAndExitCode) {
  const std::string wasm = TempDir("playground_cli_nomodule");
  const auto r = RunCliAfter("POSENC_WASM_DIR='" + wasm + "' ",
                             "playground -o " + TempDir("playground_cli_none") + "/pg");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_EQ(r.err, "posenc: I/O error: playground: no posenc.js and posenc.wasm in " + wasm +
                       " (build them with `cmake --preset wasm && cmake --build --preset wasm`, "
                       "or set POSENC_WASM_DIR)\n");
}

TEST(PlaygroundCli, ReportWithoutTheModuleSaysSoAndKeepsTheStaticFigures) {
  const std::string wasm = TempDir("report_cli_nomodule");
  const std::string dir = TempDir("report_cli_nomodule_out") + "/r";
  const auto r = RunCliAfter("POSENC_WASM_DIR='" + wasm + "' ", "report --quick -o " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(
      r.out.find("live playground: not in this page: no posenc.js and posenc.wasm in " + wasm),
      std::string::npos)
      << r.out;
  const std::string html = Slurp(fs::path(dir) / "index.html");
  EXPECT_NE(html.find("The live playground is not in this page"), std::string::npos);
  EXPECT_NE(html.find("id=\"comparison\""), std::string::npos);
}

}  // namespace
}  // namespace posenc::test
