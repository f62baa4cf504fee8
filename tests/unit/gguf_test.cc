// GGUF reader (posenc/gguf.h, src/io/gguf.cc): the fixtures written by
// ggml's own writer (tests/golden/gguf/, every key, type and value of
// cases.json, the rope_freqs tensor bit for bit), the two broken fixtures,
// and one malformed file per rule (built with the test writer), including
// every truncation of a valid file.
#include "posenc/gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gguf_test_util.h"
#include "posenc/error.h"
#include "test_util.h"

namespace posenc {
namespace {

using nlohmann::json;
using testing::GgufBuilder;

std::string FixturePath(const std::string& name) {
  return test::SourcePath("tests/golden/gguf/" + name);
}

std::vector<std::uint8_t> FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::uint32_t Bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Runs fn, expects an IoError whose message contains every needle.
template <typename Fn>
void ExpectIoError(Fn fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "no IoError";
  } catch (const IoError& e) {
    for (const std::string& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(Gguf, ValidFixturesReadBackEveryKeyTypeAndValue) {
  for (const json& c : test::Golden("gguf/cases.json")["cases"]) {
    if (!c["valid"].get<bool>()) continue;
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    const GgufFile f = ReadGguf(FixturePath(name));
    EXPECT_EQ(f.version, c["gguf_version"].get<std::uint32_t>());
    EXPECT_EQ(f.alignment, c["alignment"].get<std::uint64_t>());
    EXPECT_EQ(f.file_size, c["size_bytes"].get<std::uint64_t>());
    ASSERT_EQ(f.metadata.size(), c["kv"].size());
    for (std::size_t i = 0; i < f.metadata.size(); ++i) {
      const json& want = c["kv"][i];
      const GgufKeyValue& got = f.metadata[i];
      EXPECT_EQ(got.key, want["key"].get<std::string>());
      EXPECT_EQ(GgufTypeName(got.value.type), want["type"].get<std::string>()) << got.key;
      if (want["type"] == "str") {
        EXPECT_EQ(got.value.text, want["value"].get<std::string>());
      }
      if (want["type"] == "u32") {
        EXPECT_EQ(got.value.integer, want["value"].get<std::int64_t>());
      }
      if (want["type"] == "f32") {
        EXPECT_EQ(Bits(static_cast<float>(got.value.number)),
                  std::stoul(want["f32_bits"].get<std::string>(), nullptr, 16))
            << got.key;
      }
    }
    ASSERT_EQ(f.tensors.size(), c["tensors"].size());
    // The in-memory parser sees the same file.
    const std::vector<std::uint8_t> bytes = FileBytes(FixturePath(name));
    const GgufFile g = ParseGguf(bytes, name);
    EXPECT_EQ(g.metadata.size(), f.metadata.size());
    EXPECT_EQ(g.data_offset, f.data_offset);
  }
}

TEST(Gguf, RopeFreqsTensorIsReadBitForBit) {
  const json* c = nullptr;
  for (const json& x : test::Golden("gguf/cases.json")["cases"]) {
    if (x["name"] == "b_llama31_8b_llama3_rope_freqs.gguf") c = &x;
  }
  ASSERT_NE(c, nullptr);
  const std::string path = FixturePath("b_llama31_8b_llama3_rope_freqs.gguf");
  const GgufFile f = ReadGguf(path);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].name, "rope_freqs.weight");
  EXPECT_EQ(f.tensors[0].shape, std::vector<std::int64_t>{64});
  const std::vector<float> v = ReadGgufTensor(path, f, "rope_freqs.weight");
  const json& bits = (*c)["tensors"][0]["f32_bits"];
  ASSERT_EQ(v.size(), bits.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(Bits(v[i]), std::stoul(bits[i].get<std::string>(), nullptr, 16)) << i;
  }
  const std::vector<std::uint8_t> bytes = FileBytes(path);
  EXPECT_EQ(GgufTensorValues(bytes, f, "rope_freqs.weight"), v);
  ExpectIoError([&] { ReadGgufTensor(path, f, "missing.weight"); },
                {"missing.weight", "not in the file"});
}

TEST(Gguf, BrokenFixturesAreIoErrorsNamingFileAndField) {
  ExpectIoError([] { ReadGguf(FixturePath("g_truncated_in_kv.gguf")); },
                {"g_truncated_in_kv.gguf", "kv[5].key length", "got 26 bytes", "at most 13"});
  ExpectIoError([] { LoadModelConfig(FixturePath("g_truncated_in_kv.gguf")); },
                {"g_truncated_in_kv.gguf", "kv[5]"});
  ExpectIoError([] { ReadGguf(FixturePath("h_nkv_2pow40.gguf")); },
                {"h_nkv_2pow40.gguf", "header.n_kv", "got 1099511627776", "expected at most"});
}

TEST(Gguf, EveryTruncationOfAValidFileIsAnIoError) {
  // b ends with the rope_freqs data: every proper prefix is broken. a has no
  // tensors: prefixes that keep the whole metadata (only the final alignment
  // padding is cut) are complete files, all others are broken.
  for (const char* name : {"b_llama31_8b_llama3_rope_freqs.gguf", "a_llama2_7b_plain.gguf"}) {
    const std::vector<std::uint8_t> bytes = FileBytes(FixturePath(name));
    const bool has_tensor = name[0] == 'b';
    std::size_t first_ok = bytes.size();
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      const std::span<const std::uint8_t> prefix(bytes.data(), n);
      try {
        ParseGgufModelConfig(prefix, name);
        first_ok = std::min(first_ok, n);
      } catch (const IoError& e) {
        EXPECT_EQ(first_ok, bytes.size())
            << name << ": cut at " << n << " fails after shorter cuts parsed";
        EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
      }
    }
    if (has_tensor) {
      EXPECT_EQ(first_ok, bytes.size()) << name;
    } else {
      EXPECT_GT(first_ok + 32, bytes.size()) << name << ": only padding may be cut";
    }
  }
}

GgufBuilder Minimal() {
  GgufBuilder b;
  b.Str("general.architecture", "llama").U32("llama.attention.head_count", 4);
  b.U32("llama.embedding_length", 64);
  return b;
}

TEST(Gguf, MalformedHeadersAreIoErrors) {
  std::vector<std::uint8_t> bytes = Minimal().Bytes();
  bytes[0] = 'X';
  ExpectIoError([&] { ParseGguf(bytes, "m.gguf"); },
                {"m.gguf", "header.magic", "\"XGUF\"", "\"GGUF\""});
  ExpectIoError([&] { ParseGguf(Minimal().Version(1).Bytes(), "m.gguf"); },
                {"header.version", "got 1 (GGUF v1", "2 or 3"});
  ExpectIoError([&] { ParseGguf(Minimal().Version(4).Bytes(), "m.gguf"); },
                {"header.version", "got 4"});
  ExpectIoError([&] { ParseGguf(Minimal().Version(0x03000000u).Bytes(), "m.gguf"); },
                {"header.version", "big-endian"});
  EXPECT_NO_THROW(ParseGguf(Minimal().Version(2).Bytes(), "m.gguf"));
  bytes = Minimal().Bytes();
  const std::uint64_t huge = std::uint64_t{1} << 40;
  std::memcpy(bytes.data() + 8, &huge, 8);  // n_tensors
  ExpectIoError([&] { ParseGguf(bytes, "m.gguf"); }, {"header.n_tensors", "got 1099511627776"});
  ExpectIoError(
      [&] {
        ParseGguf(std::vector<std::uint8_t>{'G', 'G'}, "m.gguf");
      },
      {"header.magic", "end of file after 2 of 4 bytes"});
}

TEST(Gguf, MalformedMetadataIsAnIoErrorNamingTheKey) {
  ExpectIoError(
      [] {
        ParseGguf(Minimal().RawKv("x.bad", 13, {0, 0, 0, 0}).Bytes(), "m.gguf");
      },
      {"kv[3] 'x.bad' type", "got 13", "[0, 12]"});
  std::vector<std::uint8_t> nested;  // array of arrays
  GgufBuilder::Put(nested, std::uint32_t{9});
  GgufBuilder::Put(nested, std::uint64_t{0});
  ExpectIoError([&] { ParseGguf(Minimal().RawKv("x.nested", 9, nested).Bytes(), "m.gguf"); },
                {"'x.nested' element type", "nested arrays"});
  std::vector<std::uint8_t> big_array;  // 2^40 u32 elements
  GgufBuilder::Put(big_array, std::uint32_t{4});
  GgufBuilder::Put(big_array, std::uint64_t{1} << 40);
  ExpectIoError([&] { ParseGguf(Minimal().RawKv("x.arr", 9, big_array).Bytes(), "m.gguf"); },
                {"'x.arr' count", "got 1099511627776", "u32 elements that fit"});
  std::vector<std::uint8_t> long_string;  // length past the end of the file
  GgufBuilder::Put(long_string, std::uint64_t{1000});
  ExpectIoError([&] { ParseGguf(Minimal().RawKv("x.str", 8, long_string).Bytes(), "m.gguf"); },
                {"kv[3] 'x.str' length", "got 1000 bytes", "truncated?"});
  std::vector<std::uint8_t> bad_bool = {2};
  ExpectIoError([&] { ParseGguf(Minimal().RawKv("x.flag", 7, bad_bool).Bytes(), "m.gguf"); },
                {"'x.flag'", "got 2", "0 or 1"});
  ExpectIoError([] { ParseGguf(Minimal().U32("llama.embedding_length", 1).Bytes(), "m.gguf"); },
                {"kv[3].key", "again", "unique keys"});
  ExpectIoError([] { ParseGguf(Minimal().U32("", 1).Bytes(), "m.gguf"); },
                {"kv[3].key", "non-empty"});
  ExpectIoError([] { ParseGguf(Minimal().U32("general.alignment", 48).Bytes(), "m.gguf"); },
                {"'general.alignment'", "got 48", "power of two"});
  ExpectIoError([] { ParseGguf(Minimal().F32("general.alignment", 32).Bytes(), "m.gguf"); },
                {"'general.alignment'", "got f32"});
}

TEST(Gguf, MalformedTensorInfosAreIoErrors) {
  GgufBuilder b = Minimal();
  b.TensorF32("t.weight", {1, 2, 3});
  std::vector<std::uint8_t> bytes = b.Bytes();
  const std::string_view name = "t.weight";  // the info starts 8 bytes before its name
  const std::size_t info =
      static_cast<std::size_t>(std::search(bytes.begin(), bytes.end(), name.begin(), name.end()) -
                               bytes.begin()) -
      8;
  std::vector<std::uint8_t> five_dims = bytes;
  five_dims[info + 16] = 5;  // n_dims
  ExpectIoError([&] { ParseGguf(five_dims, "m.gguf"); },
                {"tensor[0] 't.weight' n_dims", "got 5", "at most 4"});
  std::vector<std::uint8_t> negative = bytes;
  const std::int64_t minus = -3;
  std::memcpy(negative.data() + info + 20, &minus, 8);
  ExpectIoError([&] { ParseGguf(negative, "m.gguf"); }, {"dim[0]", "got -3"});
  std::vector<std::uint8_t> misaligned = bytes;
  misaligned[info + 32] = 4;  // offset 4
  ExpectIoError([&] { ParseGguf(misaligned, "m.gguf"); },
                {"'t.weight' offset", "got 4", "multiple of"});
  // Data past the end: the infos parse, reading the tensor fails.
  std::vector<std::uint8_t> cut(bytes.begin(), bytes.end() - 24);  // 8 of the 12 data bytes left
  const GgufFile f = ParseGguf(cut, "m.gguf");
  ExpectIoError([&] { GgufTensorValues(cut, f, "t.weight"); },
                {"tensor 't.weight' data", "truncated?"});
  EXPECT_EQ(GgufTensorValues(bytes, ParseGguf(bytes, "m.gguf"), "t.weight"),
            (std::vector<float>{1, 2, 3}));
}

TEST(Gguf, LargeArraysKeepTheirCountOnly) {
  std::vector<std::int32_t> many(kGgufKeptArrayLength + 1, 7);
  const std::vector<std::uint8_t> bytes =
      Minimal().I32Array("tokenizer.ggml.token_type", many).Bytes();
  const GgufFile f = ParseGguf(bytes, "m.gguf");
  const GgufValue* v = f.Find("tokenizer.ggml.token_type");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->count, many.size());
  EXPECT_TRUE(v->numbers.empty());
  const GgufFile small =
      ParseGguf(Minimal().I32Array("x.sections", {16, 24, 24, 0}).Bytes(), "m.gguf");
  EXPECT_EQ(small.Find("x.sections")->numbers, (std::vector<double>{16, 24, 24, 0}));
}

TEST(Gguf, IsGgufFileChecksTheMagic) {
  EXPECT_TRUE(IsGgufFile(FixturePath("a_llama2_7b_plain.gguf")));
  EXPECT_FALSE(IsGgufFile(test::SourcePath("examples/configs/llama-3.1-8b.json")));
  EXPECT_FALSE(IsGgufFile("/nonexistent/x.gguf"));
  ExpectIoError([] { ReadGguf("/nonexistent/x.gguf"); }, {"/nonexistent/x.gguf", "cannot open"});
}

}  // namespace
}  // namespace posenc
