// GGUF reader: header, metadata and tensor directory of llama.cpp model files (the public
// contract is include/posenc/gguf.h). Format: ggml docs/gguf.md
// (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md; ggml's reader is src/gguf.cpp), all
// little-endian; the layout is summarised above Parse, the limits above each reader.
// Hand-written because no Debian-packaged library reads GGUF (ggml's own gguf.cpp is not packaged
// for Debian 12). Design: corrupt or hostile files (the fuzzer feeds ParseGguf) give an IoError and
// never a huge allocation or an out-of-bounds read: every read is checked against the bytes left
// in the file first (Cursor), and no count or length sizes an allocation before it is checked.
#include "posenc/gguf.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <set>

#include "posenc/dtype.h"
#include "posenc/error.h"

namespace posenc {

static_assert(std::endian::native == std::endian::little,
              "posenc's GGUF reader copies little-endian values as is");

namespace {

constexpr std::uint64_t kMinKvBytes = 8 + 4 + 1;          // key length, type, 1-byte value
constexpr std::uint64_t kMinTensorBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset
constexpr std::uint64_t kMaxKeyBytes = 65535;             // the spec's limit on key length
constexpr std::uint32_t kMaxDims = 4;                     // GGML_MAX_DIMS
constexpr std::int64_t kMaxTensorValues = std::int64_t{1} << 24;

// Random access to the bytes of a file or of a buffer.
class Source {
 public:
  virtual ~Source() = default;
  virtual std::uint64_t size() const = 0;
  // Copies n bytes at `offset`; the caller has checked offset + n <= size().
  virtual void Read(std::uint64_t offset, void* dst, std::size_t n) = 0;
};

class SpanSource final : public Source {
 public:
  explicit SpanSource(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  std::uint64_t size() const override { return bytes_.size(); }
  void Read(std::uint64_t offset, void* dst, std::size_t n) override {
    if (n != 0) std::memcpy(dst, bytes_.data() + offset, n);
  }

 private:
  std::span<const std::uint8_t> bytes_;
};

// A file read through a window of kWindow bytes (reads that do not fit go
// straight to the stream) that moves forward with the parser, so only the
// metadata is read, never the tensor data.
class FileSource final : public Source {
 public:
  explicit FileSource(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    if (!in_) throw IoError(path + ": cannot open for reading");
    in_.seekg(0, std::ios::end);
    const std::streamoff end = in_.tellg();
    if (end < 0) throw IoError(path + ": cannot determine the file size");
    size_ = static_cast<std::uint64_t>(end);
  }
  std::uint64_t size() const override { return size_; }
  void Read(std::uint64_t offset, void* dst, std::size_t n) override {
    if (offset >= window_offset_ && offset + n <= window_offset_ + window_.size()) {
      if (n != 0) std::memcpy(dst, window_.data() + (offset - window_offset_), n);
      return;
    }
    if (n > kWindow) {
      ReadAt(offset, dst, n);
      return;
    }
    window_offset_ = offset;
    window_.resize(static_cast<std::size_t>(std::min<std::uint64_t>(kWindow, size_ - offset)));
    ReadAt(offset, window_.data(), window_.size());
    if (n != 0) std::memcpy(dst, window_.data(), n);
  }

 private:
  static constexpr std::size_t kWindow = std::size_t{1} << 20;

  void ReadAt(std::uint64_t offset, void* dst, std::size_t n) {
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (!in_ || static_cast<std::size_t>(in_.gcount()) != n) {
      throw IoError(path_ + ": read of " + std::to_string(n) + " bytes at offset " +
                    std::to_string(offset) + " failed");
    }
  }

  std::string path_;
  std::ifstream in_;
  std::uint64_t size_ = 0;
  std::uint64_t window_offset_ = 0;
  std::vector<std::uint8_t> window_;
};

// Sequential reader with bounds checks; every failure names the field.
class Cursor {
 public:
  Cursor(Source& src, std::string name) : src_(src), name_(std::move(name)) {}

  std::uint64_t pos() const { return pos_; }
  std::uint64_t left() const { return src_.size() - pos_; }
  const std::string& name() const { return name_; }

  [[noreturn]] void Fail(const std::string& field, const std::string& got,
                         const std::string& expected) const {
    throw IoError(name_ + ": " + field + ": got " + got + ", expected " + expected);
  }

