// The SIMD table kernels (sinusoidal tables, AddSinusoidal, RoPE cos/sin
// tables) and their float64 SinCos, on every Highway target compiled in and
// supported by this CPU: against long double truth (the documented bounds)
// and against the scalar reference, for positions up to 2^24 - 1.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include "kernels/simd/sinusoidal.h"
#include "kernels/simd/targets.h"
#include "posenc/context.h"
#include "posenc/rope.h"
#include "posenc/sinusoidal.h"
#include "simd_target_fixture.h"
#include "test_util.h"

namespace posenc {
namespace {

// Runs once per compiled Highway target (tests/unit/simd_target_fixture.h).
class SimdTables : public test::PerSimdTarget {};

std::vector<double> Read(const std::vector<unsigned char>& bytes, DType dtype) {
  std::vector<double> v(bytes.size() / DTypeSize(dtype));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = LoadAsDouble(bytes.data(), dtype, static_cast<std::int64_t>(i));
  return v;
}

TEST_P(SimdTables, SinCosWithin4e16OfTruth) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-5e7, 5e7);
  std::vector<double> a(4003);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = i < 1000 ? u(rng) * 1e-4 : u(rng);
  a[0] = 0.0;
  a[1] = static_cast<double>(kMaxPosition);
  a[2] = -static_cast<double>(kMaxPosition);
  a[3] = 0x1.921fb54442d18p+0;  // pi/2 (boundary of the first quadrant)
  a[4] = 3 * 0x1.921fb54442d18p-1;
  std::vector<double> s(a.size()), c(a.size());
  kernels::simd::SinCosBatch(a.data(), static_cast<std::int64_t>(a.size()), s.data(), c.data());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const long double x = a[i];
    worst = std::max(worst, static_cast<double>(std::fabs(s[i] - std::sin(x))));
    worst = std::max(worst, static_cast<double>(std::fabs(c[i] - std::cos(x))));
  }
  EXPECT_LT(worst, 4e-16);
}

struct TableCase {
  std::int64_t dim;
  SinusoidalLayout layout;
};

TEST_P(SimdTables, SinusoidalMatchesTruthAndScalar) {
  const std::vector<TableCase> cases = {{1, SinusoidalLayout::kInterleaved},
                                        {7, SinusoidalLayout::kInterleaved},
                                        {64, SinusoidalLayout::kInterleaved},
                                        {3, SinusoidalLayout::kSplit},
                                        {129, SinusoidalLayout::kSplit},
                                        {4, SinusoidalLayout::kSplitTensor2Tensor},
                                        {80, SinusoidalLayout::kSplitTensor2Tensor}};
  for (const TableCase& tc : cases) {
    for (const DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
      for (const std::int64_t rows : {1, 7, 217}) {
        for (const std::int64_t offset : {std::int64_t{0}, kMaxPosition + 1 - rows}) {
          const SinusoidalParams params{tc.dim, 10000.0, tc.layout};
          const std::size_t bytes = static_cast<std::size_t>(rows * tc.dim) * DTypeSize(dtype);
          std::vector<unsigned char> fast(bytes), ref(bytes);
          SinusoidalTable(params, offset, rows,
                          TensorView::Contiguous(fast.data(), dtype, {rows, tc.dim}),
                          Context(1, Backend::kSimd));
          SinusoidalTable(params, offset, rows,
                          TensorView::Contiguous(ref.data(), dtype, {rows, tc.dim}),
                          Context(1, Backend::kScalar));
          const std::vector<double> f = Read(fast, dtype), r = Read(ref, dtype);
          const std::vector<double> inv = SinusoidalInvFreq(params);
          const std::int64_t ns = static_cast<std::int64_t>(inv.size());
          const std::string what = std::to_string(tc.dim) + " " +
                                   std::string(SinusoidalLayoutName(tc.layout)) + " " +
                                   std::string(DTypeName(dtype)) + " rows " + std::to_string(rows) +
                                   " offset " + std::to_string(offset);
          for (std::int64_t row = 0; row < rows; ++row) {
            const long double p = static_cast<long double>(offset + row);
            for (std::int64_t col = 0; col < tc.dim; ++col) {
              const bool inter = tc.layout == SinusoidalLayout::kInterleaved;
              const bool is_cos = inter ? col % 2 == 1 : col >= ns;
              const std::int64_t i = inter ? col / 2 : (is_cos ? col - ns : col);
              const long double angle =
                  p * static_cast<long double>(inv[static_cast<std::size_t>(i)]);
              const double truth = static_cast<double>(is_cos ? std::cos(angle) : std::sin(angle));
              const std::size_t k = static_cast<std::size_t>(row * tc.dim + col);
              // Rounded once: half an ulp of the dtype (<= Eps) plus the float64
              // angle's rounding (<= 2^-29 rad).
              ASSERT_LE(std::fabs(f[k] - truth), test::Eps(dtype) + 1e-8)
                  << what << " at " << row << "," << col;
              // The scalar reference rounds the same float64 value: at most
              // one ulp apart (a tie flipped by ~1e-15).
              ASSERT_LE(std::fabs(f[k] - r[k]), 2 * test::Eps(dtype))
                  << what << " at " << row << "," << col;
            }
          }
        }
      }
    }
  }
}

