// Sinusoidal absolute encodings: golden tables (HF DistilBERT, GPT-J, the
// paper formula), accuracy up to 2^24 - 1 against long double, the rotation
// property PE(pos + k) = R_k PE(pos), odd d, the add form, and bad input.
#include "posenc/sinusoidal.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "test_util.h"

namespace posenc::test {
namespace {

std::vector<double> Table64(const SinusoidalParams& p, std::int64_t offset, std::int64_t n) {
  std::vector<double> t(static_cast<std::size_t>(n * p.dim));
  SinusoidalTable(p, offset, n, TensorView::Contiguous(t.data(), DType::kFloat64, {n, p.dim}));
  return t;
}

std::vector<float> Table32At(const SinusoidalParams& p, const std::vector<std::int64_t>& ids,
                             const Context& ctx = Context{}) {
  const auto n = static_cast<std::int64_t>(ids.size());
  std::vector<float> t(static_cast<std::size_t>(n * p.dim));
  SinusoidalTableAt(p, ids.data(), n, TensorView::Contiguous(t.data(), DType::kFloat32, {n, p.dim}),
                    ctx);
  return t;
}

// Truth in long double: column c of position pos, straight from the formulas
// in sinusoidal.h (independent of SinusoidalInvFreq).
long double Truth(const SinusoidalParams& p, std::int64_t pos, std::int64_t c) {
  const std::int64_t d = p.dim, num_sin = (d + 1) / 2;
  std::int64_t i;
  bool is_sin;
  if (p.layout == SinusoidalLayout::kInterleaved) {
    i = c / 2;
    is_sin = c % 2 == 0;
  } else {
    is_sin = c < num_sin;
    i = is_sin ? c : c - num_sin;
  }
  const long double exponent =
      p.layout == SinusoidalLayout::kSplitTensor2Tensor
          ? static_cast<long double>(i) / static_cast<long double>(d / 2 - 1)
          : static_cast<long double>(2 * i) / static_cast<long double>(d);
  const long double angle =
      static_cast<long double>(pos) * powl(static_cast<long double>(p.base), -exponent);
  return is_sin ? sinl(angle) : cosl(angle);
}

// --- golden ---------------------------------------------------------------

TEST(SinusoidalGolden, AllSixTables) {
  const auto& cases = Golden("sinusoidal.json")["cases"];
  ASSERT_EQ(cases.size(), 6u);
  int checked = 0;
  for (const auto& c : cases) {
    const std::string kind = c["kind"];
    SinusoidalParams p;
    p.dim = c["d"];
    const std::int64_t n = c["max_len"];
    const std::vector<double> want = FlattenDoubles(c["table"]);
    ASSERT_EQ(want.size(), static_cast<std::size_t>(n * p.dim)) << kind;
    if (kind == "seed_formula_float64") {
      p.layout = SinusoidalLayout::kInterleaved;
      EXPECT_LE(MaxAbsDiff(Table64(p, 0, n), want), 1e-12) << kind << " d=" << p.dim;
    } else {
      ASSERT_TRUE(kind == "distilbert_create_sinusoidal_embeddings" ||
                  kind == "gptj_create_sinusoidal_positions")
          << kind;
      p.layout = kind == "gptj_create_sinusoidal_positions" ? SinusoidalLayout::kSplit
                                                            : SinusoidalLayout::kInterleaved;
      std::vector<float> got(static_cast<std::size_t>(n * p.dim));
      SinusoidalTable(p, 0, n, TensorView::Contiguous(got.data(), DType::kFloat32, {n, p.dim}));
      EXPECT_LE(MaxAbsDiff(std::vector<double>(got.begin(), got.end()), want), 1e-6)
          << kind << " d=" << p.dim;
      if (kind == "distilbert_create_sinusoidal_embeddings") {
        // DistilBERT rounds a float64 table once, as we do: bit for bit.
        for (std::size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(got[i], static_cast<float>(want[i])) << "d=" << p.dim << " i=" << i;
        }
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

// --- accuracy up to 2^24 - 1 -------------------------------------------------

TEST(SinusoidalAccuracy, Float32WithinOneMicroOfTruthUpTo2To24) {
  std::vector<std::int64_t> ids = {
      0, 1, 4095, 131071, (1 << 23) + 12345, kMaxPosition - 1, kMaxPosition};
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::int64_t> pick(0, kMaxPosition);
  for (int i = 0; i < 25; ++i) ids.push_back(pick(rng));
  for (Backend backend : {Backend::kScalar, Backend::kAuto}) {
    for (SinusoidalLayout layout : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kSplit,
                                    SinusoidalLayout::kSplitTensor2Tensor}) {
      SinusoidalParams p;
      p.dim = 128;
      p.layout = layout;
      const Context ctx(1, backend);
      const std::vector<float> got = Table32At(p, ids, ctx);
      std::vector<double> got64(got.size());
      SinusoidalTableAt(p, ids.data(), static_cast<std::int64_t>(ids.size()),
                        TensorView::Contiguous(got64.data(), DType::kFloat64,
                                               {static_cast<std::int64_t>(ids.size()), p.dim}),
                        ctx);
      double worst32 = 0, worst64 = 0;
      for (std::size_t r = 0; r < ids.size(); ++r) {
        for (std::int64_t c = 0; c < p.dim; ++c) {
          const long double t = Truth(p, ids[r], c);
          const std::size_t k = r * static_cast<std::size_t>(p.dim) + static_cast<std::size_t>(c);
          worst32 = std::max(worst32, static_cast<double>(fabsl(got[k] - t)));
          worst64 = std::max(worst64, static_cast<double>(fabsl(got64[k] - t)));
        }
      }
      EXPECT_LE(worst32, 1e-6) << SinusoidalLayoutName(layout) << " " << BackendName(backend);
      // float64: the only error is the angle's rounding, pos * 2^-53 ~ 2e-9.
      EXPECT_LE(worst64, 1e-8) << SinusoidalLayoutName(layout) << " " << BackendName(backend);
    }
  }
}

TEST(SinusoidalAccuracy, SixteenBitOutputsWithinTheirRoundoff) {
  SinusoidalParams p;
  p.dim = 32;
  const std::vector<double> ref = Table64(p, 100000, 8);
  for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
    std::vector<std::uint16_t> buf(ref.size());
    SinusoidalTable(p, 100000, 8, TensorView::Contiguous(buf.data(), dt, {8, p.dim}));
    for (std::size_t i = 0; i < ref.size(); ++i) {
      EXPECT_LE(std::fabs(LoadAsDouble(buf.data(), dt, static_cast<std::int64_t>(i)) - ref[i]),
                Eps(dt))
          << DTypeName(dt) << " i=" << i;
    }
  }
}

// --- PE(pos + k) = R_k PE(pos) ----------------------------------------------

// Max |PE(pos+k) - R_k PE(pos)| over the (sin, cos) pairs of one layout.
double RotationError(const SinusoidalParams& p, std::int64_t pos, std::int64_t k) {
  const std::vector<double> a = Table64(p, pos, 1), b = Table64(p, pos + k, 1);
  const std::vector<double> inv = SinusoidalInvFreq(p);
  const std::int64_t num_sin = (p.dim + 1) / 2, num_cos = p.dim / 2;
  double worst = 0;
  for (std::int64_t i = 0; i < num_cos; ++i) {
    const std::size_t s =
        static_cast<std::size_t>(p.layout == SinusoidalLayout::kInterleaved ? 2 * i : i);
    const std::size_t c = static_cast<std::size_t>(
        p.layout == SinusoidalLayout::kInterleaved ? 2 * i + 1 : num_sin + i);
    const double phi = static_cast<double>(k) * inv[static_cast<std::size_t>(i)];
    // [sin(x+phi), cos(x+phi)] = [[cos phi, sin phi], [-sin phi, cos phi]] [sin x, cos x]
    const double rs = std::cos(phi) * a[s] + std::sin(phi) * a[c];
    const double rc = -std::sin(phi) * a[s] + std::cos(phi) * a[c];
    worst = std::max({worst, std::fabs(b[s] - rs), std::fabs(b[c] - rc)});
  }
  return worst;
}

TEST(SinusoidalProperty, ShiftIsAFixedRotation) {
  for (SinusoidalLayout layout : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kSplit,
                                  SinusoidalLayout::kSplitTensor2Tensor}) {
    SinusoidalParams p;
    p.dim = 64;
    p.layout = layout;
    double worst = 0;
    for (std::int64_t pos : {0, 1, 7, 100, 999, 4096, 50000}) {
      for (std::int64_t k : {1, 2, 5, 17, 128, 1000})
        worst = std::max(worst, RotationError(p, pos, k));
    }
    // Rounding of pos * inv_freq (<= 51000 * 2^-53) dominates.
    EXPECT_LE(worst, 1e-10) << SinusoidalLayoutName(layout);
  }
}

TEST(SinusoidalProperty, RotationDependsOnlyOnTheShift) {
  // The same R_k maps every pos: check the angle recovered from each pair is
  // k * inv_freq whatever pos is.
  SinusoidalParams p;
  p.dim = 16;
  const std::vector<double> inv = SinusoidalInvFreq(p);
  for (std::int64_t pos : {3, 300, 30000}) {
    const std::vector<double> a = Table64(p, pos, 1), b = Table64(p, pos + 5, 1);
    for (std::size_t i = 0; i < 8; ++i) {
      const double delta = std::atan2(b[2 * i] * a[2 * i + 1] - b[2 * i + 1] * a[2 * i],
                                      b[2 * i + 1] * a[2 * i + 1] + b[2 * i] * a[2 * i]);
      EXPECT_NEAR(delta, std::remainder(5.0 * inv[i], 2 * std::numbers::pi), 1e-10)
          << pos << " " << i;
    }
  }
}

// --- layouts, odd d, forms ---------------------------------------------------

TEST(Sinusoidal, OddDimLastColumnIsASine) {
  for (SinusoidalLayout layout : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kSplit}) {
    SinusoidalParams p;
    p.dim = 7;
    p.layout = layout;
    const std::vector<double> t = Table64(p, 0, 20);
    for (std::int64_t pos = 0; pos < 20; ++pos) {
      for (std::int64_t c = 0; c < 7; ++c) {
        EXPECT_NEAR(t[static_cast<std::size_t>(pos * 7 + c)], static_cast<double>(Truth(p, pos, c)),
                    1e-14);
      }
    }
    // Interleaved: column 6 = sin(pos * base^(-6/7)); split: columns 0..3 are
    // sines with 4 frequencies, 4..6 cosines of the first 3.
    const double f3 = std::pow(10000.0, -6.0 / 7.0);
    const std::size_t last_sin = layout == SinusoidalLayout::kInterleaved ? 6 : 3;
    EXPECT_NEAR(t[5 * 7 + last_sin], std::sin(5 * f3), 1e-15);
    if (layout == SinusoidalLayout::kSplit) {
      EXPECT_NEAR(t[5 * 7 + 6], std::cos(5 * std::pow(10000.0, -4.0 / 7.0)), 1e-15);
    }
  }
}

TEST(Sinusoidal, SplitT2TUsesDenominatorHalfDimMinusOne) {
  SinusoidalParams p;
  p.dim = 8;
  p.layout = SinusoidalLayout::kSplitTensor2Tensor;
  const std::vector<double> inv = SinusoidalInvFreq(p);
  ASSERT_EQ(inv.size(), 4u);
  EXPECT_DOUBLE_EQ(inv[0], 1.0);
  EXPECT_NEAR(inv[3], 1e-4, 1e-18);  // base^(-3/3)
  const std::vector<double> t = Table64(p, 2, 1);
  EXPECT_NEAR(t[1], std::sin(2 * std::pow(10000.0, -1.0 / 3.0)), 1e-15);
  EXPECT_NEAR(t[5], std::cos(2 * std::pow(10000.0, -1.0 / 3.0)), 1e-15);
}

TEST(Sinusoidal, OffsetFormEqualsIdsForm) {
  SinusoidalParams p;
  p.dim = 30;
  p.layout = SinusoidalLayout::kSplit;
  std::vector<std::int64_t> ids;
  for (std::int64_t i = 0; i < 130; ++i) ids.push_back(1000000 + i);
  const std::vector<float> by_ids = Table32At(p, ids);
  std::vector<float> by_offset(by_ids.size());
  SinusoidalTable(p, 1000000, 130,
                  TensorView::Contiguous(by_offset.data(), DType::kFloat32, {130, 30}));
  EXPECT_EQ(by_ids, by_offset);
}

TEST(Sinusoidal, ThreadsGiveTheSameTable) {
  SinusoidalParams p;
  p.dim = 48;
  std::vector<float> one(300 * 48), four(300 * 48);
  SinusoidalTable(p, 5, 300, TensorView::Contiguous(one.data(), DType::kFloat32, {300, 48}),
                  Context(1));
  SinusoidalTable(p, 5, 300, TensorView::Contiguous(four.data(), DType::kFloat32, {300, 48}),
                  Context(4));
  EXPECT_EQ(one, four);
}

TEST(Sinusoidal, StridedOutputLeavesGapsAlone) {
  SinusoidalParams p;
  p.dim = 4;
  std::vector<float> buf(3 * 10, -7.0f);  // rows 10 apart, columns 2 apart
  SinusoidalTable(p, 0, 3, TensorView::Strided(buf.data(), DType::kFloat32, {3, 4}, {10, 2}));
  EXPECT_EQ(buf[10 * 1 + 0], static_cast<float>(std::sin(1.0)));
  EXPECT_EQ(buf[10 * 1 + 2], static_cast<float>(std::cos(1.0)));
  EXPECT_EQ(buf[1], -7.0f);
  EXPECT_EQ(buf[8], -7.0f);
}

// AddSinusoidal: x[b, s, :] += PE(pos(b, s)) with x strided (row padding).
void CheckAdd(const Positions& pos, const std::vector<std::int64_t>& expect_pos) {
  SinusoidalParams p;
  p.dim = 6;
  p.layout = SinusoidalLayout::kSplit;
  const std::int64_t batch = 2, seq = 3, row = 8;  // 2 padding floats per token
  std::vector<float> x(static_cast<std::size_t>(batch * seq * row));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i);
  const std::vector<float> before = x;
  AddSinusoidal(
      p, TensorView::Strided(x.data(), DType::kFloat32, {batch, seq, p.dim}, {seq * row, row, 1}),
      pos);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t s = 0; s < seq; ++s) {
      const std::vector<double> pe =
          Table64(p, expect_pos[static_cast<std::size_t>(b * seq + s)], 1);
      for (std::int64_t c = 0; c < row; ++c) {
        const std::size_t k = static_cast<std::size_t>((b * seq + s) * row + c);
        const float want =
            c < p.dim ? static_cast<float>(before[k] + pe[static_cast<std::size_t>(c)]) : before[k];
        EXPECT_EQ(x[k], want) << "b=" << b << " s=" << s << " c=" << c;
      }
    }
  }
}