  void Need(std::uint64_t n, const std::string& field) const {
    if (n > left()) {
      Fail(field,
           "end of file after " + std::to_string(left()) + " of " + std::to_string(n) +
               " bytes at offset " + std::to_string(pos_),
           "a complete value (the file is " + std::to_string(src_.size()) + " bytes: truncated?)");
    }
  }

  template <typename T>
  T Scalar(const std::string& field) {
    Need(sizeof(T), field);
    T v;
    src_.Read(pos_, &v, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  void Skip(std::uint64_t n, const std::string& field) {
    Need(n, field);
    pos_ += n;
  }

  // A string's length is checked against the bytes left and against
  // max_bytes before it is allocated.
  std::string String(const std::string& field, std::uint64_t max_bytes) {
    const auto len = Scalar<std::uint64_t>(field + " length");
    if (len > left()) {
      Fail(field + " length", std::to_string(len) + " bytes at offset " + std::to_string(pos_ - 8),
           "at most " + std::to_string(left()) + " (the bytes left in the " +
               std::to_string(src_.size()) + "-byte file: truncated?)");
    }
    if (len > max_bytes) {
      Fail(field + " length", std::to_string(len) + " bytes",
           "at most " + std::to_string(max_bytes));
    }
    std::string s(static_cast<std::size_t>(len), '\0');
    src_.Read(pos_, s.data(), s.size());
    pos_ += len;
    return s;
  }

  // Skips a string (after checking its length) without allocating it.
  void SkipString(const std::string& field) {
    const auto len = Scalar<std::uint64_t>(field + " length");
    if (len > left()) {
      Fail(field + " length", std::to_string(len) + " bytes at offset " + std::to_string(pos_ - 8),
           "at most " + std::to_string(left()) + " (the bytes left in the file: truncated?)");
    }
    pos_ += len;
  }

 private:
  Source& src_;
  std::string name_;
  std::uint64_t pos_ = 0;
};

std::uint64_t ScalarSize(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kString:
      return 8;  // the length prefix: the least a string takes
    case GgufType::kArray:
      return 12;  // element type + count
  }
  return 1;
}

GgufType ReadType(Cursor& c, const std::string& field) {
  const auto raw = c.Scalar<std::uint32_t>(field);
  if (raw > static_cast<std::uint32_t>(GgufType::kFloat64)) {
    c.Fail(field, std::to_string(raw), "a GGUF value type in [0, 12] (u8 ... f64)");
  }
  return static_cast<GgufType>(raw);
}

std::string Hex(std::uint32_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) s += digits[(v >> shift) & 0xf];
  return s;
}

// One numeric or bool scalar as (number, integer).
void ReadNumber(Cursor& c, GgufType t, const std::string& field, double& number,
                std::int64_t& integer) {
  switch (t) {
    case GgufType::kUint8:
      integer = c.Scalar<std::uint8_t>(field);
      break;
    case GgufType::kInt8:
      integer = c.Scalar<std::int8_t>(field);
      break;
    case GgufType::kUint16:
      integer = c.Scalar<std::uint16_t>(field);
      break;
    case GgufType::kInt16:
      integer = c.Scalar<std::int16_t>(field);
      break;
    case GgufType::kUint32:
      integer = c.Scalar<std::uint32_t>(field);
      break;
    case GgufType::kInt32:
      integer = c.Scalar<std::int32_t>(field);
      break;
    case GgufType::kInt64:
      integer = c.Scalar<std::int64_t>(field);
      break;
    case GgufType::kUint64: {
      const auto u = c.Scalar<std::uint64_t>(field);
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        c.Fail(field, std::to_string(u), "a u64 value <= 2^63 - 1");
      }
      integer = static_cast<std::int64_t>(u);
      break;
    }
    case GgufType::kBool: {
      const auto b = c.Scalar<std::uint8_t>(field);
      if (b > 1) c.Fail(field, std::to_string(b), "a bool byte 0 or 1");
      integer = b;
      break;
    }
    case GgufType::kFloat32:
      number = c.Scalar<float>(field);
      return;
    case GgufType::kFloat64:
      number = c.Scalar<double>(field);
      return;
    default:
      c.Fail(field, std::string(GgufTypeName(t)), "a number");
  }
  number = static_cast<double>(integer);
}

// One value of `type`: a scalar, a string, or an array (arrays of arrays
// are not used by ggml and rejected here), whose count is checked against
// the bytes left divided by the element size (strings: 8) before any
// element is read.
GgufValue ReadValue(Cursor& c, GgufType type, const std::string& field) {
  GgufValue v;
  v.type = type;
  if (type == GgufType::kString) {
    v.text = c.String(field, kGgufMaxStringBytes);
    return v;
  }
  if (type != GgufType::kArray) {
    ReadNumber(c, type, field, v.number, v.integer);
    return v;
  }
  v.element_type = ReadType(c, field + " element type");
  if (v.element_type == GgufType::kArray) {
    c.Fail(field + " element type", "arr", "a scalar or string type (nested arrays are not GGUF)");
  }
  v.count = c.Scalar<std::uint64_t>(field + " count");
  const std::uint64_t min_size = ScalarSize(v.element_type);
  if (v.count > c.left() / min_size) {
    c.Fail(field + " count", std::to_string(v.count),
           "at most " + std::to_string(c.left() / min_size) + " (" +
               std::string(GgufTypeName(v.element_type)) + " elements that fit in the " +
               std::to_string(c.left()) + " bytes left in the file)");
  }
  const bool keep = v.count <= kGgufKeptArrayLength;
  for (std::uint64_t i = 0; i < v.count; ++i) {
    const std::string elem = field + "[" + std::to_string(i) + "]";
    if (v.element_type == GgufType::kString) {
      if (keep) {
        v.strings.push_back(c.String(elem, kGgufMaxStringBytes));
      } else {
        c.SkipString(elem);
      }
    } else if (keep) {
      double number = 0;
      std::int64_t integer = 0;
      ReadNumber(c, v.element_type, elem, number, integer);
      v.numbers.push_back(number);
    } else {
      c.Skip(min_size * (v.count - i), field + " elements");  // count was checked above
      break;
    }
  }
  return v;
}

// Reads the magic and the version of the header, which must be "GGUF" and 2 or 3; the version.
std::uint32_t ReadVersion(Cursor& c) {
  const auto magic = c.Scalar<std::uint32_t>("header.magic");
  if (magic != 0x46554747u) {  // "GGUF" read little-endian
    std::string text;
    for (int i = 0; i < 4; ++i) {
      const char ch = static_cast<char>((magic >> (8 * i)) & 0xff);
      text += (ch >= 0x20 && ch < 0x7f) ? ch : '.';
    }
    c.Fail("header.magic", Hex(magic) + " (\"" + text + "\")", "\"GGUF\" (a GGUF model file)");
  }
  const auto version = c.Scalar<std::uint32_t>("header.version");
  if (version != 2 && version != 3) {
    std::string note;
    if (version == 1) note = " (GGUF v1, with 32-bit counts, is not supported)";
    if (version == 0x02000000u || version == 0x03000000u) {
      note = " (a big-endian GGUF file: only little-endian files are supported)";
    }
    c.Fail("header.version", std::to_string(version) + note, "2 or 3");
  }
  return version;
}

// Reads n_kv metadata entries into f.metadata (keys non-empty and unique), taking
// general.alignment, a u32 power of two, into f.alignment; duplicate or empty keys, unknown value
// types and a bad general.alignment are errors, as in ggml.
void ReadKeyValues(Cursor& c, std::uint64_t n_kv, GgufFile& f) {
  std::set<std::string, std::less<>> keys;
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    const std::string at = "kv[" + std::to_string(i) + "]";
    GgufKeyValue kv;
    kv.key = c.String(at + ".key", kMaxKeyBytes);
    if (kv.key.empty()) c.Fail(at + ".key", "\"\"", "a non-empty key");
    if (!keys.insert(kv.key).second) c.Fail(at + ".key", "\"" + kv.key + "\" again", "unique keys");
    const std::string field = at + " '" + kv.key + "'";
    const GgufType type = ReadType(c, field + " type");
    kv.value = ReadValue(c, type, field);
    if (kv.key == "general.alignment") {
      const std::uint64_t a = static_cast<std::uint64_t>(kv.value.integer);
      if (type != GgufType::kUint32 || a == 0 || (a & (a - 1)) != 0) {
        c.Fail(field,
               type == GgufType::kUint32 ? std::to_string(a) : std::string(GgufTypeName(type)),
               "a u32 power of two");
      }
      f.alignment = a;
    }
    f.metadata.push_back(std::move(kv));
  }
}

// Reads the tensor info `at` (name unique among names, at most 4 dims >= 0 whose product fits
// in int64, offset a multiple of alignment; anything else is an error, as in ggml).
GgufTensorInfo ReadTensorInfo(Cursor& c, const std::string& at,
                              std::set<std::string, std::less<>>& names, std::uint64_t alignment) {
  GgufTensorInfo t;
  t.name = c.String(at + ".name", kMaxKeyBytes);
  if (!names.insert(t.name).second)
    c.Fail(at + ".name", "\"" + t.name + "\" again", "unique names");
  const std::string field = at + " '" + t.name + "'";
  const auto n_dims = c.Scalar<std::uint32_t>(field + " n_dims");
  if (n_dims > kMaxDims) c.Fail(field + " n_dims", std::to_string(n_dims), "at most 4");
  std::int64_t elements = 1;
  for (std::uint32_t d = 0; d < n_dims; ++d) {
    const auto dim = c.Scalar<std::int64_t>(field + " dim[" + std::to_string(d) + "]");
    if (dim < 0)
      c.Fail(field + " dim[" + std::to_string(d) + "]", std::to_string(dim), "a size >= 0");
    if (dim != 0 && elements > std::numeric_limits<std::int64_t>::max() / dim) {
      c.Fail(field + " shape", "more than 2^63 - 1 elements", "a representable element count");
    }
    elements *= dim;
    t.shape.push_back(dim);
  }
  t.ggml_type = c.Scalar<std::uint32_t>(field + " type");
  t.offset = c.Scalar<std::uint64_t>(field + " offset");
  if (t.offset % alignment != 0) {
    c.Fail(field + " offset", std::to_string(t.offset),
           "a multiple of the alignment " + std::to_string(alignment));
  }
  return t;
}

// The layout (all little-endian):
//   magic "GGUF" (4 bytes) | version u32 (2 or 3; v1 had 32-bit counts) |
//   tensor_count u64 | kv_count u64 |
//   kv_count x { key: string | value type u32 | value } |
//   tensor_count x { name: string | n_dims u32 (<= 4) | n_dims x dim u64 |
//                    ggml type u32 | offset u64 (from the data section, a
//                    multiple of the alignment) } |
//   padding to `general.alignment` (u32, a power of two; default 32) |
//   tensor data.
//   string = length u64 | bytes (no terminator); value = one scalar of the
//   type (u8 i8 u16 i16 u32 i32 f32 bool(1 byte) u64 i64 f64), a string, or
//   an array: element type u32 | count u64 | count x value.
// Before any loop, kv_count / tensor_count times the smallest encoding of
// an entry (13 / 24 bytes) must fit in the bytes left; nothing is reserved
// from a count.
GgufFile Parse(Source& src, std::string_view source) {
  GgufFile f;
  f.source = std::string(source);
  f.file_size = src.size();
  Cursor c(src, f.source);
  f.version = ReadVersion(c);
  const auto n_tensors = c.Scalar<std::uint64_t>("header.n_tensors");
  const auto n_kv = c.Scalar<std::uint64_t>("header.n_kv");
  if (n_kv > c.left() / kMinKvBytes) {
    c.Fail("header.n_kv", std::to_string(n_kv),
           "at most " + std::to_string(c.left() / kMinKvBytes) + " (what the " +
               std::to_string(c.left()) + " bytes left in the file can hold)");
  }
  if (n_tensors > c.left() / kMinTensorBytes) {
    c.Fail("header.n_tensors", std::to_string(n_tensors),
           "at most " + std::to_string(c.left() / kMinTensorBytes) + " (what the " +
               std::to_string(c.left()) + " bytes left in the file can hold)");
  }
  ReadKeyValues(c, n_kv, f);
  if (n_tensors > c.left() / kMinTensorBytes) {
    c.Fail("header.n_tensors", std::to_string(n_tensors),
           "at most " + std::to_string(c.left() / kMinTensorBytes) +
               " (tensor infos that fit in the " + std::to_string(c.left()) +
               " bytes after the metadata)");
  }
  std::set<std::string, std::less<>> names;
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    f.tensors.push_back(ReadTensorInfo(c, "tensor[" + std::to_string(i) + "]", names, f.alignment));
  }
  const std::uint64_t mis = c.pos() % f.alignment;
  f.data_offset = c.pos() + (mis == 0 ? 0 : f.alignment - mis);
  return f;
}

