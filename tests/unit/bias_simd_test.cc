// The SIMD ALiBi and T5 bias kernels (src/kernels/simd/bias*) on every
// Highway target compiled in and supported by this CPU, against the scalar
// reference (Backend::kScalar). Both biases are exact functions of the same
// float64/float32 operations, so every comparison is bit for bit (memcmp):
// every dtype, both ALiBi forms, both T5 directions, query offsets and ids,
// 1 / 7 / 217 / 4099 columns, positions up to 2^24 - 1, strided rows, 1 and
// 2 threads. T5 buckets are also checked densely and around the bucket
// boundaries against T5Bucketer (the vector log path with its scalar
// fallback, kernels/simd/bias.h).
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/simd/bias.h"
#include "posenc/alibi.h"
#include "posenc/context.h"
#include "posenc/error.h"
#include "posenc/t5.h"
#include "simd_target_fixture.h"
#include "test_util.h"

namespace posenc {
namespace {

class BiasSimd : public test::PerSimdTarget {};

constexpr DType kDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kFloat16};

// Fills a buffer with a byte pattern so that unwritten cells are visible.
std::vector<unsigned char> Filled(std::size_t bytes) {
  return std::vector<unsigned char>(bytes, 0xA5);
}

// Fails with the first differing element (as double) when a != b.
void ExpectSameBytes(const std::vector<unsigned char>& fast, const std::vector<unsigned char>& ref,
                     DType dtype, const std::string& what) {
  ASSERT_EQ(fast.size(), ref.size());
  if (std::memcmp(fast.data(), ref.data(), fast.size()) == 0) return;
  const std::size_t es = DTypeSize(dtype);
  for (std::size_t i = 0; i < fast.size() / es; ++i) {
    if (std::memcmp(fast.data() + i * es, ref.data() + i * es, es) != 0) {
      FAIL() << what << ": element " << i << " simd "
             << LoadAsDouble(fast.data(), dtype, static_cast<std::int64_t>(i)) << " scalar "
             << LoadAsDouble(ref.data(), dtype, static_cast<std::int64_t>(i));
    }
  }
}

std::vector<double> TestSlopes(std::int64_t heads) {
  std::vector<double> s =
      AlibiSlopes(AlibiParams{heads, 8.0, AlibiSlopeConvention::kReference, {}});
  if (heads >= 3) {
    s[1] = 0.0;        // an unbiased head (x-transformers)
    s[2] = 0.1234567;  // a slope whose products round in every dtype
  }
  if (heads >= 4) s[3] = 1e38;  // -slope*d overflows float32 (-inf) from d = 4 on
  return s;
}

struct Geometry {
  std::int64_t sq, sk;
};

TEST_P(BiasSimd, AlibiMatrixBitIdenticalToScalar) {
  const std::vector<Geometry> shapes = {{1, 1}, {1, 7}, {7, 7}, {5, 217}, {217, 217}, {3, 4099}};
  const std::vector<double> slopes = TestSlopes(4);
  const std::int64_t h = 4;
  for (const DType dtype : kDTypes) {
    for (const AlibiForm form : {AlibiForm::kCausal, AlibiForm::kSymmetric}) {
      for (const Geometry& g : shapes) {
        // Rows padded by 5 elements: the kernels must leave the padding alone.
        const std::int64_t ld = g.sk + 5;
        const std::size_t bytes = static_cast<std::size_t>(h * g.sq * ld) * DTypeSize(dtype);
        std::vector<unsigned char> fast = Filled(bytes), ref = Filled(bytes);
        const AlibiGeometry geo{g.sq, g.sk, form};
        auto view = [&](std::vector<unsigned char>& b) {
          return TensorView::Strided(b.data(), dtype, {h, g.sq, g.sk}, {g.sq * ld, ld, 1});
        };
        AlibiBiasMatrix(slopes, geo, view(fast), Context(2, Backend::kSimd));
        AlibiBiasMatrix(slopes, geo, view(ref), Context(1, Backend::kScalar));
        ExpectSameBytes(fast, ref, dtype,
                        std::string(DTypeName(dtype)) + " " + std::string(AlibiFormName(form)) +
                            " " + std::to_string(g.sq) + "x" + std::to_string(g.sk));
      }
    }
  }
}

TEST_P(BiasSimd, AlibiTilesAtTheEndOfTheRangeBitIdentical) {
  // Geometry of the longest context: 2^24 queries and keys; tiles at the
  // corners and straddling the diagonal, odd sizes.
  const std::int64_t n = kMaxPosition + 1;
  const std::vector<double> slopes = TestSlopes(4);
  const std::vector<AlibiTile> tiles = {{0, n - 7, n, n - 4099, n},
                                        {2, n - 217, n - 210, n - 300, n - 83},
                                        {3, 0, 7, 0, 217},
                                        {1, n - 1, n, 0, 4099},
                                        {2, 1000, 1001, n - 1, n}};
  for (const DType dtype : kDTypes) {
    for (const AlibiForm form : {AlibiForm::kCausal, AlibiForm::kSymmetric}) {
      for (const AlibiTile& t : tiles) {
        const std::int64_t rows = t.row_end - t.row_begin, cols = t.col_end - t.col_begin;
        const std::size_t bytes = static_cast<std::size_t>(rows * cols) * DTypeSize(dtype);
        std::vector<unsigned char> fast = Filled(bytes), ref = Filled(bytes);
        const AlibiGeometry geo{n, n, form};
        AlibiBiasTile(slopes, geo, t, TensorView::Contiguous(fast.data(), dtype, {rows, cols}),
                      Context(1, Backend::kSimd));
        AlibiBiasTile(slopes, geo, t, TensorView::Contiguous(ref.data(), dtype, {rows, cols}),
                      Context(1, Backend::kScalar));
        ExpectSameBytes(fast, ref, dtype,
                        std::string(DTypeName(dtype)) + " " + std::string(AlibiFormName(form)) +
                            " tile rows " + std::to_string(t.row_begin) + " cols " +
                            std::to_string(t.col_begin));
      }
    }
  }
}

TEST_P(BiasSimd, AlibiBloomSlopesFloat32MatchTheScalarValues) {
  // Bloom's float32 slopes with the float32 output of Bloom: every value is
  // float32(-slope * d) with d exact, spot-checked against the formula.
  const std::vector<double> slopes =
      AlibiSlopes(AlibiParams{12, 8.0, AlibiSlopeConvention::kBloomFloat32, {}});
  const AlibiGeometry geo{9, 300, AlibiForm::kCausal};
  std::vector<float> out(12 * 9 * 300);
  AlibiBiasMatrix(slopes, geo, TensorView::Contiguous(out.data(), DType::kFloat32, {12, 9, 300}),
                  Context(2, Backend::kSimd));
  for (std::int64_t h = 0; h < 12; ++h) {
    for (std::int64_t i = 0; i < 9; ++i) {
      for (std::int64_t j = 0; j < 300; ++j) {
        const float got = out[static_cast<std::size_t>((h * 9 + i) * 300 + j)];
        const std::int64_t q = 291 + i;
        const float want = j > q ? -INFINITY
                                 : static_cast<float>(0.0 - slopes[static_cast<std::size_t>(h)] *
                                                                static_cast<double>(q - j));
        ASSERT_EQ(got, want) << h << " " << i << " " << j;
        if (j == q) {
          ASSERT_FALSE(std::signbit(got));  // +0 on the diagonal
        }
      }
    }
  }
}

T5BucketParams P(std::int64_t nb, std::int64_t md, T5Direction dir) { return {nb, md, dir}; }

const std::vector<T5BucketParams>& BucketCases() {
  static const std::vector<T5BucketParams> cases = {
      P(32, 128, T5Direction::kBidirectional),  // T5 encoder
      P(32, 128, T5Direction::kCausal),         // T5 decoder
      P(4, 3, T5Direction::kBidirectional),     // smallest bidirectional
      P(2, 2, T5Direction::kCausal),            // smallest causal
      P(320, 1000, T5Direction::kBidirectional),
      P(64, 1 << 24, T5Direction::kCausal),  // log range up to 2^24
      P(1 << 12, 5000, T5Direction::kBidirectional)};
  return cases;
}

kernels::simd::T5BucketSpec KernelBucketSpec(const T5Bucketer& b) {
  kernels::simd::T5BucketSpec s;
  s.sign = b.params().direction == T5Direction::kBidirectional
               ? kernels::simd::T5Sign::kBidirectional
               : kernels::simd::T5Sign::kCausal;
  s.nb = b.half_buckets();
  s.max_exact = b.max_exact();
  s.log_denominator = b.log_denominator();
  s.scalar_bucket = [](const void* p, std::int64_t rel) {
    return static_cast<const T5Bucketer*>(p)->Bucket(rel);
  };
  s.bucketer = &b;
  return s;
}

void ExpectBucketsMatch(const T5Bucketer& b, std::int64_t first, std::int64_t count) {
  std::vector<std::int32_t> fast(static_cast<std::size_t>(count));
  kernels::simd::T5BucketRange(KernelBucketSpec(b), first, count, fast.data());
  for (std::int64_t i = 0; i < count; ++i) {
    ASSERT_EQ(fast[static_cast<std::size_t>(i)], b.Bucket(first + i))
        << T5DirectionName(b.params().direction) << " nb=" << b.params().num_buckets
        << " md=" << b.params().max_distance << " rel=" << first + i;
  }
}

TEST_P(BiasSimd, T5BucketsEqualTheReferenceDenselyAndAtTheEnds) {
  for (const T5BucketParams& p : BucketCases()) {
    const T5Bucketer b(p);
    ExpectBucketsMatch(b, -20000, 40001);
    ExpectBucketsMatch(b, -kMaxPosition, 4099);
    ExpectBucketsMatch(b, kMaxPosition - 4098, 4099);
    // Windows spread over the whole range.
    for (std::int64_t w = 1; w < 24; ++w)
      ExpectBucketsMatch(b, -(std::int64_t{1} << w) * 997 % kMaxPosition, 257);
  }
}

TEST_P(BiasSimd, T5BucketsEqualTheReferenceAtEveryBoundary) {
  // Every n where the log branch changes bucket (found with the reference),
  // +-4 around it, both signs: where a 1-ulp log difference would show.
  for (const T5BucketParams& p : BucketCases()) {
    const T5Bucketer b(p);
    std::int64_t prev = b.Bucket(-b.max_exact());
    std::int64_t n = b.max_exact() + 1, checked = 0;
    while (n <= kMaxPosition && checked < 200) {
      const std::int64_t cur = b.Bucket(-n);
      if (cur != prev) {
        ExpectBucketsMatch(b, -n - 4, 9);
        ExpectBucketsMatch(b, n - 4, 9);
        ++checked;
        prev = cur;
      }
      // Dense near the exact range, geometric steps further out (bisected).
      const std::int64_t step = std::max<std::int64_t>(1, n / 4096);
      if (step > 1 && b.Bucket(-(n + step)) != cur) {
        std::int64_t lo = n, hi = n + step;  // bucket(lo) == cur != bucket(hi)
        while (hi - lo > 1) {
          const std::int64_t mid = (lo + hi) / 2;
          (b.Bucket(-mid) == cur ? lo : hi) = mid;
        }
        n = hi;
      } else {
        n += step;
      }
    }
    // nb - 1 - max_exact == 0 leaves the log branch a single bucket.
    if (b.half_buckets() - 1 - b.max_exact() > 0) {
      EXPECT_GT(checked, 0);
    }
  }
}

TEST_P(BiasSimd, T5FallbackIsRareAndExercised) {
  // n = 16 (ratio 2 for max_exact 8) gives ln 2 / ln 16 * 8 == 2 up to
  // rounding: a lane on a bucket boundary, which the vector path must hand
  // to the reference. Elsewhere fallbacks are rare.
  const T5Bucketer b(P(32, 128, T5Direction::kBidirectional));
  const auto spec = KernelBucketSpec(b);
  EXPECT_EQ(kernels::simd::T5BucketFallbacks(spec, -16, 1), 1);
  EXPECT_EQ(kernels::simd::T5BucketFallbacks(spec, 16, 1), 1);
  EXPECT_LT(kernels::simd::T5BucketFallbacks(spec, -30000, 60001), 600);
}

struct T5Case {
  std::int64_t sq, sk;
  std::int64_t offset;  // -1: random ids
};

TEST_P(BiasSimd, T5FillBiasBitIdenticalToScalar) {
  const std::vector<T5Case> cases = {{1, 1, 0},
                                     {1, 7, 6},
                                     {7, 217, 210},
                                     {217, 7, 0},
                                     {3, 4099, 4096},
                                     {40, 33, -1},
                                     {5, 300, kMaxPosition - 4}};
  for (const T5Direction dir : {T5Direction::kBidirectional, T5Direction::kCausal}) {
    T5BiasTable table(P(32, 128, dir), 5);
    table.InitNormal(7, 1.0);
    for (const DType dtype : kDTypes) {
      for (const T5Case& c : cases) {
        std::vector<std::int64_t> ids;
        if (c.offset < 0) {
          // Runs of consecutive ids broken by jumps, a repeat and 2^24 - 1.
          std::mt19937_64 rng(11);
          for (std::int64_t i = 0; i < c.sq; ++i) {
            ids.push_back(i % 9 == 0    ? static_cast<std::int64_t>(rng() % 5000)
                          : ids.empty() ? 0
                                        : ids.back() + 1);
          }
          ids[4] = ids[3];
          ids[20] = kMaxPosition;
        }
        const Positions pos =
            c.offset < 0 ? Positions::Ids(ids.data(), c.sq) : Positions::Offset(c.offset);
        const std::int64_t ld = c.sk + 3;
        const std::size_t bytes = static_cast<std::size_t>(5 * c.sq * ld) * DTypeSize(dtype);
        std::vector<unsigned char> fast = Filled(bytes), ref = Filled(bytes);
        auto view = [&](std::vector<unsigned char>& b) {
          return TensorView::Strided(b.data(), dtype, {5, c.sq, c.sk}, {c.sq * ld, ld, 1});
        };
        table.FillBias(pos, c.sq, c.sk, view(fast), Context(2, Backend::kSimd));
        table.FillBias(pos, c.sq, c.sk, view(ref), Context(1, Backend::kScalar));
        ExpectSameBytes(fast, ref, dtype,
                        std::string(T5DirectionName(dir)) + " " + std::string(DTypeName(dtype)) +
                            " " + std::to_string(c.sq) + "x" + std::to_string(c.sk) + " offset " +
                            std::to_string(c.offset));
      }
    }
  }
}

template <typename T>
void ExpectTileMatches(const T5BiasTable& table, const std::vector<std::int64_t>& qp,
                       const std::vector<std::int64_t>& kp, BiasWrite write,
                       const std::string& what) {
  const std::int64_t nq = static_cast<std::int64_t>(qp.size());
  const std::int64_t nk = static_cast<std::int64_t>(kp.size()), ld = nk + 2;
  std::vector<T> fast(static_cast<std::size_t>(nq * ld)), ref;
  for (std::size_t i = 0; i < fast.size(); ++i)
    fast[i] = static_cast<T>(0.01 * static_cast<double>(i % 97) - 0.3);
  ref = fast;
  for (std::int64_t h = 0; h < table.heads(); ++h) {
    table.BiasTile(h, qp.data(), nq, kp.data(), nk, fast.data(), ld, write, Backend::kSimd);
    table.BiasTile(h, qp.data(), nq, kp.data(), nk, ref.data(), ld, write, Backend::kScalar);
    ASSERT_EQ(std::memcmp(fast.data(), ref.data(), fast.size() * sizeof(T)), 0)
        << what << " head " << h;
  }
}

TEST_P(BiasSimd, T5BiasTileBitIdenticalToScalar) {
  std::vector<std::int64_t> consecutive_q(70), consecutive_k(217), wide_k(4099), scattered_k(217),
      mixed_q(50);
  const std::vector<std::int64_t> short_q = {9000, 9001, 9002, 5, 6};
  for (std::size_t i = 0; i < consecutive_q.size(); ++i)
    consecutive_q[i] = 4000 + static_cast<std::int64_t>(i);
  for (std::size_t i = 0; i < consecutive_k.size(); ++i)
    consecutive_k[i] = 3900 + static_cast<std::int64_t>(i);
  for (std::size_t i = 0; i < wide_k.size(); ++i) wide_k[i] = static_cast<std::int64_t>(i);
  std::mt19937_64 rng(3);
  for (auto& k : scattered_k) k = static_cast<std::int64_t>(rng() % (std::uint64_t{1} << 24));
  for (std::size_t i = 0; i < mixed_q.size(); ++i)
    mixed_q[i] =
        i % 7 == 0 ? static_cast<std::int64_t>(rng() % 9000) : static_cast<std::int64_t>(i);
  const std::vector<std::int64_t> end_q = {kMaxPosition - 2, kMaxPosition - 1, kMaxPosition};
  std::vector<std::int64_t> end_k(7);
  for (std::size_t i = 0; i < end_k.size(); ++i)
    end_k[i] = kMaxPosition - 6 + static_cast<std::int64_t>(i);
  for (const T5Direction dir : {T5Direction::kBidirectional, T5Direction::kCausal}) {
    T5BiasTable table(P(32, 128, dir), 3);
    table.InitNormal(5, 0.7);
    for (const BiasWrite write : {BiasWrite::kOverwrite, BiasWrite::kAdd}) {
      const std::string w =
          std::string(T5DirectionName(dir)) + " " + std::string(BiasWriteName(write));
      ExpectTileMatches<float>(table, consecutive_q, consecutive_k, write,
                               w + " float consecutive");
      ExpectTileMatches<double>(table, consecutive_q, consecutive_k, write,
                                w + " double consecutive");
      ExpectTileMatches<float>(table, short_q, wide_k, write, w + " float 4099 keys");
      ExpectTileMatches<float>(table, mixed_q, scattered_k, write, w + " float scattered");
      ExpectTileMatches<double>(table, mixed_q, scattered_k, write, w + " double scattered");
      ExpectTileMatches<float>(table, end_q, end_k, write, w + " float end of range");
      ExpectTileMatches<float>(table, {0}, {0}, write, w + " float 1x1");
      // Empty tiles write nothing (key_pos may then be null).
      std::vector<float> untouched(4, 3.0f);
      table.BiasTile(0, consecutive_q.data(), 2, nullptr, 0, untouched.data(), 2, write,
                     Backend::kSimd);
      table.BiasTile(0, nullptr, 0, consecutive_k.data(), 2, untouched.data(), 2, write,
                     Backend::kSimd);
      EXPECT_EQ(untouched, std::vector<float>(4, 3.0f));
    }
  }
}

TEST_P(BiasSimd, T5ScalarGatherForTablesBeyondInt32Offsets) {
  // Tables with >= 2^31 entries gather lane by lane (int32 offsets would
  // overflow). The kernel decides from spec.num_buckets * heads only, so a
  // spec claiming 2^30 rows over a real 32-row table takes that path while
  // every bucket it computes stays < 32.
  for (const DType dtype : kDTypes) {
    T5BiasTable table(P(32, 128, T5Direction::kBidirectional), 5);
    table.InitNormal(9, 1.0);
    kernels::simd::T5TableSpec spec;
    spec.buckets = KernelBucketSpec(table.bucketer());
    spec.table = table.data();
    spec.num_buckets = std::int64_t{1} << 30;
    spec.heads = 5;
    const std::int64_t sq = 70, sk = 217;
    const std::size_t bytes = static_cast<std::size_t>(5 * sq * sk) * DTypeSize(dtype);
    std::vector<unsigned char> fast = Filled(bytes), ref = Filled(bytes);
    kernels::simd::T5FillRows(spec, Positions::Offset(150), sq, sk, fast.data(), dtype, sq * sk, sk,
                              Context(2, Backend::kSimd));
    table.FillBias(Positions::Offset(150), sq, sk,
                   TensorView::Contiguous(ref.data(), dtype, {5, sq, sk}),
                   Context(1, Backend::kScalar));
    ExpectSameBytes(fast, ref, dtype,
                    std::string("scalar gather ") + std::string(DTypeName(dtype)));
  }
}

// Validation runs before routing: bad inputs throw with the SIMD backend too.
TEST_P(BiasSimd, SimdFillBiasRejectsWrongKeyLength) {
  std::vector<float> buf(64);
  const T5BiasTable table(P(32, 128, T5Direction::kBidirectional), 2);
  EXPECT_THROW(table.FillBias(Positions::Offset(0), 2, 4,
                              TensorView::Contiguous(buf.data(), DType::kFloat32, {2, 2, 5}),
                              Context(1, Backend::kSimd)),
               InvalidArgument);
}

TEST_P(BiasSimd, SimdFillBiasRejectsNegativeOffset) {
  std::vector<float> buf(64);
  const T5BiasTable table(P(32, 128, T5Direction::kBidirectional), 2);
  EXPECT_THROW(table.FillBias(Positions::Offset(-3), 2, 4,
                              TensorView::Contiguous(buf.data(), DType::kFloat32, {2, 2, 4}),
                              Context(1, Backend::kSimd)),
               InvalidArgument);
}

TEST_P(BiasSimd, SimdAlibiMatrixRejectsMoreQueriesThanKeys) {
  std::vector<float> buf(64);
  EXPECT_THROW(AlibiBiasMatrix({1.0, 0.5}, AlibiGeometry{3, 2, AlibiForm::kCausal},
                               TensorView::Contiguous(buf.data(), DType::kFloat32, {2, 3, 2}),
                               Context(1, Backend::kSimd)),
               InvalidArgument);
}

TEST_P(BiasSimd, SimdAlibiTileRejectsColumnsPastKeyLength) {
  std::vector<float> buf(64);
  EXPECT_THROW(
      AlibiBiasTile({1.0}, AlibiGeometry{4, 4, AlibiForm::kCausal}, AlibiTile{0, 0, 2, 0, 5},
                    TensorView::Contiguous(buf.data(), DType::kFloat32, {2, 5}),
                    Context(1, Backend::kSimd)),
      InvalidArgument);
}

POSENC_INSTANTIATE_PER_SIMD_TARGET(BiasSimd);

}  // namespace
}  // namespace posenc
