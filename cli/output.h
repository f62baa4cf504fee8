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

// An output stream: the file at `path`, or stdout when path is "" or "-".
// Throws posenc::IoError if the file cannot be opened.
class Output {
 public:
  explicit Output(const std::string& path, bool binary = false);
  ~Output();
  std::ostream& stream();
  // Flushes and reports a write error as IoError.
  void Close();

 private:
  std::string path_;
  std::unique_ptr<std::ostream> file_;
};

// Parses "0,5,9" or "3:7" (half-open range) into integers; throws
// InvalidArgument naming `arg`.
std::vector<std::int64_t> ParseIntList(std::string_view text, std::string_view arg);

}  // namespace posenc::cli