std::vector<float> TensorValues(Source& src, const GgufFile& file, std::string_view name) {
  const GgufTensorInfo* t = file.FindTensor(name);
  const std::string field = file.source + ": tensor '" + std::string(name) + "'";
  if (t == nullptr) throw IoError(field + ": not in the file");
  std::uint64_t elem_size = 0;
  if (t->ggml_type == 0) elem_size = 4;                        // F32
  if (t->ggml_type == 1 || t->ggml_type == 30) elem_size = 2;  // F16, BF16
  if (elem_size == 0) {
    throw IoError(field + " type: got ggml type " + std::to_string(t->ggml_type) +
                  ", expected F32 (0), F16 (1) or BF16 (30)");
  }
  std::int64_t n = 1;
  for (const std::int64_t d : t->shape) {
    if (n == 0 || d == 0) {
      n = 0;
    } else if (n > kMaxTensorValues / d) {
      n = kMaxTensorValues + 1;  // too large; stays so unless a later dimension is 0
    } else {
      n *= d;
    }
  }
  if (n > kMaxTensorValues) {
    throw IoError(field + " size: got more than 2^24 elements, expected a small tensor");
  }
  const std::uint64_t bytes = static_cast<std::uint64_t>(n) * elem_size;
  const std::uint64_t begin = file.data_offset + t->offset;
  if (t->offset > src.size() || begin > src.size() || bytes > src.size() - begin) {
    throw IoError(field + " data: got bytes [" + std::to_string(begin) + ", " +
                  std::to_string(begin + bytes) + "), expected them inside the " +
                  std::to_string(src.size()) + "-byte file (truncated?)");
  }
  std::vector<std::uint8_t> raw(static_cast<std::size_t>(bytes));
  src.Read(begin, raw.data(), raw.size());
  std::vector<float> out(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (elem_size == 4) {
      std::memcpy(&out[i], raw.data() + 4 * i, 4);
    } else {
      std::uint16_t bits;
      std::memcpy(&bits, raw.data() + 2 * i, 2);
      out[i] = t->ggml_type == 1 ? F16ToFloat(Float16{bits}) : BF16ToFloat(BFloat16{bits});
    }
  }
  return out;
}

}  // namespace

