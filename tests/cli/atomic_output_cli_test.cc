// Every file the CLI writes is replaced atomically (cli/atomic_file.h): a
// write that fails midway -- here a real one, the file-size limit of
// `ulimit -f` (EFBIG; posenc ignores SIGXFSZ) -- exits 4 with one line
// naming the file, leaves the previous file byte for byte and no temporary
// file; the report folder is swapped whole. Covers tables (json, csv, npy),
// `table rope`, the tour, plot pages and the report.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_util.h"
#include "test_util.h"

namespace posenc::test {
namespace {

namespace fs = std::filesystem;

// 4 blocks (2-4 KiB: dash counts 512-byte blocks): every output below is larger.
constexpr const char* kSmallFileLimit = "ulimit -f 4; ";

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int Temporaries(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp-") != std::string::npos || name.find(".old-") != std::string::npos) ++n;
  }
  return n;
}

void ExpectIoErrorKeepsPrevious(const CliResult& r, const fs::path& path,
                                const std::string& previous) {
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_NE(r.err.find(path.filename().string()), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  EXPECT_EQ(Slurp(path), previous);
  EXPECT_EQ(Temporaries(path.parent_path()), 0);
}

TEST(AtomicOutputCli, TableWriteFailureKeepsThePreviousFile) {
  const fs::path dir = TempDir("atomic_cli_table");
  for (const std::string format : {"json", "csv", "npy"}) {
    const fs::path path = dir / ("table." + format);
    std::ofstream(path) << "PREVIOUS " << format;
    const CliResult r =
        RunCliAfter(kSmallFileLimit, "table sinusoidal --dim 64 --positions 512 --format " +
                                         format + " -o '" + path.string() + "'");
    ExpectIoErrorKeepsPrevious(r, path, "PREVIOUS " + format);
  }
  const fs::path rope = dir / "rope.json";
  std::ofstream(rope) << "PREVIOUS rope";
  ExpectIoErrorKeepsPrevious(
      RunCliAfter(kSmallFileLimit,
                  "table rope --dim 64 --positions 512 -o '" + rope.string() + "'"),
      rope, "PREVIOUS rope");
}

TEST(AtomicOutputCli, SuccessReplacesTheFileWhole) {
  const fs::path dir = TempDir("atomic_cli_ok");
  const fs::path path = dir / "table.csv";
  std::ofstream(path) << "PREVIOUS";
  const CliResult r =
      RunCli("table sinusoidal --dim 4 --positions 3 --format csv -o '" + path.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Slurp(path).rfind("position,c0,c1,c2,c3\n0,", 0), 0u) << Slurp(path);
  EXPECT_EQ(Temporaries(dir), 0);
}

TEST(AtomicOutputCli, UnwritableTargetIsAnIoErrorAndWritesNothing) {
  const fs::path dir = TempDir("atomic_cli_unwritable");
  std::ofstream(dir / "plain") << "x";
  for (const fs::path& bad : {dir / "missing" / "t.json", dir / "plain" / "t.json"}) {
    const CliResult r = RunCli("table sinusoidal --dim 4 --positions 3 -o '" + bad.string() + "'");
    EXPECT_EQ(r.exit_code, 4) << r.err;
    EXPECT_NE(r.err.find(bad.string()), std::string::npos) << r.err;
  }
  // A device is written directly; /dev/full fails every write.
  const CliResult full = RunCli("table sinusoidal --dim 4 --positions 3 -o /dev/full");
  EXPECT_EQ(full.exit_code, 4) << full.err;
  EXPECT_EQ(Temporaries(dir), 0);
}

TEST(AtomicOutputCli, TourWriteFailureKeepsThePreviousFile) {
  const fs::path dir = TempDir("atomic_cli_tour");
  const fs::path path = dir / "tour.txt";
  std::ofstream(path) << "PREVIOUS tour";
  ExpectIoErrorKeepsPrevious(RunCliAfter(kSmallFileLimit, "tour --json -o '" + path.string() + "'"),
                             path, "PREVIOUS tour");
}

TEST(AtomicOutputCli, PlotWriteFailureKeepsThePreviousPage) {
  const fs::path dir = TempDir("atomic_cli_plot");
  const fs::path path = dir / "plot.html";
  std::ofstream(path) << "PREVIOUS page";
  ExpectIoErrorKeepsPrevious(
      RunCliAfter(kSmallFileLimit, "plot rope --dim 8 --positions 4 -o '" + path.string() + "'"),
      path, "PREVIOUS page");
}

TEST(AtomicOutputCli, ReportFolderIsSwappedWholeOrNotAtAll) {
  const fs::path root = TempDir("atomic_cli_report");
  const fs::path dir = root / "report";
  fs::create_directories(dir / "data");
  std::ofstream(dir / "index.html") << "PREVIOUS report";
  std::ofstream(dir / "data" / "old_figure.csv") << "1,2";
  // The page (megabytes) cannot be written under the limit: nothing changes.
  const CliResult failed = RunCliAfter(kSmallFileLimit, "report --quick -o '" + dir.string() + "'");
  EXPECT_EQ(failed.exit_code, 4) << failed.err;
  EXPECT_EQ(Slurp(dir / "index.html"), "PREVIOUS report");
  EXPECT_TRUE(fs::exists(dir / "data" / "old_figure.csv"));
  EXPECT_EQ(Temporaries(root), 0);
  // Without the limit the new report replaces the old one, stale data included.
  const CliResult ok = RunCli("report --quick -o '" + dir.string() + "'");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(Slurp(dir / "index.html").find("<html"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "data" / "old_figure.csv"));
  EXPECT_EQ(Temporaries(root), 0);
  // A folder holding files a report did not write is refused, untouched.
  std::ofstream(dir / "my_notes.txt") << "mine";
  const CliResult refused = RunCli("report --quick -o '" + dir.string() + "'");
  EXPECT_EQ(refused.exit_code, 4) << refused.err;
  EXPECT_NE(refused.err.find("my_notes.txt"), std::string::npos) << refused.err;
  EXPECT_EQ(Slurp(dir / "my_notes.txt"), "mine");
}

}  // namespace
}  // namespace posenc::test
