// libFuzzer target: the whole `posenc` command line, in-process
// (cli/app.h RunPosenc). The input is the argument list, one argument per
// line ('\n'-separated), without the program name. Output goes to a null
// sink; the run happens in a private temporary folder holding copies of the
// example configs and the golden .npy files (pass them by bare name, e.g.
// `--config llama-3.1-8b.json`), and every file a command writes there is
// removed after the run.
// Property: no argument list makes posenc crash, trip a sanitizer, hang,
// exhaust memory, or exit with 1 ("internal error"); every refusal is a
// parse error (CLI11's codes) or exit 2/3/4.
// Not run: `bench` (timing loops, a Python subprocess), `experiment` (execs
// Python to train models), `report` (seconds per run) and `playground`
// (megabytes read and written per run); their arguments are covered by
// tests/cli. A '/' in an argument
// becomes '_' so that nothing is written outside the folder.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "app.h"
#include "commands.h"
#include "fuzz_util.h"

namespace {

namespace fs = std::filesystem;

class NullBuffer : public std::streambuf {
 protected:
  int_type overflow(int_type c) override { return traits_type::not_eof(c); }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

struct Seeded {
  std::string bytes;
  fs::file_time_type mtime;
};

fs::path g_dir;
std::map<std::string, Seeded> g_seeded;  // file name -> contents

void CopyInto(const fs::path& from_dir, const std::string& ext) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(from_dir, ec)) {
    if (e.path().extension() != ext) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string name = e.path().filename().string();
    std::ofstream(g_dir / name, std::ios::binary) << ss.str();
    g_seeded[name] = Seeded{ss.str(), fs::last_write_time(g_dir / name)};
  }
}

// Removes what a run wrote and restores any seeded file it replaced.
void ResetFolder() {
  std::error_code ec;
  std::vector<fs::path> extra;
  for (const auto& e : fs::directory_iterator(g_dir, ec)) {
    const std::string name = e.path().filename().string();
    auto it = g_seeded.find(name);
    if (it == g_seeded.end()) {
      extra.push_back(e.path());
    } else if (fs::last_write_time(e.path(), ec) != it->second.mtime || !e.is_regular_file()) {
      fs::remove_all(e.path(), ec);
      std::ofstream(e.path(), std::ios::binary) << it->second.bytes;
      it->second.mtime = fs::last_write_time(e.path(), ec);
    }
  }
  for (const auto& p : extra) fs::remove_all(p, ec);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char templ[] = "/tmp/posenc-fuzz-cli-XXXXXX";
  FUZZ_CHECK(::mkdtemp(templ) != nullptr, "mkdtemp");
  g_dir = templ;
  CopyInto(fs::path(POSENC_SOURCE_DIR) / "examples" / "configs", ".json");
  CopyInto(fs::path(POSENC_SOURCE_DIR) / "tests" / "golden" / "npy", ".npy");
  FUZZ_CHECK(::chdir(templ) == 0, "chdir");
  // The folder goes when the fuzzer exits normally.
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(g_dir, ec);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args = {"posenc"};
  std::string cur;
  for (std::size_t i = 0; i <= size; ++i) {
    if (i == size || data[i] == '\n') {
      args.push_back(cur);
      cur.clear();
      if (args.size() > 40) return -1;
      continue;
    }
    const char c = static_cast<char>(data[i]);
    cur += c == '/' || c == '\0' ? '_' : c;
  }
  for (const std::string& a : args) {
    if (a == "bench" || a == "report" || a == "experiment" || a == "playground") return -1;
  }
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  NullBuffer null_buf;
  std::ostream null_out(&null_buf);
  const int rc =
      posenc::cli::RunPosenc(static_cast<int>(argv.size()), argv.data(), null_out, null_out);
  ResetFolder();
  FUZZ_CHECK(rc != posenc::cli::kExitInternal, "posenc exited with `internal error`");
  return 0;
}
