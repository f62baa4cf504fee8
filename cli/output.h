// Output helpers shared by the subcommands: where to write, and in which
// format (JSON, CSV, .npy).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::cli {

enum class TableFormat { kJson, kCsv, kNpy };
TableFormat ParseTableFormat(std::string_view text);

class AtomicFile;

// An output stream: the file at `path` (written atomically: cli/atomic_file.h),
// or stdout when path is "" or "-". Throws posenc::IoError if the file cannot
// be created. Nothing appears at `path` until Close() succeeds; destroyed
// without Close() (an exception), a previous file at `path` stays untouched.
class Output {
 public:
  explicit Output(const std::string& path, bool binary = false);
  ~Output();
  std::ostream& stream();
  // Flushes and reports a write error as IoError; for a file, renames it
  // into place.
  void Close();

 private:
  std::string path_;
  std::unique_ptr<AtomicFile> file_;
};

// Largest list or range the position parsers expand (2^24 values: every
// position of the domain once).
inline constexpr std::int64_t kMaxListValues = std::int64_t{1} << 24;

// Parses "0,5,9" or "3:7" (half-open range) into integers; throws
// InvalidArgument naming `arg` for malformed text, integers outside int64,
// an empty range, or more than kMaxListValues values.
std::vector<std::int64_t> ParseIntList(std::string_view text, std::string_view arg);

// Relative positions for `posenc buckets`: "A:B" INCLUSIVE of B, or a comma
// list; every value in [-(2^24 - 1), 2^24 - 1] (the differences of two
// positions) and at most 2^20 + 1 of them. Throws InvalidArgument naming
// `arg` before expanding anything out of range.
std::vector<std::int64_t> ParseRelativeList(std::string_view text, std::string_view arg);

}  // namespace posenc::cli
