// NumPy .npy reading and writing. Format and supported subset:
// include/posenc/npy.h. The header parser is a small recursive-descent parser
// for the dict literal numpy writes ({'descr': '<f4', 'fortran_order': False,
// 'shape': (3, 4), }); it accepts either quote style, any whitespace, a
// trailing comma and Python 2 'L' suffixes, and rejects everything else with
// a message naming the file and what was wrong. Interop with numpy is checked
// against fixtures written by numpy 1.24 (tests/golden/npy/).
#include "posenc/npy.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <fstream>
#include <istream>
#include <limits>
#include <optional>
#include <ostream>
#include <string_view>

#include "posenc/error.h"

namespace posenc {

static_assert(
    std::endian::native == std::endian::little,
    "posenc's .npy I/O copies little-endian data as is; a big-endian host needs byte swaps");

namespace {

constexpr std::array<char, 6> kMagic = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
// Largest array the reader accepts (bytes): guards allocations driven by a
// corrupt shape.
constexpr std::int64_t kMaxDataBytes = std::int64_t{1} << 40;

[[noreturn]] void Fail(const std::string& name, const std::string& problem) {
  throw IoError(name + ": " + problem);
}

std::string Quoted(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('\'');
  out.append(s);
  out.push_back('\'');
  return out;
}

// Recursive-descent parser of the header dict.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  struct Header {
    std::string descr;
    bool fortran_order = false;
    std::vector<std::int64_t> shape;
  };

  Header Parse() {
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    SkipSpace();
    Expect('{');
    SkipSpace();
    while (Peek() != '}') {
      const std::string key = ParseString("a quoted key");
      SkipSpace();
      Expect(':');
      SkipSpace();
      if (key == "descr") {
        Require(!have_descr, key);
        h.descr = ParseString("a quoted dtype string for 'descr'");
        have_descr = true;
      } else if (key == "fortran_order") {
        Require(!have_order, key);
        h.fortran_order = ParseBool();
        have_order = true;
      } else if (key == "shape") {
        Require(!have_shape, key);
        h.shape = ParseShape();
        have_shape = true;
      } else {
        Error("unexpected key " + Quoted(key) +
              " (the header must hold exactly 'descr', 'fortran_order' and 'shape')");
      }
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        SkipSpace();
      } else if (Peek() != '}') {
        Error("expected ',' or '}'");
      }
    }
    ++pos_;  // '}'
    SkipSpace();
    if (pos_ != s_.size()) Error("unexpected text after the closing '}'");
    if (!have_descr || !have_order || !have_shape) {
      std::string missing;
      for (auto [have, key] : {std::pair{have_descr, "'descr'"},
                               {have_order, "'fortran_order'"},
                               {have_shape, "'shape'"}}) {
        if (!have) missing += (missing.empty() ? "" : ", ") + std::string(key);
      }
      Error("missing key(s) " + missing);
    }
    return h;
  }

 private:
  [[noreturn]] void Error(const std::string& what) const {
    // The header is quoted up to 200 characters (a v2.0 header may be 16 MiB).
    const std::string shown =
        s_.size() <= 200 ? std::string(s_) : std::string(s_.substr(0, 197)) + "...";
    Fail(name_, "malformed .npy header: " + what + " at character " + std::to_string(pos_) +
                    " of \"" + shown + "\"");
  }
  void Require(bool first, const std::string& key) const {
    if (!first) Error("duplicate key " + Quoted(key));
  }
  char Peek() const {
    if (pos_ >= s_.size()) Error("unexpected end of header");
    return s_[pos_];
  }
  void Expect(char c) {
    if (Peek() != c) Error(std::string("expected '") + c + "'");
    ++pos_;
  }
  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  std::string ParseString(const char* what) {
    const char q = Peek();
    if (q != '\'' && q != '"') Error(std::string("expected ") + what);
    const std::size_t end = s_.find(q, pos_ + 1);
    if (end == std::string_view::npos) Error("unterminated string");
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  bool ParseBool() {
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    Error("expected True or False for 'fortran_order'");
  }
  std::int64_t ParseDim() {
    std::int64_t v = 0;
    const std::size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (v > (std::numeric_limits<std::int64_t>::max() - 9) / 10) Error("shape size too large");
      v = v * 10 + (s_[pos_] - '0');
      ++pos_;
    }
    if (pos_ == start) Error("expected a non-negative integer in 'shape'");
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 long suffix
    return v;
  }
  std::vector<std::int64_t> ParseShape() {
    std::vector<std::int64_t> shape;
    Expect('(');
    SkipSpace();
    bool comma_after_last = false;
    while (Peek() != ')') {
      shape.push_back(ParseDim());
      SkipSpace();
      comma_after_last = false;
      if (Peek() == ',') {
        ++pos_;
        comma_after_last = true;
        SkipSpace();
      } else if (Peek() != ')') {
        Error("expected ',' or ')' in 'shape'");
      }
    }
    if (shape.size() == 1 && !comma_after_last) Error("a 1-tuple 'shape' needs a trailing comma");
    ++pos_;  // ')'
    return shape;
  }

  std::string_view s_;
  const std::string& name_;
  std::size_t pos_ = 0;
};