TEST_P(SimdTables, SinusoidalAtIdsAndStridedRows) {
  const SinusoidalParams params{96, 500.0, SinusoidalLayout::kSplit};
  std::vector<std::int64_t> ids = {kMaxPosition, 0, 5, 4, 3, 1 << 20, 77777, 12};
  const std::int64_t n = static_cast<std::int64_t>(ids.size());
  // Rows padded to 100 columns: the kernel must not touch columns 96..99.
  std::vector<float> fast(static_cast<std::size_t>(n * 100), -7.0f), ref(fast.size(), -7.0f);
  SinusoidalTableAt(params, ids.data(), n,
                    TensorView::Strided(fast.data(), DType::kFloat32, {n, 96}, {100, 1}),
                    Context(2, Backend::kSimd));
  SinusoidalTableAt(params, ids.data(), n,
                    TensorView::Strided(ref.data(), DType::kFloat32, {n, 96}, {100, 1}),
                    Context(1, Backend::kScalar));
  for (std::size_t i = 0; i < fast.size(); ++i) {
    if (i % 100 >= 96) {
      ASSERT_EQ(fast[i], -7.0f) << "padding column written at " << i;
    } else {
      ASSERT_LE(std::fabs(fast[i] - ref[i]), 2 * test::Eps(DType::kFloat32)) << i;
    }
  }
}

TEST_P(SimdTables, AddSinusoidalMatchesScalar) {
  const SinusoidalParams params{130, 10000.0, SinusoidalLayout::kInterleaved};
  const std::int64_t batch = 2, seq = 70;
  std::vector<std::int64_t> ids(static_cast<std::size_t>(batch * seq));
  for (std::size_t i = 0; i < ids.size(); ++i)
    ids[i] = i < 40 ? 1000 + static_cast<std::int64_t>(i)
                    : static_cast<std::int64_t>(i * 9973 % (1 << 24));
  for (const DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    const std::size_t bytes = static_cast<std::size_t>(batch * seq * 130) * DTypeSize(dtype);
    std::vector<unsigned char> fast(bytes), ref;
    for (std::int64_t i = 0; i < batch * seq * 130; ++i)
      StoreFromDouble(fast.data(), dtype, i, std::cos(0.37 * static_cast<double>(i)));
    ref = fast;
    const Positions pos = Positions::Ids(ids.data(), batch * seq);
    AddSinusoidal(params, TensorView::Contiguous(fast.data(), dtype, {batch, seq, 130}), pos,
                  Context(1, Backend::kSimd));
    AddSinusoidal(params, TensorView::Contiguous(ref.data(), dtype, {batch, seq, 130}), pos,
                  Context(1, Backend::kScalar));
    const std::vector<double> f = Read(fast, dtype), r = Read(ref, dtype);
    for (std::size_t i = 0; i < f.size(); ++i) {
      ASSERT_LE(std::fabs(f[i] - r[i]), 4 * test::Eps(dtype)) << DTypeName(dtype) << " at " << i;
    }
  }
}