std::string_view GgufTypeName(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
      return "u8";
    case GgufType::kInt8:
      return "i8";
    case GgufType::kUint16:
      return "u16";
    case GgufType::kInt16:
      return "i16";
    case GgufType::kUint32:
      return "u32";
    case GgufType::kInt32:
      return "i32";
    case GgufType::kFloat32:
      return "f32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "str";
    case GgufType::kArray:
      return "arr";
    case GgufType::kUint64:
      return "u64";
    case GgufType::kInt64:
      return "i64";
    case GgufType::kFloat64:
      return "f64";
  }
  return "?";
}

bool GgufValue::IsInteger() const {
  return type != GgufType::kFloat32 && type != GgufType::kFloat64 && type != GgufType::kBool &&
         type != GgufType::kString && type != GgufType::kArray;
}

bool GgufValue::IsNumber() const {
  return IsInteger() || type == GgufType::kFloat32 || type == GgufType::kFloat64;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  for (const GgufKeyValue& kv : metadata) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  for (const GgufTensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

GgufFile ParseGguf(std::span<const std::uint8_t> bytes, std::string_view source) {
  SpanSource src(bytes);
  return Parse(src, source);
}

GgufFile ReadGguf(const std::string& path) {
  FileSource src(path);
  return Parse(src, path);
}

std::vector<float> ReadGgufTensor(const std::string& path, const GgufFile& file,
                                  std::string_view name) {
  FileSource src(path);
  if (src.size() != file.file_size) {
    throw IoError(path + ": size changed from " + std::to_string(file.file_size) + " to " +
                  std::to_string(src.size()) + " bytes since its metadata was read");
  }
  return TensorValues(src, file, name);
}

std::vector<float> GgufTensorValues(std::span<const std::uint8_t> bytes, const GgufFile& file,
                                    std::string_view name) {
  SpanSource src(bytes);
  return TensorValues(src, file, name);
}

bool IsGgufFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  if (!in.read(magic, 4)) return false;
  return std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace posenc
