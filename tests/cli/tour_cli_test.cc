// `posenc tour`: runs, and its sections carry the computed numbers (the
// sinusoidal table, learned-table statistics, the rotation error, RoPE's norm
// and distance properties, the past-the-end error).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "test_util.h"

namespace posenc::test {
namespace {

const nlohmann::json& Section(const nlohmann::json& tour, const std::string& title_start) {
  for (const auto& s : tour["sections"]) {
    if (s["title"].get<std::string>().rfind(title_start, 0) == 0) return s;
  }
  ADD_FAILURE() << "no section starting with " << title_start;
  static const nlohmann::json empty = nlohmann::json::object();
  return empty;
}

TEST(TourCli, TextHasEverySectionAndTheirNumbers) {
  const CliResult r = RunCli("tour");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  for (const char* s : {"== 1. The sinusoidal table (10 positions x 16 dims) ==",
                        "== 2. A learned absolute table (10 positions x 768 dims) ==",
                        "== 3. Shifting a position is a fixed rotation", "== 4. RoPE keeps norms",
                        "== 5. Past the end of a learned table =="}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  }
  // Row 1 of the printed table starts with sin(1), cos(1).
  EXPECT_NE(r.out.find("    1  0.8415  0.5403  0.3110  0.9504"), std::string::npos);
  EXPECT_NE(r.out.find("shape [10, 768] float32"), std::string::npos);
  EXPECT_NE(r.out.find("max |PE(pos+k) - R_k PE(pos)| = "), std::string::npos);
  EXPECT_NE(r.out.find("positions[0]: got 10, expected a position in [0, 9]"), std::string::npos);
}

TEST(TourCli, JsonValues) {
  const CliResult r = RunCli("tour --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json tour = nlohmann::json::parse(r.out);
  ASSERT_GE(tour["sections"].size(), 5u);

  const auto& sin = Section(tour, "The sinusoidal table")["values"];
  EXPECT_EQ(sin["shape"], nlohmann::json({10, 16}));
  EXPECT_EQ(sin["pe_1_0"].get<double>(), static_cast<double>(static_cast<float>(std::sin(1.0))));
  EXPECT_LE(sin["row_norm_max_deviation"].get<double>(), 1e-6);
  EXPECT_EQ(sin["table"].size(), 160u);

  const auto& learned = Section(tour, "A learned absolute table")["values"];
  EXPECT_EQ(learned["shape"], nlohmann::json({10, 768}));
  EXPECT_NEAR(learned["stddev"].get<double>(), 0.02, 0.001);
  EXPECT_LE(std::fabs(learned["mean"].get<double>()), 0.002);
  EXPECT_LE(std::fabs(learned["cosine_rows_0_1"].get<double>()), 0.2);
  EXPECT_GE(learned["sinusoidal_cosine_rows_0_1"].get<double>(), 0.9);

  const auto& rot = Section(tour, "Shifting a position is a fixed rotation")["values"];
  EXPECT_LE(rot["max_rotation_error_float64"].get<double>(), 1e-12);
  EXPECT_LE(rot["max_rotation_error_float32"].get<double>(), 1e-6);

  const auto& rope = Section(tour, "RoPE keeps norms")["values"];
  EXPECT_LE(rope["max_relative_norm_change"].get<double>(), 1e-6);
  EXPECT_LE(rope["score_spread_distance_5"].get<double>(), 1e-5);
  const double s5 = rope["scores_distance_5"][0].get<double>();
  EXPECT_GE(std::fabs(rope["score_distance_6"].get<double>() - s5), 0.1);

  const auto& end = Section(tour, "Past the end")["values"];
  EXPECT_NE(end["error"].get<std::string>().find("max_positions = 10"), std::string::npos);
}

TEST(TourCli, WritesToAFileAndHasHelp) {
  const std::string path = TempDir("tour_out") + "/tour.txt";
  ASSERT_EQ(RunCli("tour -o '" + path + "'").exit_code, 0);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("== 3. Shifting a position"), std::string::npos);
  const CliResult help = RunCli("tour --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--json"), std::string::npos);
}

}  // namespace
}  // namespace posenc::test
