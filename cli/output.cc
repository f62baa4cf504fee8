#include "output.h"

#include <charconv>
#include <iostream>
#include <string>

#include "atomic_file.h"
#include "posenc/error.h"
#include "posenc/positions.h"

namespace posenc::cli {

TableFormat ParseTableFormat(std::string_view text) {
  if (text == "json") return TableFormat::kJson;
  if (text == "csv") return TableFormat::kCsv;
  if (text == "npy") return TableFormat::kNpy;
  throw InvalidArgument(ArgMessage("--format", std::string(text), "one of json, csv, npy"));
}

Output::Output(const std::string& path, bool binary) : path_(path) {
  if (path.empty() || path == "-") return;
  file_ = std::make_unique<AtomicFile>(path, "-o", binary ? FileMode::kBinary : FileMode::kText);
}

Output::~Output() = default;

std::ostream& Output::stream() { return file_ ? file_->stream() : std::cout; }

void Output::Close() {
  if (file_) {
    file_->Commit();
    return;
  }
  std::cout.flush();
  if (!std::cout) throw IoError("-o: write to 'stdout' failed");
}

namespace {

// Text shown in messages: long arguments are cut (a fuzzer's 100 kB list
// would otherwise be echoed whole).
std::string Shown(std::string_view s) {
  constexpr std::size_t kMax = 80;
  if (s.size() <= kMax) return std::string(s);
  return std::string(s.substr(0, kMax - 3)) + "...";
}

std::int64_t ParseInt(std::string_view s, std::string_view whole, std::string_view arg,
                      std::string_view expected) {
  std::int64_t v = 0;
  const auto* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || p != end || s.empty()) {
    const std::string got = Shown(s.size() == whole.size() ? whole : s);
    const std::string why = ec == std::errc::result_out_of_range ? "an integer in the int64 range"
                                                                 : std::string(expected);
    throw InvalidArgument(ArgMessage(arg, got, why));
  }
  return v;
}

// A comma list "0,5,-9" (at most kMaxListValues values).
std::vector<std::int64_t> ParseCommaList(std::string_view text, std::string_view arg,
                                         std::string_view expected) {
  std::vector<std::int64_t> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::size_t stop = comma == std::string_view::npos ? text.size() : comma;
    Require(static_cast<std::int64_t>(out.size()) < kMaxListValues, arg, Shown(text),
            "at most 2^24 values");
    out.push_back(ParseInt(text.substr(start, stop - start), text, arg, expected));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<std::int64_t> ParseIntList(std::string_view text, std::string_view arg) {
  if (const auto colon = text.find(':'); colon != std::string_view::npos) {
    const std::int64_t a = ParseInt(text.substr(0, colon), text, arg, "an integer");
    const std::int64_t b = ParseInt(text.substr(colon + 1), text, arg, "an integer");
    // b - a in unsigned arithmetic: exact for a < b, never a signed overflow.
    Require(a < b && static_cast<std::uint64_t>(b) - static_cast<std::uint64_t>(a) <=
                         static_cast<std::uint64_t>(kMaxListValues),
            arg, Shown(text), "a range A:B with A < B (B exclusive) and at most 2^24 values");
    std::vector<std::int64_t> out;
    out.reserve(static_cast<std::size_t>(b - a));
    for (std::int64_t v = a; v < b; ++v) out.push_back(v);
    return out;
  }
  return ParseCommaList(text, arg, "an integer");
}

std::vector<std::int64_t> ParseRelativeList(std::string_view text, std::string_view arg) {
  constexpr std::string_view kExpected = "A:B with integers A <= B, or a comma list";
  const auto in_domain = [](std::int64_t v) { return v >= -kMaxPosition && v <= kMaxPosition; };
  constexpr const char* kDomain = "relative positions in [-(2^24-1), 2^24-1]";
  std::vector<std::int64_t> out;
  if (const auto colon = text.find(':'); colon != std::string_view::npos) {
    const std::int64_t a = ParseInt(text.substr(0, colon), text, arg, kExpected);
    const std::int64_t b = ParseInt(text.substr(colon + 1), text, arg, kExpected);
    Require(in_domain(a), arg, a, kDomain);
    Require(in_domain(b), arg, b, kDomain);
    Require(a <= b && b - a < (std::int64_t{1} << 20), arg, Shown(text),
            "a range A:B with A <= B (both inclusive) and at most 2^20 values");
    out.reserve(static_cast<std::size_t>(b - a + 1));
    for (std::int64_t v = a; v <= b; ++v) out.push_back(v);
    return out;
  }
  out = ParseCommaList(text, arg, kExpected);
  for (const std::int64_t v : out) Require(in_domain(v), arg, v, kDomain);
  return out;
}

}  // namespace posenc::cli
