// Limits as errors (docs/RELIABILITY.md): hostile inputs that once ended
// posenc by a signal, ran without end or surfaced as `internal error`, each
// now refused up front with one line naming the argument and the limit.
// One test per class; the inputs are the ones found by reading the code and
// by the fuzz targets in fuzz/.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"
#include "test_util.h"

namespace posenc::test {
namespace {

namespace fs = std::filesystem;

// Exit `code`, one line on stderr containing `fragment`, nothing on stdout.
void ExpectRefused(const CliResult& r, int code, const std::string& fragment) {
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out.substr(0, 200);
}

// `timeout` turns a hang into exit 124 instead of a stuck test.
CliResult RunBounded(const std::string& args) { return RunCliAfter("timeout 60 ", args); }

std::string WriteConfig(const std::string& name, const std::string& text) {
  const fs::path path = fs::path(TempDir("limits_" + name)) / "config.json";
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

// Was: a stack overflow (signal 11) printing the nested value in the error.
TEST(LimitsCli, DeeplyNestedConfigIsAConfigError) {
  const int n = 200000;
  const std::string text = std::string(n, '[') + std::string(n, ']');
  ExpectRefused(RunBounded("inspect '" + WriteConfig("deep", text) + "'"), 3,
                "JSON nesting deeper than 64 levels");
  const std::string in_object =
      "{\"head_dim\": 64, \"x\": " + std::string(100, '[') + std::string(100, ']') + "}";
  ExpectRefused(RunBounded("inspect '" + WriteConfig("deep_obj", in_object) + "'"), 3,
                "nesting deeper than 64");
}

// Was: `internal error` (nlohmann out_of_range 406), exit 1.
TEST(LimitsCli, NumberBeyondDoubleInConfigIsAConfigError) {
  for (const std::string value : {"1e400", "-1e400"}) {
    ExpectRefused(
        RunBounded("inspect '" +
                   WriteConfig("overflow", "{\"head_dim\": 64, \"rope_theta\": " + value + "}") +
                   "'"),
        3, "does not fit in a double");
  }
  // Integers past int64 are read as doubles and refused by the key's check.
  ExpectRefused(RunBounded("inspect '" +
                           WriteConfig("bigint", "{\"head_dim\": 99999999999999999999999}") + "'"),
                3, "head_dim");
}

// Was: `internal error` (nlohmann type_error 316) for invalid UTF-8 in JSON output.
TEST(LimitsCli, InvalidUtf8InArgumentsStillGivesJson) {
  // /bin/sh (dash) has no $'...': printf builds the byte 0xff.
  const CliResult r = RunCliAfter("",
                                  "demo permutation --json --first \"$(printf '\\377 bites man')\" "
                                  "--second \"$(printf 'man bites \\377')\"");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NO_THROW(EXPECT_FALSE(nlohmann::json::parse(r.out).is_discarded()));
  EXPECT_NE(r.out.find("\xef\xbf\xbd"), std::string::npos);  // U+FFFD
  const fs::path dir = TempDir("limits_utf8");
  const fs::path odd = dir / "l\xff.json";
  fs::copy_file(SourcePath("examples/configs/llama-3.1-8b.json"), odd);
  const CliResult inspect = RunBounded("inspect --json '" + odd.string() + "'");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NO_THROW(EXPECT_FALSE(nlohmann::json::parse(inspect.out).is_discarded()));
}

// Was: a loop of 2^64 iterations (B - A overflowed int64 and passed the size check).
TEST(LimitsCli, RangesWhoseWidthOverflowsAreRefusedAtOnce) {
  ExpectRefused(RunBounded("buckets t5 --relative=-9223372036854775807:9223372036854775807"), 2,
                "--relative: got -9223372036854775807, expected relative positions in");
  ExpectRefused(RunBounded("buckets deberta --relative=-16777216:0"), 2, "--relative");
  ExpectRefused(RunBounded("buckets t5 --relative=-1048576:1048576"), 2, "at most 2^20 values");
  ExpectRefused(RunBounded("table sinusoidal --dim 4 "
                           "--position-ids=-9223372036854775807:9223372036854775807"),
                2, "--position-ids");
  ExpectRefused(RunBounded("table rope --dim 4 --position-ids=-9223372036854775808:1"), 2,
                "at most 2^24 values");
  ExpectRefused(RunBounded("table sinusoidal --dim 4 --position-ids 99999999999999999999"), 2,
                "an integer in the int64 range");
}

// Was: signed overflow in offset + row (UB) for an offset near 2^63.
TEST(LimitsCli, OffsetsOutsideThePositionDomain) {
  ExpectRefused(RunBounded("table sinusoidal --dim 4 --positions 2 --offset 9223372036854775807"),
                2, "--offset: got 9223372036854775807");
  ExpectRefused(RunBounded("table learned --dim 4 --positions 2 --offset -1"), 2, "--offset");
}

// Was: rows * dim formed before the check (signed overflow) in the message.
TEST(LimitsCli, TableSizeProductsAreCheckedWithoutOverflow) {
  ExpectRefused(RunBounded("table learned --max-positions 4 --dim 4611686018427387904 "
                           "--position-ids 0,1,2"),
                2, "dim");
  ExpectRefused(RunBounded("table sinusoidal --dim 1048576 --positions 16777216"), 2,
                "at most 2^28 values");
  ExpectRefused(RunBounded("alibi --heads 65536 --length 4096"), 2, "heads*length^2 <= 2^22");
}

// Was: `plot` computed and wrote the whole table (up to 2^28 values, gigabytes
// of CSV: 87 s in release for sinusoidal --dim 16 --positions 2^24) before it
// refused more than 2^22 cells (found by fuzz_cli, 2026-12-03). Now the table
// command checks the plot's limit before it computes anything.
TEST(LimitsCli, PlotRefusesATableTooLargeToDrawBeforeComputingIt) {
  const fs::path page = fs::path(TempDir("limits_plot")) / "p.html";
  const auto plot = [&](const std::string& args) {
    // 20 s: the refusal is immediate; computing the table took minutes under the sanitizers.
    return RunCliAfter("timeout 20 ", "plot " + args + " -o '" + page.string() + "'");
  };
  ExpectRefused(plot("sinusoidal --dim 16 --positions 16777216"), 2,
                "--positions: got 16777216 rows x 16 columns, expected at most 2^22 values");
  ExpectRefused(plot("rope --dim 2 --positions 8000006"), 2,
                "--positions: got 8000006 rows x 4 columns");  // cos and sin columns
  ExpectRefused(plot("rope --dim 64 --position-ids 0:40000"), 2,
                "--position-ids: got 40000 rows x 128 columns");
  ExpectRefused(plot("learned --max-positions 4194304 --dim 2 --positions 4194304"), 2,
                "--positions: got 4194304 rows x 2 columns");
  EXPECT_FALSE(fs::exists(page));
  // The largest table it draws is still drawn, and `table` keeps its own, larger limit.
  // (RunBounded's 60 s: drawing 2^22 cells takes seconds under the sanitizers.)
  const CliResult ok =
      RunBounded("plot sinusoidal --dim 2048 --positions 2048 -o '" + page.string() + "'");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(fs::exists(page));
  const fs::path npy = fs::path(TempDir("limits_plot")) / "t.npy";
  const CliResult table =
      RunBounded("table sinusoidal --dim 16 --positions 300000 --format npy -o '" + npy.string() +
                 "'");  // 4.8 M values: more than a plot
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(fs::file_size(npy), 128 + 300000 * 16 * 4);
}

// Was: a float32 table of inf written as JSON (invalid) for a huge stddev.
TEST(LimitsCli, LearnedStddevMustFitFloat32) {
  ExpectRefused(RunBounded("table learned --dim 4 --positions 2 --stddev 1e300"), 2,
                "stddev: got 1.0000000000000001e+300");
}

}  // namespace
}  // namespace posenc::test
