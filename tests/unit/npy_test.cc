// .npy reading and writing: numpy-written fixtures (tests/golden/npy/),
// byte-identical output, round trips, and one test per malformed input.
#include "posenc/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "test_util.h"

namespace posenc::test {
namespace {

std::string Fixture(const std::string& name) { return SourcePath("tests/golden/npy/" + name); }

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void Spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A v1.0 (or v2.0 with `major` 2) file with the given header dict (padding
// and newline added) and raw data bytes.
std::string MakeNpy(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  const std::size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  for (std::size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) {
    out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  }
  return out + header + data;
}

std::string FloatBytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// Writes `bytes` to a temp file and returns the IoError message of reading it
// (fails the test if no IoError is thrown).
std::string ReadError(const std::string& bytes, const std::string& file = "bad.npy") {
  const std::string path = TempDir("npy_bad") + "/" + file;
  Spit(path, bytes);
  try {
    ReadNpy(path);
  } catch (const IoError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << "message does not name the file: " << msg;
    return msg;
  }
  ADD_FAILURE() << "no IoError for " << file;
  return "";
}

const std::string kGoodDict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
const std::string kGoodData = FloatBytes({1, 2, 3, 4});

TEST(Npy, ReadsNumpyFloat32) {
  const NpyArray a = ReadNpy(Fixture("f32_3x4.npy"));
  EXPECT_EQ(a.dtype, DType::kFloat32);
  ASSERT_EQ(a.shape, (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(a.ShapeText(), "(3, 4)");
  const std::vector<float> v = a.ToFloat32();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(v[i], static_cast<float>(i / 7.0)) << i;
}

TEST(Npy, ReadsNumpyFloat64Version2) {
  const NpyArray a = ReadNpy(Fixture("f64_2x3_v2.npy"));
  EXPECT_EQ(a.dtype, DType::kFloat64);
  ASSERT_EQ(a.shape, (std::vector<std::int64_t>{2, 3}));
  const std::vector<double> v = a.ToFloat64();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(v[i], i / 3.0 - 1.0) << i;
}

TEST(Npy, ReadsNumpyFloat16) {
  const NpyArray a = ReadNpy(Fixture("f16_5.npy"));
  EXPECT_EQ(a.dtype, DType::kFloat16);
  EXPECT_EQ(a.ShapeText(), "(5,)");
  const std::vector<float> v = a.ToFloat32();
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[0], 0.5f);
  EXPECT_EQ(v[1], -1.25f);
  EXPECT_EQ(v[2], 65504.0f);
  EXPECT_EQ(v[3], std::ldexp(1.0f, -24));  // 6e-8 rounds to the smallest subnormal
  EXPECT_EQ(v[4], F16ToFloat(FloatToF16(0.1f)));
}

TEST(Npy, WritesTheSameBytesAsNumpySave) {
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[i] = static_cast<float>(i / 7.0);
  const std::string path = TempDir("npy_same") + "/x.npy";
  WriteNpy(path, TensorView::Contiguous(v.data(), DType::kFloat32, {3, 4}));
  EXPECT_EQ(Slurp(path), Slurp(Fixture("f32_3x4.npy")));
}

TEST(Npy, RoundTripsFloat64Rank3) {
  std::vector<double> v(2 * 3 * 5);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(1.0 + static_cast<double>(i)) * 1e-3;
  const std::string path = TempDir("npy_rt64") + "/x.npy";
  WriteNpy(path, TensorView::Contiguous(v.data(), DType::kFloat64, {2, 3, 5}));
  const std::string bytes = Slurp(path);
  EXPECT_EQ((bytes.size() - v.size() * 8) % 64, 0u) << "data must start 64-byte aligned";
  const NpyArray a = ReadNpy(path);
  EXPECT_EQ(a.ShapeText(), "(2, 3, 5)");
  EXPECT_EQ(a.ToFloat64(), v);
}

TEST(Npy, WritesAStridedViewInCOrder) {
  // A [4, 3] transposed view of a row-major [3, 4] buffer.
  std::vector<float> buf(12);
  for (int i = 0; i < 12; ++i) buf[i] = static_cast<float>(i);
  const TensorView t = TensorView::Strided(buf.data(), DType::kFloat32, {4, 3}, {1, 4});
  const std::string path = TempDir("npy_strided") + "/t.npy";
  WriteNpy(path, t);
  const NpyArray a = ReadNpy(path);
  ASSERT_EQ(a.shape, (std::vector<std::int64_t>{4, 3}));
  const std::vector<float> v = a.ToFloat32();
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(v[r * 3 + c], buf[c * 4 + r]);
  }
}

TEST(Npy, RoundTripsFloat16ThroughAStream) {
  std::vector<Float16> h = {FloatToF16(1.5f), FloatToF16(-2.0f), FloatToF16(1e-5f)};
  std::stringstream ss;
  WriteNpy(ss, TensorView::Contiguous(h.data(), DType::kFloat16, {3}), "stream");
  const NpyArray a = ReadNpy(ss, "stream");
  EXPECT_EQ(a.dtype, DType::kFloat16);
  const std::vector<float> v = a.ToFloat32();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(v[i], F16ToFloat(h[i]));
}

TEST(Npy, ViewOfAReadArray) {
  const NpyArray a = ReadNpy(Fixture("f32_3x4.npy"));
  const TensorView v = a.View();
  EXPECT_EQ(v.rank, 2);
  EXPECT_EQ(v.strides[0], 4);
  EXPECT_EQ(v.As<float>()[5], static_cast<float>(5 / 7.0));
  a.RequireRank(2);
  EXPECT_THROW(a.RequireRank(3), IoError);
}

TEST(Npy, AcceptsDoubleQuotesTrailingSpaceAndNoTrailingComma) {
  const std::string path = TempDir("npy_quotes") + "/q.npy";
  Spit(path,
       MakeNpy("{\"shape\": (2,2), \"fortran_order\": False, \"descr\": \"<f4\"}", kGoodData));
  EXPECT_EQ(ReadNpy(path).ToFloat32(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(Npy, ScalarAndEmptyShapes) {
  const std::string dir = TempDir("npy_shapes");
  Spit(dir + "/s.npy",
       MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", FloatBytes({7})));
  const NpyArray s = ReadNpy(dir + "/s.npy");
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.ToFloat32(), std::vector<float>{7});
  EXPECT_THROW(s.View(), IoError);
  Spit(dir + "/e.npy", MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", ""));
  const NpyArray e = ReadNpy(dir + "/e.npy");
  EXPECT_EQ(e.NumElements(), 0);
  EXPECT_THROW(e.View(), IoError);
}

// --- bad input: one test per case -------------------------------------------

TEST(NpyErrors, MissingFile) {
  const std::string path = TempDir("npy_missing") + "/nope.npy";
  try {
    ReadNpy(path);
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos);
  }
}

TEST(NpyErrors, EmptyFile) { EXPECT_NE(ReadError("").find("truncated"), std::string::npos); }

TEST(NpyErrors, BadMagic) {
  EXPECT_NE(ReadError("PK\x03\x04 not numpy at all").find("magic"), std::string::npos);
}

TEST(NpyErrors, UnsupportedVersion) {
  std::string b = MakeNpy(kGoodDict, kGoodData);
  b[6] = 4;
  EXPECT_NE(ReadError(b).find("version 4.0"), std::string::npos);
}

TEST(NpyErrors, TruncatedHeader) {
  const std::string b = MakeNpy(kGoodDict, kGoodData);
  EXPECT_NE(ReadError(b.substr(0, 30)).find("header is incomplete"), std::string::npos);
}

TEST(NpyErrors, TruncatedData) {
  const std::string b = MakeNpy(kGoodDict, kGoodData);
  const std::string msg = ReadError(b.substr(0, b.size() - 3));
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find("16 data bytes"), std::string::npos) << msg;
}

TEST(NpyErrors, TrailingBytes) {
  EXPECT_NE(ReadError(MakeNpy(kGoodDict, kGoodData + "xy")).find("2 unexpected trailing bytes"),
            std::string::npos);
}

TEST(NpyErrors, HeaderWithoutNewline) {
  std::string b = MakeNpy(kGoodDict, kGoodData);
  b[b.size() - kGoodData.size() - 1] = ' ';
  EXPECT_NE(ReadError(b).find("newline"), std::string::npos);
}

TEST(NpyErrors, MissingKey) {
  const std::string msg = ReadError(MakeNpy("{'descr': '<f4', 'shape': (2, 2), }", kGoodData));
  EXPECT_NE(msg.find("missing key(s) 'fortran_order'"), std::string::npos) << msg;
}

TEST(NpyErrors, DuplicateKey) {
  const std::string msg = ReadError(MakeNpy(
      "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 2)}", kGoodData));
  EXPECT_NE(msg.find("duplicate key 'descr'"), std::string::npos) << msg;
}

TEST(NpyErrors, UnknownKey) {
  const std::string msg = ReadError(
      MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), 'extra': 1}", kGoodData));
  EXPECT_NE(msg.find("unexpected key 'extra'"), std::string::npos) << msg;
}

TEST(NpyErrors, NotADict) {
  EXPECT_NE(ReadError(MakeNpy("['descr', '<f4']", kGoodData)).find("expected '{'"),
            std::string::npos);
}

TEST(NpyErrors, BadBool) {
  const std::string msg =
      ReadError(MakeNpy("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 2), }", kGoodData));
  EXPECT_NE(msg.find("True or False"), std::string::npos) << msg;
}

TEST(NpyErrors, NegativeShape) {
  const std::string msg =
      ReadError(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 2), }", kGoodData));
  EXPECT_NE(msg.find("non-negative integer"), std::string::npos) << msg;
}

TEST(NpyErrors, OneTupleWithoutComma) {
  const std::string msg =
      ReadError(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (4), }", kGoodData));
  EXPECT_NE(msg.find("trailing comma"), std::string::npos) << msg;
}

TEST(NpyErrors, UnterminatedString) {
  const std::string msg = ReadError(MakeNpy("{'descr: '<f4'}", kGoodData));
  EXPECT_NE(msg.find("malformed .npy header"), std::string::npos) << msg;
}

TEST(NpyErrors, TextAfterDict) {
  const std::string msg = ReadError(MakeNpy(kGoodDict + " junk", kGoodData));
  EXPECT_NE(msg.find("after the closing"), std::string::npos) << msg;
}

TEST(NpyErrors, HugeShape) {
  const std::string msg = ReadError(MakeNpy(
      "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000000, 1000), }", kGoodData));
  EXPECT_NE(msg.find("2^40-byte limit"), std::string::npos) << msg;
}

TEST(NpyErrors, FortranOrder) {
  const std::string path = Fixture("fortran_2x3.npy");
  try {
    ReadNpy(path);
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("fortran_order True"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
}

TEST(NpyErrors, BigEndian) {
  EXPECT_THROW(
      {
        try {
          ReadNpy(Fixture("big_endian_f4.npy"));
        } catch (const IoError& e) {
          EXPECT_NE(std::string(e.what()).find("big-endian dtype '>f4'"), std::string::npos);
          throw;
        }
      },
      IoError);
}

TEST(NpyErrors, WrongDtype) {
  EXPECT_THROW(
      {
        try {
          ReadNpy(Fixture("int32_4.npy"));
        } catch (const IoError& e) {
          EXPECT_NE(std::string(e.what()).find("unsupported dtype '<i4'"), std::string::npos);
          throw;
        }
      },
      IoError);
}

// Found by fuzz_npy: an empty array whose other sizes are huge is valid
// .npy (no data byte), but View() formed their product (signed overflow)
// before noticing the zero.
TEST(NpyErrors, EmptyArrayWithHugeSizesHasNoView) {
  std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, "
      "4611686018427387904), }";
  dict.append(118 - dict.size(), ' ');
  dict.push_back('\n');
  std::string file = std::string("\x93NUMPY\x01\x00", 8);
  file.push_back(static_cast<char>(dict.size()));
  file.push_back('\0');
  file += dict;
  std::istringstream in(file, std::ios::binary);
  const NpyArray a = ReadNpy(in, "empty.npy");
  EXPECT_EQ(a.NumElements(), 0);
  EXPECT_TRUE(a.ToFloat32().empty());
  try {
    (void)a.View();
    FAIL() << "an empty array has no view";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("empty array"), std::string::npos) << e.what();
  }
}

// A malformed 2.0 header of 1 MiB is quoted in the message only in part.
TEST(NpyErrors, LongMalformedHeaderIsQuotedShort) {
  const std::size_t n = std::size_t{1} << 20;
  std::string file = std::string("\x93NUMPY\x02\x00", 8);
  for (int b = 0; b < 4; ++b) file.push_back(static_cast<char>((n >> (8 * b)) & 0xff));
  file += std::string(n - 1, 'x') + "\n";
  std::istringstream in(file, std::ios::binary);
  try {
    ReadNpy(in, "long.npy");
    FAIL();
  } catch (const IoError& e) {
    EXPECT_LT(std::string(e.what()).size(), 500u);
    EXPECT_NE(std::string(e.what()).find("long.npy: malformed .npy header"), std::string::npos);
  }
}

TEST(NpyErrors, WrongRank) {
  const NpyArray a = ReadNpy(Fixture("f16_5.npy"));
  try {
    a.RequireRank(2);
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("expected a rank-2 array, got shape (5,)"),
              std::string::npos)
        << e.what();
  }
}

TEST(NpyErrors, WriteBFloat16IsInvalidArgument) {
  std::vector<BFloat16> b(2);
  const std::string path = TempDir("npy_bf16") + "/b.npy";
  EXPECT_THROW(WriteNpy(path, TensorView::Contiguous(b.data(), DType::kBFloat16, {2})),
               InvalidArgument);
  EXPECT_FALSE(std::ifstream(path).good()) << "no file is created for a rejected view";
}

TEST(NpyErrors, WriteToAMissingDirectory) {
  float v[2] = {1, 2};
  const std::string path = TempDir("npy_nodir") + "/no/such/dir/x.npy";
  try {
    WriteNpy(path, TensorView::Contiguous(v, DType::kFloat32, {2}));
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
}

}  // namespace
}  // namespace posenc::test
