// cli/atomic_file.h: whole files or nothing. A write that fails midway (an
// injected stream error, an exception before Commit), an unwritable target
// and a failed directory swap leave the previous file or folder exactly as it
// was and no temporary file behind; modes, symlinks and devices behave as an
// ordinary open would.
#include "atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "posenc/error.h"
#include "test_util.h"

namespace posenc::cli {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Put(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// Names in `dir` that look like our temporaries.
int Temporaries(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp-") != std::string::npos || name.find(".old-") != std::string::npos) ++n;
  }
  return n;
}

TEST(AtomicFile, WritesTheWholeFileAndLeavesNoTemporary) {
  const fs::path dir = test::TempDir("atomic_whole");
  const fs::path path = dir / "out.txt";
  Put(path, "old contents");
  {
    AtomicFile f(path.string(), "-o");
    f.stream() << "new contents";
    EXPECT_EQ(Slurp(path), "old contents");  // nothing visible before Commit
    EXPECT_TRUE(fs::exists(f.temp_path()));
    f.Commit();
  }
  EXPECT_EQ(Slurp(path), "new contents");
  EXPECT_EQ(Temporaries(dir), 0);
}

TEST(AtomicFile, InjectedWriteErrorKeepsThePreviousFile) {
  const fs::path dir = test::TempDir("atomic_inject");
  const fs::path path = dir / "table.csv";
  Put(path, "previous table\n");
  AtomicFile f(path.string(), "-o");
  f.stream() << "half a tab";
  f.stream().setstate(std::ios::badbit);  // the write fails midway (disk full, EIO)
  try {
    f.Commit();
    FAIL() << "Commit after a failed write must throw";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("table.csv"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("unchanged"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Slurp(path), "previous table\n");
  EXPECT_EQ(Temporaries(dir), 0);
}

TEST(AtomicFile, ExceptionBeforeCommitKeepsThePreviousFile) {
  const fs::path dir = test::TempDir("atomic_throw");
  const fs::path path = dir / "out.json";
  Put(path, "{}");
  try {
    AtomicFile f(path.string(), "-o");
    f.stream() << "{\"partial\": [1, 2";
    throw std::runtime_error("the command failed while writing");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(Slurp(path), "{}");
  EXPECT_EQ(Temporaries(dir), 0);
}

TEST(AtomicFile, NoNewFileWhenTheWriteFails) {
  const fs::path dir = test::TempDir("atomic_new");
  const fs::path path = dir / "fresh.npy";
  {
    AtomicFile f(path.string(), "-o", FileMode::kBinary);
    f.stream() << "x";
    f.stream().setstate(std::ios::failbit);
    EXPECT_THROW(f.Commit(), IoError);
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(Temporaries(dir), 0);
}

TEST(AtomicFile, UnwritableDirectoryIsAnIoErrorNamingThePath) {
  const fs::path dir = test::TempDir("atomic_unwritable");
  Put(dir / "plain_file", "x");
  for (const fs::path& bad : {dir / "missing" / "out.txt", dir / "plain_file" / "out.txt"}) {
    try {
      AtomicFile f(bad.string(), "-o");
      FAIL() << "expected an IoError for " << bad;
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(bad.string()), std::string::npos) << e.what();
    }
  }
  try {
    AtomicFile f(dir.string(), "-o");  // a directory is not a file
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Temporaries(dir), 0);
}

TEST(AtomicFile, ReplacedFileKeepsItsModeAndNewFilesFollowTheUmask) {
  const fs::path dir = test::TempDir("atomic_mode");
  const fs::path old_file = dir / "kept_mode";
  Put(old_file, "x");
  ::chmod(old_file.c_str(), 0640);
  WriteFileAtomically(old_file.string(), "y", "-o");
  struct stat st {};
  ASSERT_EQ(::stat(old_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  const mode_t old_mask = ::umask(027);
  WriteFileAtomically((dir / "new_file").string(), "z", "-o");
  ::umask(old_mask);
  ASSERT_EQ(::stat((dir / "new_file").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);  // 0666 & ~027
}

TEST(AtomicFile, SymlinkIsFollowedAndKept) {
  const fs::path dir = test::TempDir("atomic_link");
  fs::create_directories(dir / "real");
  Put(dir / "real" / "data.csv", "old");
  fs::create_symlink(fs::path("real") / "data.csv", dir / "link.csv");
  WriteFileAtomically((dir / "link.csv").string(), "new", "-o");
  EXPECT_TRUE(fs::is_symlink(dir / "link.csv"));
  EXPECT_EQ(Slurp(dir / "real" / "data.csv"), "new");
  EXPECT_EQ(Temporaries(dir / "real"), 0);
}

TEST(AtomicFile, DevicesAreWrittenDirectly) {
  AtomicFile f("/dev/null", "-o");
  EXPECT_EQ(f.temp_path(), "");
  f.stream() << "discarded";
  f.Commit();
}

TEST(AtomicDirectory, SwapReplacesThePreviousFolderWhole) {
  const fs::path root = test::TempDir("atomic_dir_swap");
  const fs::path dir = root / "report";
  fs::create_directories(dir / "data");
  Put(dir / "index.html", "old page");
  Put(dir / "data" / "stale.csv", "a figure the new report no longer has");
  {
    AtomicDirectory d(dir.string(), "-o", {"index.html", "data"});
    fs::create_directories(d.temp_dir() / "data");
    Put(d.temp_dir() / "index.html", "new page");
    Put(d.temp_dir() / "data" / "fresh.csv", "1,2");
    EXPECT_EQ(Slurp(dir / "index.html"), "old page");  // untouched until Commit
    d.Commit();
  }
  EXPECT_EQ(Slurp(dir / "index.html"), "new page");
  EXPECT_TRUE(fs::exists(dir / "data" / "fresh.csv"));
  EXPECT_FALSE(fs::exists(dir / "data" / "stale.csv"));
  EXPECT_EQ(Temporaries(root), 0);
}

TEST(AtomicDirectory, FailureBeforeCommitKeepsThePreviousFolder) {
  const fs::path root = test::TempDir("atomic_dir_fail");
  const fs::path dir = root / "report";
  fs::create_directories(dir);
  Put(dir / "index.html", "old page");
  try {
    AtomicDirectory d(dir.string(), "-o", {"index.html", "data"});
    Put(d.temp_dir() / "index.html", "half a pa");
    throw IoError("a figure failed to write");
  } catch (const IoError&) {
  }
  EXPECT_EQ(Slurp(dir / "index.html"), "old page");
  EXPECT_EQ(Temporaries(root), 0);
}

TEST(AtomicDirectory, NewFolderAndRefusalOfForeignFiles) {
  const fs::path root = test::TempDir("atomic_dir_new");
  {
    AtomicDirectory d((root / "a" / "b" / "report/").string(), "-o", {"index.html"});
    Put(d.temp_dir() / "index.html", "page");
    d.Commit();
  }
  EXPECT_EQ(Slurp(root / "a" / "b" / "report" / "index.html"), "page");
  Put(root / "a" / "b" / "report" / "notes.txt", "mine");
  try {
    AtomicDirectory d((root / "a" / "b" / "report").string(), "-o", {"index.html"});
    FAIL() << "a folder with foreign files must not be replaced";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("notes.txt"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Slurp(root / "a" / "b" / "report" / "notes.txt"), "mine");
  EXPECT_EQ(Temporaries(root / "a" / "b"), 0);
}

}  // namespace
}  // namespace posenc::cli