TEST(SinusoidalAdd, WithOffset) { CheckAdd(Positions::Offset(40), {40, 41, 42, 40, 41, 42}); }

TEST(SinusoidalAdd, WithSharedIds) {
  const std::vector<std::int64_t> ids = {9, 0, 123456};
  CheckAdd(Positions::Ids(ids.data(), 3), {9, 0, 123456, 9, 0, 123456});
}

TEST(SinusoidalAdd, WithPerRowIds) {
  const std::vector<std::int64_t> ids = {0, 1, 2, 7, 7, kMaxPosition};
  CheckAdd(Positions::Ids(ids.data(), 6), ids);
}

TEST(Sinusoidal, LayoutNamesRoundTrip) {
  for (SinusoidalLayout l : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kSplit,
                             SinusoidalLayout::kSplitTensor2Tensor}) {
    EXPECT_EQ(ParseSinusoidalLayout(SinusoidalLayoutName(l)), l);
  }
}

// --- bad input: one test per case --------------------------------------------

// Runs fn, expects InvalidArgument whose message contains every fragment.
template <typename Fn>
void ExpectInvalid(Fn fn, std::initializer_list<const char*> fragments) {
  try {
    fn();
    ADD_FAILURE() << "no InvalidArgument";
  } catch (const InvalidArgument& e) {
    for (const char* f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
  }
}

void Table(const SinusoidalParams& p, std::int64_t offset, std::int64_t n, std::int64_t rows,
           std::int64_t cols) {
  std::vector<float> out(static_cast<std::size_t>(std::max<std::int64_t>(rows * cols, 1)));
  SinusoidalTable(p, offset, n, TensorView::Contiguous(out.data(), DType::kFloat32, {rows, cols}));
}

SinusoidalParams Dim(std::int64_t d, double base = 10000.0) {
  SinusoidalParams p;
  p.dim = d;
  p.base = base;
  return p;
}

TEST(SinusoidalErrors, DimZero) {
  ExpectInvalid([] { Table(Dim(0), 0, 2, 2, 1); }, {"dim: got 0"});
}
TEST(SinusoidalErrors, BaseNaN) {
  ExpectInvalid([] { Table(Dim(4, std::nan("")), 0, 2, 2, 4); },
                {"base: got nan", "finite number > 1"});
}
TEST(SinusoidalErrors, BaseNegative) {
  ExpectInvalid([] { Table(Dim(4, -2.0), 0, 2, 2, 4); }, {"base: got -2"});
}
TEST(SinusoidalErrors, BaseZero) {
  ExpectInvalid([] { Table(Dim(4, 0.0), 0, 2, 2, 4); }, {"base: got 0"});
}
TEST(SinusoidalErrors, BaseOne) {
  ExpectInvalid([] { Table(Dim(4, 1.0), 0, 2, 2, 4); }, {"base: got 1,"});
}
TEST(SinusoidalErrors, BaseInfinite) {
  ExpectInvalid([] { Table(Dim(4, INFINITY), 0, 2, 2, 4); }, {"base: got inf"});
}
TEST(SinusoidalErrors, SplitT2TOddDim) {
  SinusoidalParams p = Dim(5);
  p.layout = SinusoidalLayout::kSplitTensor2Tensor;
  ExpectInvalid([&] { Table(p, 0, 1, 1, 5); }, {"dim: got 5", "split_t2t"});
}
TEST(SinusoidalErrors, EmptyTable) {
  ExpectInvalid([] { Table(Dim(4), 0, 0, 1, 4); }, {"num_positions: got 0"});
}
TEST(SinusoidalErrors, OffsetNegative) {
  ExpectInvalid([] { Table(Dim(4), -1, 2, 2, 4); }, {"offset: got -1"});
}
TEST(SinusoidalErrors, OffsetPast2To24) {
  Table(Dim(4), kMaxPosition, 1, 1, 4);  // the last valid position
  ExpectInvalid([] { Table(Dim(4), kMaxPosition, 2, 2, 4); }, {"offset: got 16777215", "2^24 - 1"});
}
TEST(SinusoidalErrors, OutRowsMismatch) {
  ExpectInvalid([] { Table(Dim(4), 0, 3, 2, 4); }, {"out.shape[0]: got 2"});
}
TEST(SinusoidalErrors, OutColsMismatch) {
  ExpectInvalid([] { Table(Dim(4), 0, 2, 2, 5); }, {"out.shape[1]: got 5", "dim (4)"});
}
TEST(SinusoidalErrors, OutAliasingZeroStride) {
  std::vector<float> out(8);
  ExpectInvalid(
      [&] {
        SinusoidalTable(Dim(4), 0, 2,
                        TensorView::Strided(out.data(), DType::kFloat32, {2, 4}, {0, 1}));
      },
      {"out.strides[0]", "may not alias"});
}
TEST(SinusoidalErrors, OutNull) {
  ExpectInvalid(
      [] {
        SinusoidalTable(
            Dim(4), 0, 2,
            TensorView::Contiguous(static_cast<void*>(nullptr), DType::kFloat32, {2, 4}));
      },
      {"out.data"});
}
TEST(SinusoidalErrors, PositionIdNegative) {
  const std::vector<std::int64_t> ids = {0, 3, -1};
  std::vector<float> out(12);
  ExpectInvalid(
      [&] {
        SinusoidalTableAt(Dim(4), ids.data(), 3,
                          TensorView::Contiguous(out.data(), DType::kFloat32, {3, 4}));
      },
      {"positions[2]: got -1"});
}
TEST(SinusoidalErrors, PositionIdPast2To24) {
  const std::vector<std::int64_t> ids = {kMaxPosition + 1};
  std::vector<float> out(4);
  ExpectInvalid(
      [&] {
        SinusoidalTableAt(Dim(4), ids.data(), 1,
                          TensorView::Contiguous(out.data(), DType::kFloat32, {1, 4}));
      },
      {"positions[0]: got 16777216"});
}
TEST(SinusoidalErrors, AddPositionIdNegative) {
  const std::vector<std::int64_t> ids = {4, -5};
  std::vector<float> x(2 * 4);
  ExpectInvalid(
      [&] {
        AddSinusoidal(Dim(4), TensorView::Contiguous(x.data(), DType::kFloat32, {1, 2, 4}),
                      Positions::Ids(ids.data(), 2));
      },
      {"positions[1]: got -5"});
}
TEST(SinusoidalErrors, AddDimMismatch) {
  std::vector<float> x(2 * 4);
  ExpectInvalid(
      [&] {
        AddSinusoidal(Dim(6), TensorView::Contiguous(x.data(), DType::kFloat32, {1, 2, 4}),
                      Positions::Offset(0));
      },
      {"x.shape[2]: got 4"});
}
TEST(SinusoidalErrors, AddIdCountMismatch) {
  const std::vector<std::int64_t> ids = {1, 2, 3};
  std::vector<float> x(2 * 2 * 4);
  ExpectInvalid(
      [&] {
        AddSinusoidal(Dim(4), TensorView::Contiguous(x.data(), DType::kFloat32, {2, 2, 4}),
                      Positions::Ids(ids.data(), 3));
      },
      {"positions.count: got 3"});
}
TEST(SinusoidalErrors, UnknownLayoutName) {
  ExpectInvalid([] { ParseSinusoidalLayout("rotary"); },
                {"layout: got rotary", "interleaved, split, split_t2t"});
}

}  // namespace
}  // namespace posenc::test
