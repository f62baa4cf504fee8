// `posenc table sinusoidal` and `posenc table learned`: values at known
// positions (PE[1][0] = sin(1), the HF golden tables), the three formats, and
// user errors (one line on stderr, exit code 2 / 4 / CLI11's).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "posenc/learned.h"
#include "posenc/npy.h"
#include "test_util.h"

namespace posenc::test {
namespace {

nlohmann::json Json(const CliResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

// The error is one line on stderr and nothing on stdout.
void ExpectOneLineError(const CliResult& r, int code, const std::string& fragment) {
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// --- sinusoidal -----------------------------------------------------------------

TEST(TableSinusoidalCli, JsonMatchesDistilBertGoldenBitForBit) {
  const nlohmann::json j = Json(RunCli("table sinusoidal --dim 16 --positions 10"));
  EXPECT_EQ(j["shape"], nlohmann::json({10, 16}));
  EXPECT_EQ(j["data"][1][0].get<double>(), static_cast<double>(static_cast<float>(std::sin(1.0))));
  EXPECT_EQ(j["data"][1][1].get<double>(), static_cast<double>(static_cast<float>(std::cos(1.0))));
  const auto& golden = Golden("sinusoidal.json")["cases"][1];
  ASSERT_EQ(golden["kind"], "distilbert_create_sinusoidal_embeddings");
  EXPECT_EQ(j["data"], golden["table"]);
}

TEST(TableSinusoidalCli, SplitLayoutMatchesGptJ) {
  const nlohmann::json j = Json(RunCli("table sinusoidal --dim 16 --positions 10 --layout split"));
  const auto& golden = Golden("sinusoidal.json")["cases"][2];
  ASSERT_EQ(golden["kind"], "gptj_create_sinusoidal_positions");
  EXPECT_LE(MaxAbsDiff(FlattenDoubles(j["data"]), FlattenDoubles(golden["table"])), 1e-6);
  EXPECT_EQ(j["data"][3][8].get<double>(), static_cast<double>(static_cast<float>(std::cos(3.0))));
}

TEST(TableSinusoidalCli, PositionIdsAndOffset) {
  const nlohmann::json ids = Json(RunCli("table sinusoidal --dim 4 --position-ids 7,0,16777215"));
  EXPECT_EQ(ids["shape"], nlohmann::json({3, 4}));
  EXPECT_EQ(ids["data"][0][0].get<double>(),
            static_cast<double>(static_cast<float>(std::sin(7.0))));
  EXPECT_EQ(ids["data"][1][1].get<double>(), 1.0);
  EXPECT_EQ(ids["data"][2][0].get<double>(),
            static_cast<double>(static_cast<float>(std::sin(16777215.0))));
  const nlohmann::json off = Json(RunCli("table sinusoidal --dim 4 --positions 2 --offset 7"));
  EXPECT_EQ(off["data"][0], ids["data"][0]);
  const nlohmann::json range = Json(RunCli("table sinusoidal --dim 4 --position-ids 7:9"));
  EXPECT_EQ(range["data"], off["data"]);
}

TEST(TableSinusoidalCli, BaseChangesFrequencies) {
  const nlohmann::json j = Json(RunCli("table sinusoidal --dim 4 --position-ids 3 --base 100"));
  // Column 2 = sin(3 * 100^(-2/4)) = sin(0.3).
  EXPECT_EQ(j["data"][0][2].get<double>(), static_cast<double>(static_cast<float>(std::sin(0.3))));
}

TEST(TableSinusoidalCli, CsvHasHeaderAndPositions) {
  const CliResult r = RunCli("table sinusoidal --dim 3 --position-ids 1,4 --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "position,c0,c1,c2");
  EXPECT_EQ(lines[1].substr(0, 2), "1,");
  EXPECT_EQ(lines[2].substr(0, 2), "4,");
  std::istringstream row(lines[1]);
  std::string pos, c0;
  std::getline(row, pos, ',');
  std::getline(row, c0, ',');
  EXPECT_EQ(std::stod(c0), static_cast<double>(static_cast<float>(std::sin(1.0))));
}

TEST(TableSinusoidalCli, NpyToFileAndStdout) {
  const std::string path = TempDir("table_npy") + "/pe.npy";
  ASSERT_EQ(
      RunCli("table sinusoidal --dim 8 --positions 5 --format npy -o '" + path + "'").exit_code, 0);
  const NpyArray a = ReadNpy(path);
  EXPECT_EQ(a.dtype, DType::kFloat32);
  EXPECT_EQ(a.ShapeText(), "(5, 8)");
  const std::vector<float> v = a.ToFloat32();
  EXPECT_EQ(v[8], static_cast<float>(std::sin(1.0)));
  const CliResult r = RunCli("table sinusoidal --dim 8 --positions 5 --format npy");
  ASSERT_EQ(r.exit_code, 0);
  std::istringstream in(r.out);
  EXPECT_EQ(ReadNpy(in, "stdout").ToFloat32(), v);
}

TEST(TableSinusoidalCli, HelpDocumentsFormats) {
  const CliResult r = RunCli("table sinusoidal --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("position,c0,c1"), std::string::npos);
  EXPECT_NE(r.out.find("--layout"), std::string::npos);
}

TEST(TableSinusoidalCliErrors, DimZero) {
  ExpectOneLineError(RunCli("table sinusoidal --dim 0 --positions 2"), 2, "dim: got 0");
}
TEST(TableSinusoidalCliErrors, BadBase) {
  ExpectOneLineError(RunCli("table sinusoidal --dim 4 --positions 2 --base 1"), 2, "base: got 1");
}
TEST(TableSinusoidalCliErrors, BadLayout) {
  ExpectOneLineError(RunCli("table sinusoidal --dim 4 --positions 2 --layout zigzag"), 2,
                     "--layout: got zigzag");
}
TEST(TableSinusoidalCliErrors, BadFormat) {
  ExpectOneLineError(RunCli("table sinusoidal --dim 4 --positions 2 --format xml"), 2,
                     "--format: got xml");
}
TEST(TableSinusoidalCliErrors, NoPositions) {
  ExpectOneLineError(RunCli("table sinusoidal --dim 4"), 2, "--positions: got 0");
}
TEST(TableSinusoidalCliErrors, OffsetPast2To24) {
  ExpectOneLineError(RunCli("table sinusoidal --dim 4 --positions 2 --offset 16777215"), 2,
                     "offset: got 16777215");
}
TEST(TableSinusoidalCliErrors, NegativePositionId) {
  ExpectOneLineError(RunCli("table sinusoidal --dim 4 --position-ids 3,-1"), 2,
                     "positions[1]: got -1");
}
TEST(TableSinusoidalCliErrors, MalformedPositionIds) {
  ExpectOneLineError(RunCli("table sinusoidal --dim 4 --position-ids 3,x"), 2,
                     "--position-ids: got x");
}
TEST(TableSinusoidalCliErrors, TableTooLarge) {
  ExpectOneLineError(RunCli("table sinusoidal --dim 65536 --positions 16777216"), 2,
                     "--positions: got 16777216 rows x 65536 columns");
}
TEST(TableSinusoidalCliErrors, IdsAndCountTogether) {
  const CliResult r = RunCli("table sinusoidal --dim 4 --positions 2 --position-ids 1");
  EXPECT_GE(r.exit_code, 100);  // CLI11's excludes error
  EXPECT_NE(r.err.find("excludes"), std::string::npos) << r.err;
}
TEST(TableSinusoidalCliErrors, MissingDim) {
  const CliResult r = RunCli("table sinusoidal --positions 2");
  EXPECT_GE(r.exit_code, 100);
  EXPECT_NE(r.err.find("--dim"), std::string::npos) << r.err;
}
TEST(TableSinusoidalCliErrors, UnwritableOutput) {
  const std::string path = TempDir("table_nodir") + "/no/such/dir/x.json";
  ExpectOneLineError(RunCli("table sinusoidal --dim 4 --positions 2 -o '" + path + "'"), 4, path);
}

// --- learned ----------------------------------------------------------------------

TEST(TableLearnedCli, SeededTableMatchesTheLibrary) {
  const nlohmann::json j =
      Json(RunCli("table learned --max-positions 10 --dim 4 --seed 3 --positions 10"));
  EXPECT_EQ(j["shape"], nlohmann::json({10, 4}));
  const LearnedTable t = LearnedTable::RandomNormal({10, 4, 0.02, 3});
  for (int r = 0; r < 10; ++r) {
    for (int c = 0; c < 4; ++c)
      EXPECT_EQ(j["data"][r][c].get<double>(), static_cast<double>(t.At(r, c)));
  }
  const nlohmann::json again =
      Json(RunCli("table learned --max-positions 10 --dim 4 --seed 3 --position-ids 9,2"));
  EXPECT_EQ(again["data"][0], j["data"][9]);
  EXPECT_EQ(again["data"][1], j["data"][2]);
}

TEST(TableLearnedCli, DefaultsAreBertBase) {
  const nlohmann::json j = Json(RunCli("table learned --position-ids 511"));
  EXPECT_EQ(j["shape"], nlohmann::json({1, 768}));
}

TEST(TableLearnedCli, LoadsANpyTable) {
  const std::string path = TempDir("table_load") + "/wpe.npy";
  const LearnedTable t = LearnedTable::RandomNormal({6, 5, 0.02, 11});
  t.SaveNpy(path);
  const nlohmann::json j = Json(RunCli("table learned --load '" + path + "' --position-ids 5,0"));
  EXPECT_EQ(j["shape"], nlohmann::json({2, 5}));
  EXPECT_EQ(j["data"][0][4].get<double>(), static_cast<double>(t.At(5, 4)));
  EXPECT_EQ(j["data"][1][0].get<double>(), static_cast<double>(t.At(0, 0)));
}

TEST(TableLearnedCli, CsvFormat) {
  const CliResult r = RunCli("table learned --max-positions 4 --dim 2 --positions 4 --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], "position,c0,c1");
  EXPECT_EQ(lines[4].substr(0, 2), "3,");
}

TEST(TableLearnedCliErrors, PositionPastMaxPositions) {
  ExpectOneLineError(RunCli("table learned --max-positions 10 --dim 4 --position-ids 3,10"), 2,
                     "positions[1]: got 10, expected a position in [0, 9]");
}
TEST(TableLearnedCliErrors, RangePastMaxPositions) {
  ExpectOneLineError(RunCli("table learned --max-positions 512 --dim 4 --positions 513"), 2,
                     "max_positions = 512");
}
TEST(TableLearnedCliErrors, LoadMissingFile) {
  const std::string path = TempDir("table_missing") + "/none.npy";
  ExpectOneLineError(RunCli("table learned --load '" + path + "' --positions 1"), 4, path);
}
TEST(TableLearnedCliErrors, LoadWrongRank) {
  const std::string path = SourcePath("tests/golden/npy/f16_5.npy");
  ExpectOneLineError(RunCli("table learned --load '" + path + "' --positions 1"), 4, "rank-2");
}
TEST(TableLearnedCliErrors, LoadWithDim) {
  const CliResult r = RunCli("table learned --load x.npy --dim 4 --positions 1");
  EXPECT_GE(r.exit_code, 100);
  EXPECT_NE(r.err.find("excludes"), std::string::npos) << r.err;
}
TEST(TableLearnedCliErrors, BadStddev) {
  ExpectOneLineError(RunCli("table learned --stddev -1 --positions 1"), 2, "stddev: got -1");
}
TEST(TableLearnedCliErrors, ZeroMaxPositions) {
  ExpectOneLineError(RunCli("table learned --max-positions 0 --positions 1"), 2,
                     "max_positions: got 0");
}

}  // namespace
}  // namespace posenc::test