DType DTypeOfDescr(const std::string& descr, const std::string& name) {
  if (descr == "<f4") return DType::kFloat32;
  if (descr == "<f8") return DType::kFloat64;
  if (descr == "<f2") return DType::kFloat16;
  if (descr == ">f4" || descr == ">f8" || descr == ">f2") {
    Fail(name, "big-endian dtype " + Quoted(descr) +
                   " is not supported (expected little-endian '<f4', '<f8' or '<f2')");
  }
  Fail(name, "unsupported dtype " + Quoted(descr) +
                 " (expected '<f4' float32, '<f8' float64 or '<f2' float16)");
}

std::string DescrOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "<f4";
    case DType::kFloat64:
      return "<f8";
    case DType::kFloat16:
      return "<f2";
    case DType::kBFloat16:
      break;
  }
  throw InvalidArgument(ArgMessage("view.dtype", std::string(DTypeName(dtype)),
                                   "float32, float64 or float16 (.npy has no bfloat16)"));
}

std::string ShapeTuple(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

// Reads exactly n bytes or fails with `what`.
void ReadExact(std::istream& in, char* dst, std::size_t n, const std::string& name,
               const std::string& what) {
  in.read(dst, static_cast<std::streamsize>(n));
  if (static_cast<std::size_t>(in.gcount()) != n) {
    Fail(name, "truncated file: " + what + " (expected " + std::to_string(n) + " bytes, got " +
                   std::to_string(in.gcount()) + ")");
  }
}

}  // namespace

std::int64_t NpyArray::NumElements() const {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return n;
}

std::string NpyArray::ShapeText() const { return ShapeTuple(shape); }

void NpyArray::RequireRank(int expected_rank) const {
  if (rank() != expected_rank) {
    Fail(source, "expected a rank-" + std::to_string(expected_rank) + " array, got shape " +
                     ShapeText() + " (rank " + std::to_string(rank()) + ")");
  }
}

TensorView NpyArray::View() const {
  if (rank() < 1 || rank() > kMaxRank) {
    Fail(source, "shape " + ShapeText() + " has rank " + std::to_string(rank()) +
                     "; a tensor view needs rank 1.." + std::to_string(kMaxRank));
  }
  // Every size checked before any stride is formed: an empty array may
  // carry huge other sizes ((0, 2^62, 2^62) holds no byte), whose product
  // would overflow.
  for (const std::int64_t s : shape) {
    if (s < 1) Fail(source, "empty array of shape " + ShapeText());
  }
  TensorView v;
  v.data = const_cast<std::byte*>(bytes.data());
  v.dtype = dtype;
  v.rank = rank();
  std::int64_t stride = 1;
  for (int d = v.rank - 1; d >= 0; --d) {
    v.shape[static_cast<std::size_t>(d)] = shape[static_cast<std::size_t>(d)];
    v.strides[static_cast<std::size_t>(d)] = stride;
    stride *= shape[static_cast<std::size_t>(d)];
  }
  return v;
}

std::vector<float> NpyArray::ToFloat32() const {
  const std::int64_t n = NumElements();
  std::vector<float> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    out[static_cast<std::size_t>(i)] = static_cast<float>(LoadAsDouble(bytes.data(), dtype, i));
  }
  return out;
}

std::vector<double> NpyArray::ToFloat64() const {
  const std::int64_t n = NumElements();
  std::vector<double> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    out[static_cast<std::size_t>(i)] = LoadAsDouble(bytes.data(), dtype, i);
  return out;
}