TEST_P(SimdTables, RopeCosSinWithinDocumentedBound) {
  for (const RopePairing pairing : {RopePairing::kHalfSplit, RopePairing::kInterleaved}) {
    for (const std::int64_t rd : {2, 24, 128}) {
      RopeParams params;
      params.head_dim = rd;
      params.pairing = pairing;
      params.frequencies.attention_factor = 0.75;
      const std::vector<double> inv = ResolveRopeFrequencies(params).inv_freq;
      std::vector<std::int64_t> ids = {kMaxPosition, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 123456, 99};
      const std::int64_t n = static_cast<std::int64_t>(ids.size());
      for (const bool use_ids : {true, false}) {
        const Positions pos =
            use_ids ? Positions::Ids(ids.data(), n) : Positions::Offset(kMaxPosition + 1 - n);
        std::vector<float> c(static_cast<std::size_t>(n * rd)), s(c.size());
        RopeCosSin(params, pos, n, TensorView::Contiguous(c.data(), DType::kFloat32, {n, rd}),
                   TensorView::Contiguous(s.data(), DType::kFloat32, {n, rd}),
                   Context(1, Backend::kSimd));
        for (std::int64_t r = 0; r < n; ++r) {
          const long double p = static_cast<long double>(pos.At(0, r, n));
          for (std::int64_t col = 0; col < rd; ++col) {
            const std::int64_t j = pairing == RopePairing::kHalfSplit ? col % (rd / 2) : col / 2;
            const long double angle =
                p * static_cast<long double>(inv[static_cast<std::size_t>(j)]);
            const std::size_t k = static_cast<std::size_t>(r * rd + col);
            ASSERT_LE(std::fabs(c[k] - 0.75L * std::cos(angle)), std::ldexp(1.0, -24) + 1e-8)
                << r << "," << col;
            ASSERT_LE(std::fabs(s[k] - 0.75L * std::sin(angle)), std::ldexp(1.0, -24) + 1e-8)
                << r << "," << col;
          }
        }
        // 16-bit outputs: within one ulp of the scalar reference.
        for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
          const std::size_t bytes = static_cast<std::size_t>(n * rd) * 2;
          std::vector<unsigned char> fc(bytes), fs(bytes), rc(bytes), rs(bytes);
          RopeCosSin(params, pos, n, TensorView::Contiguous(fc.data(), dtype, {n, rd}),
                     TensorView::Contiguous(fs.data(), dtype, {n, rd}), Context(1, Backend::kSimd));
          RopeCosSin(params, pos, n, TensorView::Contiguous(rc.data(), dtype, {n, rd}),
                     TensorView::Contiguous(rs.data(), dtype, {n, rd}),
                     Context(1, Backend::kScalar));
          const std::vector<double> a = Read(fc, dtype), b = Read(rc, dtype), x = Read(fs, dtype),
                                    y = Read(rs, dtype);
          for (std::size_t i = 0; i < a.size(); ++i) {
            ASSERT_LE(std::fabs(a[i] - b[i]), 2 * test::Eps(dtype))
                << DTypeName(dtype) << " cos " << i;
            ASSERT_LE(std::fabs(x[i] - y[i]), 2 * test::Eps(dtype))
                << DTypeName(dtype) << " sin " << i;
          }
        }
      }
    }
  }
}

POSENC_INSTANTIATE_PER_SIMD_TARGET(SimdTables);

}  // namespace
}  // namespace posenc
