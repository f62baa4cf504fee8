#include "output.h"

#include <charconv>
#include <fstream>
#include <iostream>
#include <string>

#include "posenc/error.h"

namespace posenc::cli {

TableFormat ParseTableFormat(std::string_view text) {
  if (text == "json") return TableFormat::kJson;
  if (text == "csv") return TableFormat::kCsv;
  if (text == "npy") return TableFormat::kNpy;
  throw InvalidArgument(ArgMessage("--format", std::string(text), "one of json, csv, npy"));
}

Output::Output(const std::string& path, bool binary) : path_(path) {
  if (path.empty() || path == "-") return;
  auto mode = std::ios::out | std::ios::trunc;
  if (binary) mode |= std::ios::binary;
  auto file = std::make_unique<std::ofstream>(path, mode);
  if (!*file) throw IoError("-o: cannot open '" + path + "' for writing");
  file_ = std::move(file);
}

Output::~Output() = default;

std::ostream& Output::stream() { return file_ ? *file_ : std::cout; }

void Output::Close() {
  stream().flush();
  if (!stream()) {
    throw IoError("-o: write to '" + (path_.empty() ? std::string("stdout") : path_) +
                  "' failed");
  }
}

namespace {
std::int64_t ParseInt(std::string_view s, std::string_view arg) {
  std::int64_t v = 0;
  const auto* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || p != end || s.empty()) {
    throw InvalidArgument(ArgMessage(arg, std::string(s), "an integer"));
  }
  return v;
}
}  // namespace

std::vector<std::int64_t> ParseIntList(std::string_view text, std::string_view arg) {
  std::vector<std::int64_t> out;
  if (const auto colon = text.find(':'); colon != std::string_view::npos) {
    const std::int64_t a = ParseInt(text.substr(0, colon), arg);
    const std::int64_t b = ParseInt(text.substr(colon + 1), arg);
    Require(b > a && b - a <= (std::int64_t{1} << 26), arg, std::string(text),
            "a range A:B with A < B (B exclusive) and at most 2^26 values");
    for (std::int64_t v = a; v < b; ++v) out.push_back(v);
    return out;
  }
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::size_t stop = comma == std::string_view::npos ? text.size() : comma;
    out.push_back(ParseInt(text.substr(start, stop - start), arg));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace posenc::cli
