// `posenc experiment extrapolation` through the executable (it execs
// /usr/bin/python3 -m posenc.experiments.extrapolation with this build's
// Python package): --help, every bad input as one line and exit code 2 (4
// for I/O), and a tiny run (a few steps, two schemes, a few KB of text) whose
// results.json then feeds `posenc report --experiment` and `posenc tour
// --experiment`. The experiment's own tests: python/tests/test_extrapolation.py.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

// A folder of 20 documents of English-like text (~8 KB), deterministic.
std::string TinyCorpus(const std::string& name) {
  const fs::path dir = fs::path(TempDir(name)) / "corpus";
  fs::create_directories(dir);
  const char* words[] = {"the", "of",   "and", "to",   "in",   "a",     "is",   "that",
                         "for", "it",   "was", "with", "be",   "by",    "on",   "not",
                         "he",  "this", "are", "or",   "his",  "from",  "at",   "which",
                         "but", "have", "an",  "they", "time", "state", "work", "people"};
  std::uint32_t x = 12345;
  for (int d = 0; d < 20; ++d) {
    std::ofstream f(dir / ("doc" + std::to_string(100 + d) + ".txt"));
    for (int w = 0; w < 80; ++w) {
      x = x * 1664525u + 1013904223u;
      f << words[(x >> 16) % 32] << ((w % 9 == 8) ? ". " : " ");
    }
    f << "\n";
  }
  return dir.string();
}

const std::string kTiny =
    " --train-length 16 --eval-lengths 16,32,64 --dim 32 --heads 2 --layers 1 --batch 8"
    " --steps 20 --threads 1 --eval-tokens 256 --val-tokens 256 --no-speed-check";

void ExpectOneLineError(const CliResult& r, int code, const std::string& needle) {
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_EQ(r.err.rfind("posenc experiment extrapolation: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST(ExperimentCli, HelpComesFromThePythonModule) {
  const auto r = RunCli("experiment extrapolation --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* opt : {"--train-length", "--eval-lengths", "--schemes", "--quick", "--corpus",
                          "--steps", "--seed", "--threads"}) {
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
  }
  const auto top = RunCli("experiment --help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.out.find("extrapolation"), std::string::npos);
}

TEST(ExperimentCli, BadInputIsOneLineWithItsExitCode) {
  const std::string corpus = TinyCorpus("experiment_cli_bad");
  const std::string out = TempDir("experiment_cli_bad_out") + "/out";
  const std::string base = "experiment extrapolation -o " + out + " --corpus " + corpus + kTiny;
  ExpectOneLineError(RunCli(base + " --steps 0"), 2, "--steps: got 0, expected an integer >= 1");
  ExpectOneLineError(RunCli(base + " --eval-lengths 8,32"), 2,
                     "--eval-lengths: got 8, expected lengths >= the train length 16");
  ExpectOneLineError(RunCli(base + " --schemes rope,bogus"), 2, "--schemes: got 'bogus'");
  const std::string empty = TempDir("experiment_cli_empty") + "/empty.txt";
  std::ofstream(empty).close();
  ExpectOneLineError(RunCli("experiment extrapolation -o " + out + " --corpus " + empty + kTiny), 2,
                     "is empty");
  ExpectOneLineError(
      RunCli("experiment extrapolation -o " + out + " --corpus /nonexistent/corpus" + kTiny), 4,
      "--corpus: cannot read '/nonexistent/corpus'");
}

TEST(ExperimentCli, TinyRunFeedsReportAndTour) {
  const std::string corpus = TinyCorpus("experiment_cli_run");
  const std::string out = TempDir("experiment_cli_run_out") + "/results";
  const auto r = RunCli("experiment extrapolation -o " + out + " --corpus " + corpus + kTiny +
                        " --schemes learned,rope,rope+pi");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << "no progress bar when stderr is a file";
  EXPECT_NE(r.err.find("training tokens/s"), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(Slurp(fs::path(out) / "results.json"));
  EXPECT_TRUE(j["config"]["complete"].get<bool>());
  EXPECT_EQ(j["schemes"].size(), 3u);
  const auto& learned = j["schemes"]["learned"]["eval"];
  EXPECT_TRUE(learned[0]["bits_per_byte"].is_number());
  EXPECT_TRUE(learned[1]["bits_per_byte"].is_null());
  EXPECT_NE(learned[1]["error"].get<std::string>().find("learned table"), std::string::npos);
  for (const char* f :
       {"bits_per_byte.csv", "loss_by_position.csv", "training_curves.csv", "summary.csv"}) {
    EXPECT_TRUE(fs::exists(fs::path(out) / f)) << f;
  }

  const std::string rep = TempDir("experiment_cli_report");
  const auto report = RunCli("report --quick -o " + rep + " --experiment " + out);
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string html = Slurp(fs::path(rep) / "index.html");
  EXPECT_NE(html.find("Train short, test long"), std::string::npos);
  EXPECT_NE(html.find("id=\"experiment\""), std::string::npos);
  for (const char* f :
       {"experiment_length", "experiment_position", "experiment_training", "experiment_table"}) {
    EXPECT_TRUE(fs::exists(fs::path(rep) / "data" / (std::string(f) + ".csv"))) << f;
  }
  const std::string table = Slurp(fs::path(rep) / "data" / "comparison.csv");
  EXPECT_NE(table.find("bits/byte at 4L ÷ at L"), std::string::npos);
  EXPECT_NE(table.find("not in this run"), std::string::npos) << table;  // e.g. ALiBi

  const auto tour = RunCli("tour --experiment " + out);
  ASSERT_EQ(tour.exit_code, 0) << tour.err;
  EXPECT_NE(tour.out.find("Train short, test long"), std::string::npos);
  EXPECT_NE(tour.out.find(out + "/results.json"), std::string::npos) << tour.out;
  EXPECT_NE(tour.out.find("rope+pi"), std::string::npos);

  const auto missing = RunCli("report --quick -o " + rep + " --experiment /nonexistent/dir");
  EXPECT_EQ(missing.exit_code, 4);
  EXPECT_NE(missing.err.find("--experiment: cannot read '/nonexistent/dir/results.json'"),
            std::string::npos)
      << missing.err;
}

// Without --experiment the report shows the committed run
// (docs/experiments/extrapolation): section 9 is never empty.
TEST(ExperimentCli, ReportWithoutExperimentUsesTheCommittedRun) {
  const std::string rep = TempDir("experiment_cli_noresults");
  const auto r = RunCli("report --quick -o " + rep);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = Slurp(fs::path(rep) / "index.html");
  EXPECT_NE(html.find("Results of the committed run"), std::string::npos);
  EXPECT_NE(html.find("--experiment DIR` replaces it"), std::string::npos);
  EXPECT_EQ(html.find("No results in this report"), std::string::npos);
}

}  // namespace
}  // namespace posenc::test