NpyArray ReadNpy(std::istream& in, const std::string& name) {
  std::array<char, 8> pre{};
  ReadExact(in, pre.data(), pre.size(), name, "the 8-byte preamble is incomplete");
  if (!std::equal(kMagic.begin(), kMagic.end(), pre.begin())) {
    Fail(name, "not a .npy file (the magic string \\x93NUMPY is missing)");
  }
  const int major = static_cast<unsigned char>(pre[6]);
  const int minor = static_cast<unsigned char>(pre[7]);
  std::size_t header_len = 0;
  if (major == 1 && minor == 0) {
    std::array<unsigned char, 2> b{};
    ReadExact(in, reinterpret_cast<char*>(b.data()), 2, name, "the header length is incomplete");
    header_len = b[0] | (std::size_t{b[1]} << 8);
  } else if ((major == 2 || major == 3) && minor == 0) {
    std::array<unsigned char, 4> b{};
    ReadExact(in, reinterpret_cast<char*>(b.data()), 4, name, "the header length is incomplete");
    header_len =
        b[0] | (std::size_t{b[1]} << 8) | (std::size_t{b[2]} << 16) | (std::size_t{b[3]} << 24);
    if (header_len > (std::size_t{1} << 24)) {
      Fail(name, "header length " + std::to_string(header_len) + " is implausibly large");
    }
  } else {
    Fail(name, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                   " (expected 1.0, 2.0 or 3.0)");
  }
  std::string header(header_len, '\0');
  ReadExact(in, header.data(), header_len, name, "the header is incomplete");
  if (header.empty() || header.back() != '\n') {
    Fail(name, "malformed .npy header: it does not end with a newline");
  }
  const HeaderParser::Header h = HeaderParser(header, name).Parse();
  if (h.fortran_order) {
    Fail(name,
         "fortran_order True is not supported (save a C-order array, e.g. "
         "numpy.ascontiguousarray(a))");
  }
  NpyArray arr;
  arr.source = name;
  arr.dtype = DTypeOfDescr(h.descr, name);
  arr.shape = h.shape;
  const std::int64_t elem = static_cast<std::int64_t>(DTypeSize(arr.dtype));
  std::int64_t nbytes = elem;
  for (std::int64_t s : arr.shape) {
    if (s != 0 && nbytes > kMaxDataBytes / s) {
      Fail(name, "shape " + arr.ShapeText() + " is larger than the 2^40-byte limit");
    }
    nbytes *= s;
  }
  // Compare with what the stream holds before allocating (when it can tell).
  const std::streampos here = in.tellg();
  if (here != std::streampos(-1)) {
    in.seekg(0, std::ios::end);
    const std::streampos end = in.tellg();
    in.seekg(here);
    if (end != std::streampos(-1)) {
      const std::int64_t left = static_cast<std::int64_t>(end - here);
      if (left < nbytes) {
        Fail(name, "truncated file: shape " + arr.ShapeText() + " " +
                       std::string(DTypeName(arr.dtype)) + " needs " + std::to_string(nbytes) +
                       " data bytes, the file has " + std::to_string(left));
      }
      if (left > nbytes) {
        Fail(name, std::to_string(left - nbytes) + " unexpected trailing bytes after the " +
                       std::to_string(nbytes) + " data bytes of shape " + arr.ShapeText());
      }
    }
  }
  arr.bytes.resize(static_cast<std::size_t>(nbytes));
  ReadExact(in, reinterpret_cast<char*>(arr.bytes.data()), arr.bytes.size(), name,
            "the data of shape " + arr.ShapeText() + " is incomplete");
  return arr;
}

NpyArray ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(path, "cannot open for reading (missing file or no permission)");
  return ReadNpy(in, path);
}

void WriteNpy(std::ostream& out, const TensorView& view, const std::string& name) {
  ValidateView(view, "view");
  const std::string descr = DescrOf(view.dtype);
  std::vector<std::int64_t> shape(view.shape.begin(), view.shape.begin() + view.rank);
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + ShapeTuple(shape) + ", }";
  // Version 1.0: the header length is a uint16; a rank <= 6 header is far
  // below 65535 bytes. Pad so the data starts on a 64-byte boundary.
  const std::size_t prefix = 10;
  const std::size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::string head(kMagic.begin(), kMagic.end());
  head.push_back('\x01');
  head.push_back('\0');
  head.push_back(static_cast<char>(dict.size() & 0xff));
  head.push_back(static_cast<char>(dict.size() >> 8));
  out.write(head.data(), static_cast<std::streamsize>(head.size()));
  out.write(dict.data(), static_cast<std::streamsize>(dict.size()));

  // Data in C order, gathered through the strides row by row (last dim).
  const std::size_t elem = DTypeSize(view.dtype);
  const int r = view.rank;
  const std::int64_t inner = view.shape[static_cast<std::size_t>(r - 1)];
  const std::int64_t inner_stride = view.strides[static_cast<std::size_t>(r - 1)];
  std::vector<char> row(static_cast<std::size_t>(inner) * elem);
  std::array<std::int64_t, kMaxRank> idx{};
  const std::int64_t rows = view.NumElements() / inner;
  for (std::int64_t k = 0; k < rows && out; ++k) {
    std::int64_t base = 0;
    for (int d = 0; d < r - 1; ++d)
      base += idx[static_cast<std::size_t>(d)] * view.strides[static_cast<std::size_t>(d)];
    const char* src = static_cast<const char*>(view.data);
    for (std::int64_t c = 0; c < inner; ++c) {
      std::memcpy(row.data() + static_cast<std::size_t>(c) * elem,
                  src + static_cast<std::size_t>(base + c * inner_stride) * elem, elem);
    }
    out.write(row.data(), static_cast<std::streamsize>(row.size()));
    for (int d = r - 2; d >= 0; --d) {  // advance the multi-index
      if (++idx[static_cast<std::size_t>(d)] < view.shape[static_cast<std::size_t>(d)]) break;
      idx[static_cast<std::size_t>(d)] = 0;
    }
  }
  out.flush();
  if (!out) Fail(name, "write failed");
}

void WriteNpy(const std::string& path, const TensorView& view) {
  ValidateView(view, "view");
  DescrOf(view.dtype);  // reject bfloat16 before creating the file
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) Fail(path, "cannot open for writing");
  WriteNpy(out, view, path);
  out.close();
  if (!out) Fail(path, "write failed (disk full?)");
}

}  // namespace posenc
