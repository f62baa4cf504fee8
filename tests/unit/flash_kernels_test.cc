// The tile kernels of the fused attention (kernels/simd/flash.h) added for
// the backward, decode and 16-bit paths, against float64 loops with
// FlashAttention's 2x rule (error <= 2x a plain float32 loop's error + a
// rounding floor), on every compiled Highway target:
//  - FlashAccumulatePTV (dV += P^T dO, dK += dS^T Q), FlashBackwardRow (P,
//    dS), FlashDecodeLogits (key rows, transposing lane sums), FlashLoadRows
//    (exact 16-bit conversions), FlashStoreRows (bfloat16 bits as
//    FloatToBF16, with and without VCVTNEPS2BF16), FlashRowDotsF64 and
//    FlashLogSumExp (the scalar reference's bits), FlashAccumulatePVStored (equal to the
//    float32-row kernel on converted rows), FlashTouch (reads every byte),
//    the narrow rows' blocks of P . V and P^T V, FlashTileLogitsCols (the
//    bands of a diagonal tile), FlashRoundRowsBf16 (as FloatToBF16),
//    FlashTransposeTile (every value moved, padding zeroed);
//  - the bfloat16 logits on each hardware path the CPU has: AVX512_BF16
//    (FlashTileLogitsAvx512Bf16) and AMX (FlashTileLogitsAmx, after the
//    Linux permission request); a path the CPU lacks is skipped with the
//    reason printed;
//  - the compute ceilings (posenc/bandwidth.h) and the read kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "flash_kernels_fixture.h"
#include "kernels/float_mode.h"
#include "kernels/scalar/flash.h"
#include "kernels/simd/flash.h"
#include "kernels/simd/x86_features.h"
#include "posenc/bandwidth.h"
#include "posenc/dtype.h"
#include "posenc/error.h"
#include "simd_target_fixture.h"

namespace posenc {
namespace {

using test::Bf16Tile;
using test::ExpectWithin2x;
using test::Index;
using test::Random;
namespace ks = kernels::simd;

using test::StoredValues;

class FlashKernelTarget : public test::PerSimdTarget {};

TEST_P(FlashKernelTarget, TransposedAccumulation) {
  // ldv 32: the narrow rows' 8 x 2 blocks on AVX-512 (29 keys: 8-row blocks,
  // then 4 and 1); 80: the wide blocks.
  for (const Index ldv : {80, 32}) {
    const Index nq = 37, nk = 29, ldp = 48;
    const std::vector<float> p = Random(nq * ldp, 1), v = Random(nq * ldv, 2);
    std::vector<float> acc0 = Random(nk * ldv, 3), fast = acc0, plain = acc0;
    std::vector<double> exact(acc0.begin(), acc0.end());
    ks::FlashAccumulatePTV(p.data(), ldp, v.data(), nq, nk, ldv, fast.data());
    for (Index j = 0; j < nk; ++j)
      for (Index x = 0; x < ldv; ++x)
        for (Index i = 0; i < nq; ++i) {
          plain[j * ldv + x] += p[i * ldp + j] * v[i * ldv + x];
          exact[j * ldv + x] += double(p[i * ldp + j]) * v[i * ldv + x];
        }
    SCOPED_TRACE(ldv);
    ExpectWithin2x(fast, plain, exact, "P^T V");
  }
}

TEST_P(FlashKernelTarget, ScaledPVOnNarrowRows) {
  // acc = alpha * acc + P . V with 32-float rows (8 x 2 blocks on AVX-512)
  // over 21 rows: 8-row blocks, then 4 and 1.
  const Index nq = 21, nk = 27, ldp = 32, ldv = 32;
  const std::vector<float> p = Random(nq * ldp, 4), v = Random(nk * ldv, 5);
  const std::vector<float> alpha = Random(nq, 6, 0.0f, 1.0f);
  std::vector<float> acc0 = Random(nq * ldv, 7), fast = acc0, plain = acc0;
  std::vector<double> exact(acc0.begin(), acc0.end());
  ks::FlashAccumulatePVScaled(p.data(), ldp, v.data(), nq, nk, ldv, alpha.data(), fast.data());
  for (Index i = 0; i < nq; ++i)
    for (Index x = 0; x < ldv; ++x) {
      plain[i * ldv + x] *= alpha[i];
      exact[i * ldv + x] *= alpha[i];
      for (Index j = 0; j < nk; ++j) {
        plain[i * ldv + x] += p[i * ldp + j] * v[j * ldv + x];
        exact[i * ldv + x] += double(p[i * ldp + j]) * v[j * ldv + x];
      }
    }
  ExpectWithin2x(fast, plain, exact, "alpha acc + P V");
}

TEST_P(FlashKernelTarget, TileLogitsColsWritesItsColumnsOnly) {
  // Each band width of a 64-key diagonal tile: the columns below cols have
  // the bits of the whole-tile kernel (same sums in the same order), the
  // rest keep their old values.
  const Index nq = 19, dim = 32, ld = 64;
  const std::vector<float> q = Random(nq * dim, 8), kt = Random(dim * ld, 9);
  std::vector<float> whole(nq * ld);
  ks::FlashTileLogits(q.data(), dim, kt.data(), nq, dim, ld, whole.data());
  for (const Index cols : {16, 32, 48, 64}) {
    std::vector<float> s(nq * ld, -5.0f);
    ks::FlashTileLogitsCols(q.data(), dim, kt.data(), nq, dim, ld, cols, s.data());
    for (Index i = 0; i < nq; ++i)
      for (Index j = 0; j < ld; ++j) {
        const float want = j < cols ? whole[i * ld + j] : -5.0f;
        ASSERT_EQ(s[i * ld + j], want) << cols << ": " << i << ", " << j;
      }
  }
}

TEST_P(FlashKernelTarget, RoundRowsBf16AsFloatToBF16) {
  // The table of StoreRowsRoundsAsFloatToBF16 (ties to even, signed zeros,
  // infinities, NaNs, subnormals, overflow to inf) and random values, into a
  // second buffer and in place; columns past n stay as they were.
  std::vector<float> x = {1.0f + 0x1p-8f, 1.0f + 0x3p-8f, -0.0f,   0.0f,    INFINITY,
                          -INFINITY,      1e-40f,         -3e-39f, 3.4e38f, -3.4e38f};
  for (std::uint32_t bits : {0x7fc00001u, 0xff800001u, 0x7f800100u}) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    x.push_back(f);
  }
  const Index rows = 3, n = 32, ld = 40;
  const std::vector<float> random = Random(rows * ld, 12, -300.0f, 300.0f);
  x.insert(x.end(), random.begin(), random.begin() + (rows * ld - static_cast<Index>(x.size())));
  std::vector<float> out(rows * ld, -7.0f), in_place = x;
  ks::FlashRoundRowsBf16(x.data(), ld, rows, n, out.data());
  ks::FlashRoundRowsBf16(in_place.data(), ld, rows, n, in_place.data());
  for (Index r = 0; r < rows; ++r)
    for (Index c = 0; c < ld; ++c) {
      const std::size_t o = static_cast<std::size_t>(r * ld + c);
      if (c >= n) {
        ASSERT_EQ(out[o], -7.0f) << r << ", " << c;
        ASSERT_EQ(std::memcmp(&in_place[o], &x[o], sizeof(float)), 0) << r << ", " << c;
        continue;
      }
      const std::uint32_t want = std::uint32_t{FloatToBF16(x[o]).bits} << 16;
      std::uint32_t got, got_in_place;
      std::memcpy(&got, &out[o], sizeof got);
      std::memcpy(&got_in_place, &in_place[o], sizeof got);
      ASSERT_EQ(got, want) << r << ", " << c << ": " << x[o];
      ASSERT_EQ(got_in_place, want) << r << ", " << c;
    }
}

TEST_P(FlashKernelTarget, TransposeTileMovesEveryValue) {
  // Odd and whole 4 x 4 blocks on both axes (edges of one value), an empty
  // tile, signed zeros and NaN payloads moved bit for bit; [n, ldk) zeroed
  // in each of the dim rows, the guard row after them untouched.
  for (const Index n : {0, 1, 3, 4, 5, 16, 17, 35, 64, 67, 128})
    for (const Index dim : {1, 3, 4, 6, 16, 32, 33, 64, 70}) {
      const Index ld_rows = dim + 3, ldk = (n + 15) / 16 * 16 + 16;
      std::vector<float> rows = Random(std::max<Index>(n, 1) * ld_rows, 20, -5.0f, 5.0f);
      rows[0] = -0.0f;
      const std::uint32_t nan_bits = 0x7fc01234u;
      if (rows.size() > 2) std::memcpy(&rows[2], &nan_bits, sizeof nan_bits);
      std::vector<float> dst((dim + 1) * ldk, 7.0f);
      ks::FlashTransposeTile(rows.data(), n, dim, ld_rows, dst.data(), ldk);
      for (Index x = 0; x <= dim; ++x)
        for (Index j = 0; j < ldk; ++j) {
          const float got = dst[static_cast<std::size_t>(x * ldk + j)];
          const float want = x == dim ? 7.0f
                             : j < n  ? rows[static_cast<std::size_t>(j * ld_rows + x)]
                                      : 0.0f;
          ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0)
              << "n " << n << " dim " << dim << " x " << x << " j " << j;
        }
    }
}

TEST_P(FlashKernelTarget, BackwardRowGivesProbabilitiesAndDs) {
  const Index nk = 45, ld = 48;
  std::vector<float> s = Random(ld, 4, -3.0f, 3.0f), dp = Random(ld, 5), bias = Random(ld, 6);
  bias[7] = -INFINITY;  // a masked pair
  const float scale = 0.37f, lse = 2.5f, delta = 0.125f;
  std::vector<float> fs = s, fdp = dp, ps(ld), pdp(ld);
  std::vector<double> es(ld), edp(ld);
  ks::FlashBackwardRow(fs.data(), fdp.data(), nk, ld, scale, bias.data(), lse, delta);
  for (Index j = 0; j < ld; ++j) {
    const bool on = j < nk && bias[j] != -INFINITY;
    const double x = double(s[j]) * scale + bias[j];
    es[j] = on ? std::exp(x - lse) : 0.0;
    edp[j] = es[j] * (dp[j] - double(delta));
    ps[j] = on ? std::exp(s[j] * scale + bias[j] - lse) : 0.0f;
    pdp[j] = ps[j] * (dp[j] - delta);
  }
  EXPECT_EQ(fs[7], 0.0f);
  EXPECT_EQ(fdp[7], 0.0f);
  for (Index j = nk; j < ld; ++j) EXPECT_EQ(fs[j], 0.0f);
  ExpectWithin2x(fs, ps, es, "P");
  ExpectWithin2x(fdp, pdp, edp, "dS");
}

TEST_P(FlashKernelTarget, DecodeLogitsFromKeyRows) {
  const Index rows = 5, nk = 27, dim = 48, ldk = 64, lds = 32;
  const std::vector<float> q = Random(rows * dim, 7), k = Random(32 * ldk, 8);
  std::vector<float> fast(rows * lds, NAN), plain(rows * lds);
  std::vector<double> exact(rows * lds);
  ks::FlashDecodeLogits(q.data(), dim, rows, k.data(), ldk, nk, dim, fast.data(), lds);
  for (Index r = 0; r < rows; ++r)
    for (Index j = 0; j < nk; ++j) {
      const test::DotRef dot = test::Dot(&q[r * dim], &k[j * ldk], dim);
      plain[r * lds + j] = dot.plain;
      exact[r * lds + j] = dot.exact;
    }
  for (Index r = 0; r < rows; ++r)
    for (Index j = nk; j < lds; ++j) fast[r * lds + j] = plain[r * lds + j] = 0;  // unspecified
  ExpectWithin2x(fast, plain, exact, "decode logits");
}

TEST_P(FlashKernelTarget, LoadRowsConvertsExactly) {
  // A tail and padding (dim 37, ld 48), and rows of exactly 1, 2, 3, 4 and 8
  // vectors of 16 floats with ld == dim (the unrolled rows of head dims 16 to
  // 128), strided like the rows of one head in [B, S, H, D].
  const Index n = 5;
  for (const auto& [dim, ld] :
       {std::pair<Index, Index>{37, 48}, {16, 16}, {32, 32}, {48, 48}, {64, 64}, {128, 128}}) {
    const Index stride = dim + 11;
    const StoredValues x(Random(n * stride, 9, -300.0f, 300.0f));
    std::vector<float> out(n * ld + 1, NAN);
    for (const auto storage :
         {ks::FlashStorage::kFloat32, ks::FlashStorage::kBFloat16, ks::FlashStorage::kFloat16}) {
      ks::FlashLoadRows(storage, x.At(storage), stride, n, dim, out.data(), ld);
      for (Index r = 0; r < n; ++r) {
        for (Index c = 0; c < dim; ++c) {
          const float want = x.Value(storage, static_cast<std::size_t>(r * stride + c));
          ASSERT_EQ(out[r * ld + c], want) << dim << ": " << r << ", " << c;
        }
        for (Index c = dim; c < ld; ++c) ASSERT_EQ(out[r * ld + c], 0.0f);
      }
      ASSERT_TRUE(std::isnan(out[n * ld])) << dim;  // nothing written past the last row
    }
  }
}
TEST_P(FlashKernelTarget, StoreRowsRoundsAsFloatToBF16) {
  // The table: ties to even (1 + 2^-8, 1 + 3 * 2^-8), signed zeros,
  // infinities, quiet and signalling NaNs with a sign, subnormals, the
  // largest float (rounds to inf); then random values. dim 37: a tail on
  // every target; the row stride leaves gaps that must stay untouched.
  std::vector<float> x = {1.0f + 0x1p-8f, 1.0f + 0x3p-8f, -0.0f,   0.0f,    INFINITY,
                          -INFINITY,      1e-40f,         -3e-39f, 3.4e38f, -3.4e38f};
  std::uint32_t nan_bits[] = {0x7fc00001u, 0xff800001u, 0x7f800100u};
  for (std::uint32_t bits : nan_bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    x.push_back(f);
  }
  const Index n = 3, dim = 37, ld = 40, stride = 41;
  const std::vector<float> random = Random(n * ld, 11, -300.0f, 300.0f);
  x.insert(x.end(), random.begin(), random.begin() + (n * ld - static_cast<Index>(x.size())));
  // Both roundings on the AVX-512 target of a CPU with AVX512_BF16:
  // VCVTNEPS2BF16 (with the integer path for the vectors that hold a
  // subnormal) and the integer one alone.
  struct RestoreDots {
    ~RestoreDots() { ks::SetFlashBf16Dots(ks::FlashBf16Dots::kAuto); }
  } restore;
  // Then all of it again with subnormal results flushed, as the engines'
  // tasks store (kernels/float_mode.h: VCVTNEPS2BF16 without the check), the
  // expected products flushed alike.
  for (const bool flush : {false, true})
    for (const auto& [scale, dots] :
         {std::pair{1.0f, ks::FlashBf16Dots::kAuto}, std::pair{0.37f, ks::FlashBf16Dots::kAuto},
          std::pair{1.0f, ks::FlashBf16Dots::kFloat32}}) {
      ks::SetFlashBf16Dots(dots);
      std::optional<kernels::ScopedFlushSubnormals> flushed;
      if (flush) flushed.emplace();
      // Per-row scales (the forward's 1 / l) in place of `scale` under kAuto.
      const std::vector<float> rows = {scale, 2.5f * scale, -0.75f};
      const float* row_scale = dots == ks::FlashBf16Dots::kAuto ? rows.data() : nullptr;
      std::vector<std::uint16_t> bf(n * stride, 0xabcd);
      std::vector<float> f32(n * stride, -7.0f);
      ks::FlashStoreRows(x.data(), ld, n, dim, row_scale ? -1.0f : scale,
                         ks::FlashStorage::kBFloat16, bf.data(), stride, row_scale);
      ks::FlashStoreRows(x.data(), ld, n, dim, row_scale ? -1.0f : scale,
                         ks::FlashStorage::kFloat32, f32.data(), stride, row_scale);
      for (Index r = 0; r < n; ++r) {
        for (Index c = 0; c < stride; ++c) {
          const std::size_t o = static_cast<std::size_t>(r * stride + c);
          if (c >= dim) {
            ASSERT_EQ(bf[o], 0xabcd) << r << ", " << c;
            ASSERT_EQ(f32[o], -7.0f) << r << ", " << c;
            continue;
          }
          const float v = x[static_cast<std::size_t>(r * ld + c)] *
                          (row_scale != nullptr ? row_scale[r] : scale);
          ASSERT_EQ(bf[o], FloatToBF16(v).bits) << r << ", " << c << ": " << v;
          std::uint32_t want, got;
          std::memcpy(&want, &v, sizeof v);
          std::memcpy(&got, &f32[o], sizeof got);
          ASSERT_EQ(got, want) << r << ", " << c;
        }
      }
    }
}

TEST_P(FlashKernelTarget, RowDotsF64KeepTheReferenceOrder) {
  // D_i = dO_i . O_i of the backward: the same float64 bits as the scalar
  // reference's 16 partial sums on every target (odd lengths: tails of
  // every size), and within 1e-15 relative of the long double sum.
  const Index n = 5, ld = 133;
  const std::vector<float> a = Random(n * ld, 21, -3.0f, 3.0f), b = Random(n * ld, 22);
  for (const Index dim : {1, 7, 15, 16, 17, 31, 32, 33, 64, 100, 133}) {
    std::vector<double> fast(n, -1.0), ref(n, -2.0);
    ks::FlashRowDotsF64(a.data(), ld, b.data(), ld, n, dim, fast.data());
    kernels::scalar::FlashRowDotsF64(a.data(), ld, b.data(), ld, n, dim, ref.data());
    for (Index r = 0; r < n; ++r) {
      long double exact = 0, mag = 0;
      for (Index x = 0; x < dim; ++x) {
        exact += static_cast<long double>(a[r * ld + x]) * b[r * ld + x];
        mag += std::fabs(static_cast<long double>(a[r * ld + x]) * b[r * ld + x]);
      }
      ASSERT_EQ(fast[r], ref[r]) << "dim " << dim << " row " << r;
      EXPECT_LE(std::fabs(static_cast<long double>(fast[r]) - exact), 1e-15L * mag)
          << "dim " << dim << " row " << r;
    }
  }
}

TEST_P(FlashKernelTarget, RowDotsF64OfStoredRowsEqualConvertedRows) {
  // FlashRowDotsF64Stored (the backward's O read in place in its storage)
  // gives FlashRowDotsF64's bits on the converted rows: float32, bfloat16
  // and float16 rows at a row stride (apart, overlapping, all one row,
  // backwards: a view allows each), tails of every size. The stored buffer
  // ends at the last value read (a read past it: ASan).
  const Index n = 5, lda = 133;
  const std::vector<float> a = Random(n * lda, 23, -3.0f, 3.0f);
  const std::vector<float> x = Random(n * 141, 24, -5.0f, 5.0f);
  for (const Index stride : {Index{141}, Index{3}, Index{0}, Index{-141}})
    for (const Index dim : {1, 7, 16, 17, 32, 33, 64, 133})
      for (const auto storage :
           {ks::FlashStorage::kFloat32, ks::FlashStorage::kBFloat16, ks::FlashStorage::kFloat16}) {
        const Index first = stride < 0 ? (n - 1) * -stride : 0;  // row 0's offset
        const auto used = static_cast<std::ptrdiff_t>((n - 1) * std::abs(stride) + dim);
        const StoredValues tight({x.begin(), x.begin() + used});
        const void* rows = tight.At(storage, first);
        std::vector<float> converted(n * dim);
        ks::FlashLoadRows(storage, rows, stride, n, dim, converted.data(), dim);
        std::vector<double> got(n, -1.0), want(n, -2.0);
        ks::FlashRowDotsF64(a.data(), lda, converted.data(), dim, n, dim, want.data());
        ks::FlashRowDotsF64Stored(storage, a.data(), lda, rows, stride, n, dim, got.data());
        for (Index r = 0; r < n; ++r) {
          ASSERT_EQ(got[r], want[r]) << "stride " << stride << " dim " << dim << " storage "
                                     << static_cast<int>(storage) << " row " << r;
        }
      }
}

TEST_P(FlashKernelTarget, LogSumExpAsTheFloat64Log) {
  // The forward's lse = m + log(l): the scalar reference's bits (the float64
  // log rounded once) for sums from 1 (one key) to 2^24 keys, 0 (no
  // visible key: -inf) and odd counts (tails on every target).
  std::vector<float> l = Random(37, 31, 1.0f, 4096.0f), m = Random(37, 32, -50.0f, 50.0f);
  l[0] = 1.0f;
  l[1] = 0.0f;
  l[2] = 16777216.0f;
  l[3] = 1.0000001f;
  for (const Index n : {1, 2, 7, 16, 37}) {
    std::vector<float> fast(n, 7.0f), ref(n, 8.0f);
    ks::FlashLogSumExp(m.data(), l.data(), n, fast.data());
    kernels::scalar::FlashLogSumExp(m.data(), l.data(), n, ref.data());
    for (Index i = 0; i < n; ++i) {
      ASSERT_EQ(fast[i], ref[i]) << "n " << n << " i " << i;
      if (l[i] == 0.0f) {
        ASSERT_EQ(fast[i], -INFINITY);
      } else {
        EXPECT_NEAR(fast[i], m[i] + std::log(double(l[i])), 1e-6 * (std::fabs(m[i]) + 17.0));
      }
    }
  }
}

TEST_P(FlashKernelTarget, Bf16ExpWithinItsBound) {
  // FlashExp::kBFloat16 (kernels/flash_exp.h): relative error <= 3e-6
  // (7e-6 without FMA) against the float64 exp over [-87, 0] (every reduction interval n, both
  // ends of each), the scalar backend's ExpNonPositiveBf16, -inf -> 0,
  // and the row sum of the values. FlashExp::kFloat32 stays within 2.5e-7.
  std::vector<float> y;
  for (int i = 0; i <= 20000; ++i) y.push_back(-87.0f * static_cast<float>(i) / 20000.0f);
  for (int n = 0; n <= 125; ++n) {
    for (const float d : {-0.3465f, 0.3465f}) y.push_back(std::min(0.0f, -0.6931472f * n + d));
  }
  y.push_back(-INFINITY);
  while (y.size() % 16 != 0) y.push_back(-1.0f);
  for (const auto exp : {kernels::FlashExp::kFloat32, kernels::FlashExp::kBFloat16}) {
    std::vector<float> row = y;
    const float sum = ks::FlashExpRow(row.data(), static_cast<Index>(row.size()), 0.0f, exp);
    double want_sum = 0.0;
    for (std::size_t j = 0; j < y.size(); ++j) {
      const double want = std::exp(static_cast<double>(y[j]));
      want_sum += row[j];
      if (y[j] == -INFINITY) {
        ASSERT_EQ(row[j], 0.0f);
        continue;
      }
      // kernels/flash_exp.h: 3e-6 with FMA, 7e-6 where Mul and Add round
      // apart (SSE4, SCALAR: r = y - n ln2 loses up to half an ulp of n ln2).
      const double bound = exp == kernels::FlashExp::kFloat32 ? 2.5e-7
                           : GetParam() <= HWY_AVX2           ? 3e-6
                                                              : 7e-6;
      ASSERT_LE(std::fabs(row[j] - want), bound * want) << "y " << y[j];
      if (exp == kernels::FlashExp::kBFloat16) {
        // Bits where the target has FMA; SSE4 and SCALAR round the Mul and
        // the Add apart (n may differ by one at a reduction boundary), each
        // within the bound.
        const float ref = kernels::ExpNonPositiveBf16(y[j]);
        if (GetParam() <= HWY_AVX2) {
          ASSERT_EQ(row[j], ref) << "y " << y[j];
        } else {
          ASSERT_LE(std::fabs(row[j] - ref), 6e-6f * ref) << "y " << y[j];
        }
      }
    }
    EXPECT_NEAR(sum, want_sum, 1e-5 * want_sum);
  }
}

TEST_P(FlashKernelTarget, TouchReadsEveryByteOnce) {
  // One nonzero byte anywhere in [p, p + bytes) gives a nonzero result with
  // its bit: every byte is read, at any alignment and length (whole
  // vectors, single vectors and single bytes). Bytes around the range are
  // 0xff and must not show (nor, under ASan, be read).
  std::vector<unsigned char> buf(512 + 8);
  for (Index bytes = 0; bytes <= 300; bytes += bytes < 40 ? 1 : 7) {
    for (Index offset = 0; offset < 4; ++offset) {
      std::fill(buf.begin(), buf.end(), 0xff);
      unsigned char* p = buf.data() + offset;
      std::fill(p, p + bytes, 0);
      ASSERT_EQ(ks::FlashTouch(p, bytes), 0u) << bytes << ", " << offset;
      for (Index at = 0; at < bytes; at += 1 + bytes / 13) {
        const auto bit = static_cast<unsigned char>(1u << (at % 8));
        p[at] = bit;
        const std::uint32_t got = ks::FlashTouch(p, bytes);
        ASSERT_NE(got, 0u) << bytes << ", " << offset << ", " << at;
        // That bit, in whichever byte of a word the byte fell, and nothing else.
        ASSERT_EQ(got & ~(0x01010101u * bit), 0u) << bytes << ", " << offset << ", " << at;
        p[at] = 0;
      }
    }
  }
}

TEST_P(FlashKernelTarget, SoftmaxTileEqualsTheRowKernels) {
  // One call for the tile = FlashScaleRow + FlashExpRow row by row (same
  // operations: identical probabilities), with the online update of m, l.
  const Index nq = 6, nk = 45, ld = 48;
  const std::vector<float> s0 = Random(nq * ld, 12, -4.0f, 4.0f);
  std::vector<float> bias = Random(ld + 8, 13);
  std::vector<const float*> rows(nq);
  for (Index i = 0; i < nq; ++i) rows[i] = i == 2 ? nullptr : bias.data() + i % 3;
  std::vector<float> m = {-INFINITY, 0.5f, 9.0f, -1.0f, 2.0f, -INFINITY};
  std::vector<float> l = {0.0f, 3.0f, 1.5f, 2.0f, 0.25f, 0.0f}, alpha(nq);
  std::vector<float> fast = s0, m_fast = m, l_fast = l;
  ks::FlashSoftmaxTile(fast.data(), ld, nq, nk, 0.3f, rows.data(), m_fast.data(), l_fast.data(),
                       alpha.data());
  for (Index i = 0; i < nq; ++i) {
    std::vector<float> row(s0.begin() + i * ld, s0.begin() + (i + 1) * ld);
    const float mx = ks::FlashScaleRow(row.data(), nk, ld, 0.3f, rows[i]);
    const float m_new = std::max(m[i], mx);
    const double want_alpha = m[i] == -INFINITY ? 0.0 : std::exp(double(m[i]) - m_new);
    const float sum = ks::FlashExpRow(row.data(), ld, m_new);
    for (Index j = 0; j < ld; ++j) ASSERT_EQ(fast[i * ld + j], row[j]) << i << ", " << j;
    EXPECT_EQ(m_fast[i], m_new);
    EXPECT_NEAR(alpha[i], want_alpha, 2e-7 * want_alpha);
    EXPECT_NEAR(l_fast[i], l[i] * want_alpha + sum, 1e-6 * (l[i] * want_alpha + sum));
  }
}
TEST_P(FlashKernelTarget, StoredValuesEqualConvertedRows) {
  // Decode's P . V from value rows read in place in their storage equals the
  // float32-row kernel on the converted rows, bit for bit: full vectors and
  // a tail (dv = 37), 6 rows (a block of 4 and 2 single rows), with and
  // without the rescale. The value buffer ends exactly at the last row's
  // last value (vector<...> of nk * stride - (stride - dv) elements), so a
  // read past dv would be caught by ASan.
  const Index nq = 6, nk = 29, dv = 37, stride = 53, ldv = 48, ldp = 32;
  const std::size_t n = static_cast<std::size_t>((nk - 1) * stride + dv);
  const StoredValues x(Random(n, 21, -3.0f, 3.0f));
  const std::vector<float> p = Random(nq * ldp, 22, 0.0f, 1.0f);
  const std::vector<float> acc0 = Random(nq * ldv, 23), alpha = Random(nq, 24, 0.0f, 1.0f);
  for (const auto storage :
       {ks::FlashStorage::kFloat32, ks::FlashStorage::kBFloat16, ks::FlashStorage::kFloat16}) {
    const void* src = x.At(storage);
    std::vector<float> rows(nk * ldv);
    ks::FlashLoadRows(storage, src, stride, nk, dv, rows.data(), ldv);
    for (const bool rescale : {false, true}) {
      std::vector<float> want = acc0, got = acc0;
      for (Index i = 0; i < nq; ++i)  // padding columns are zero, as in the kernels' callers
        for (Index c = dv; c < ldv; ++c) want[i * ldv + c] = got[i * ldv + c] = 0.0f;
      const float* al = rescale ? alpha.data() : nullptr;
      ks::FlashAccumulatePVRows(p.data(), ldp, rows.data(), ldv, nq, nk, ldv, al, want.data());
      ks::FlashAccumulatePVStored(storage, p.data(), ldp, src, stride, nq, nk, dv, ldv, al,
                                  got.data());
      for (std::size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got[i], want[i]) << "storage " << static_cast<int>(storage) << ", rescale "
                                   << rescale << ", element " << i;
      }
    }
  }
}

POSENC_INSTANTIATE_PER_SIMD_TARGET(FlashKernelTarget);

TEST(FlashBf16Logits, Avx512Bf16DotProducts) {
  if (!ks::CpuHasAvx512Bf16()) {
    GTEST_SKIP() << "this CPU has no AVX512F + AVX512_BF16: the VDPBF16PS path cannot run here";
  }
  for (const Index nq : {1, 4, 7, 64}) {
    const Bf16Tile t(nq, 53, 64);
    std::vector<float> s(nq * t.ld, NAN);
    ks::FlashTileLogitsAvx512Bf16(t.q_pairs.data(), t.ldq, t.kt_pairs.data(), nq, t.dim, t.ld,
                                  s.data());
    t.Check(s, "AVX512_BF16 logits");
  }
}

// FlashMatMulBf16 and its packing: the result against float64 sums of the
// bfloat16-rounded products (the documented bound), overwrite and scaled
// accumulate, rows-major and pairs-major A (the transpose packed as B),
// odd reductions, 1 to 64 rows, column tails of 16 past 64 and odd packed
// widths, padded ldb / ldc (nothing written past cols); the SIMD packing
// gives the bits of FloatToBF16. VDPBF16PS where the CPU has it, and the
// float32 loops always.
TEST(FlashMatMulBf16, MatchesFloat64OnTheRoundedOperands) {
  for (const bool simd : {false, true}) {
    if (simd && !ks::FlashBf16DotAvailable()) {
      std::printf("VDPBF16PS path skipped: no AVX512_BF16 on an AVX-512 target here\n");
      continue;
    }
    for (const Index rows : {1, 3, 4, 7, 9, 64}) {
      for (const Index n : {1, 2, 53, 64}) {
        for (const Index cols : {16, 32, 48, 80}) {
          SCOPED_TRACE("simd " + std::to_string(simd) + " rows " + std::to_string(rows) + " n " +
                       std::to_string(n) + " cols " + std::to_string(cols));
          const Index pairs = (n + 1) / 2, lda = pairs + 3, ldb = cols + 16, ldc = cols + 5;
          const std::vector<float> a = Random(rows * n, 11), b = Random(n * cols, 12);
          std::vector<float> at(n * rows);  // a transposed: [n, rows]
          for (Index r = 0; r < rows; ++r)
            for (Index j = 0; j < n; ++j) at[j * rows + r] = a[r * n + j];
          const auto bits = [](float x) { return std::uint32_t{FloatToBF16(x).bits}; };
          // Rows-major A, and the pairs-major A of the transpose (packed as B).
          std::vector<std::uint32_t> ap(rows * lda, 0xDEADBEEFu), apt(pairs * (rows + 7));
          ks::FlashPackPairsRows(a.data(), n, rows, n, ap.data(), lda, simd);
          ks::FlashPackPairsB(at.data(), rows, n, rows,
                              reinterpret_cast<std::uint16_t*>(apt.data()), rows + 7, simd);
          for (Index r = 0; r < rows; ++r) {
            for (Index t = 0; t < pairs; ++t) {
              const std::uint32_t want =
                  bits(a[r * n + 2 * t]) | (2 * t + 1 < n ? bits(a[r * n + 2 * t + 1]) << 16 : 0);
              ASSERT_EQ(ap[r * lda + t], want) << "row " << r << " pair " << t;
              ASSERT_EQ(apt[t * (rows + 7) + r], want) << "row " << r << " pair " << t;
            }
          }
          std::vector<std::uint16_t> bp(pairs * ldb * 2, 0xFFFF);
          ks::FlashPackPairsB(b.data(), cols, n, cols, bp.data(), ldb, simd);
          const auto bf = [](float x) { return static_cast<double>(BF16ToFloat(FloatToBF16(x))); };
          const std::vector<float> c0 = Random(rows * ldc, 13), beta = Random(rows, 14);
          for (const bool transposed : {false, true}) {
            for (const bool scaled : {false, true}) {
              std::vector<float> c = c0;
              if (transposed) {
                ks::FlashMatMulBf16(apt.data(), 1, rows + 7, rows, bp.data(), pairs, ldb, cols,
                                    scaled ? beta.data() : nullptr, c.data(), ldc, simd);
              } else {
                ks::FlashMatMulBf16(ap.data(), lda, 1, rows, bp.data(), pairs, ldb, cols,
                                    scaled ? beta.data() : nullptr, c.data(), ldc, simd);
              }
              for (Index r = 0; r < rows; ++r) {
                for (Index x = 0; x < ldc; ++x) {
                  const float got = c[r * ldc + x];
                  if (x >= cols) {
                    ASSERT_EQ(got, c0[r * ldc + x]) << "written past cols";
                    continue;
                  }
                  double want = scaled ? double(beta[r]) * double(c0[r * ldc + x]) : 0.0;
                  double mag = std::abs(want);
                  for (Index j = 0; j < n; ++j) {
                    const double prod = bf(a[r * n + j]) * bf(b[j * cols + x]);
                    want += prod;
                    mag += std::abs(prod);
                  }
                  ASSERT_NEAR(got, want, (2.0 * pairs + 2.0) * std::ldexp(mag, -23) + 1e-30)
                      << "row " << r << " col " << x << (scaled ? " scaled" : "")
                      << (transposed ? " transposed" : "");
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(FlashBf16Logits, AmxTiles) {
  if (!ks::AmxAvailable()) {
    GTEST_SKIP() << "AMX path not exercised on this machine: " << ks::AmxStatus();
  }
  EXPECT_TRUE(ks::FlashAmxLogitsAvailable(64));
  EXPECT_FALSE(ks::FlashAmxLogitsAvailable(48));  // dim % 32 != 0 stays on AVX512_BF16
  for (const Index nq : {1, 16, 21, 64}) {
    for (const Index dim : {32, 128}) {
      const Bf16Tile t(nq, 53, dim);
      std::vector<float> s(nq * t.ld, NAN);
      ks::FlashTileLogitsAmx(t.q_pairs.data(), t.ldq, t.kt_pairs.data(), nq, dim, t.ld, s.data());
      t.Check(s, "AMX logits");
    }
  }
}

TEST(FlashBf16Logits, AmxStatusExplainsItself) {
  // Either granted, or a reason naming what is missing (CPUID bits or the
  // arch_prctl permission request): never an empty or generic answer.
  const std::string status = ks::AmxStatus();
  if (ks::AmxAvailable()) {
    EXPECT_EQ(status, "available");
  } else {
    EXPECT_TRUE(status.find("CPUID") != std::string::npos ||
                status.find("arch_prctl") != std::string::npos ||
                status.find("x86-64") != std::string::npos)
        << status;
  }
  EXPECT_EQ(ComputeKernelAvailable(ComputeKernel::kAmxBFloat16), ks::AmxAvailable());
  std::printf("AMX: %s\n", status.c_str());
}

TEST(ComputeCeilings, EveryAvailableKernelCountsItsFlops) {
  const Context ctx(2);
  for (const ComputeKernel k :
       {ComputeKernel::kFloat32Fma, ComputeKernel::kBFloat16Dot, ComputeKernel::kAmxBFloat16}) {
    if (!ComputeKernelAvailable(k)) {
      std::printf("%s skipped: %s\n", std::string(ComputeKernelName(k)).c_str(),
                  ComputeKernelStatus(k).c_str());
      EXPECT_THROW(RunComputeKernel(k, 100, ctx), InvalidArgument);
      continue;
    }
    // 8 tasks per thread, 1000 / 8 = 125 iterations each, the flops of each
    // kernel's step: float32 2 * accumulators * lanes; bf16 2 * 16 * 32;
    // AMX 2 * 4 * 16 * 16 * 32.
    const double flops = RunComputeKernel(k, 1000, ctx);
    EXPECT_GT(flops, 0.0);
    const double per_step = flops / (16 * 125);
    if (k == ComputeKernel::kBFloat16Dot) {
      EXPECT_EQ(per_step, 1024.0);
    }
    if (k == ComputeKernel::kAmxBFloat16) {
      EXPECT_EQ(per_step, 65536.0);
    }
    if (k == ComputeKernel::kFloat32Fma) {
      EXPECT_GE(per_step, 16.0);
    }
  }
  EXPECT_THROW(RunComputeKernel(ComputeKernel::kFloat32Fma, 0, ctx), InvalidArgument);
}

TEST(Ceilings, ReadKernelAndLastLevelCache) {
  std::vector<float> a(100003, 1.0f);
  const Context ctx(2);
  RunStreamKernel(StreamKernel::kRead, a.data(), nullptr, static_cast<Index>(a.size()), 1.0f, ctx);
  EXPECT_EQ(a[0], 1.0f);  // read only
  EXPECT_EQ(StreamKernelBytes(StreamKernel::kRead, 10), 40);
  EXPECT_EQ(StreamKernelName(StreamKernel::kRead), "read");
  const CacheInfo llc = LastLevelCache();
  if (llc.source == "unknown") {
    EXPECT_EQ(llc.bytes, 0);
  } else {
    EXPECT_GT(llc.bytes, 0);
    EXPECT_GE(llc.level, 2);
  }
}

// The kernels' rules on the library's own buffers are asserted
// (kernels/dassert.h) in builds without NDEBUG, the asan and tsan presets: a
// caller inside posenc breaking one aborts with the rule instead of reading
// or writing past a row. Values and strides that come from a user (lse, a
// cache's row stride) are not asserted: the fuzzer reaches them.
TEST(FlashKernelPreconditions, BrokenRulesAbortInDebugBuilds) {
#ifdef NDEBUG
  GTEST_SKIP() << "POSENC_DASSERT is compiled out of builds with NDEBUG (release)";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  using namespace kernels::simd;
  std::vector<float> a(64, 0.0f), b(64, 0.0f), c(64, 0.0f);
  EXPECT_DEATH(FlashExpRow(a.data(), 15, 0.0f), "precondition failed: n % kFlashPad == 0");
  EXPECT_DEATH(FlashScaleRow(a.data(), 17, 16, 1.0f, nullptr), "nk <= ld");
  EXPECT_DEATH(FlashTileLogits(a.data(), 4, b.data(), 1, 8, 16, c.data()), "ldq >= dim");
  EXPECT_DEATH(FlashBackwardRow(a.data(), b.data(), 17, 16, 1.0f, nullptr, 0.0f, 0.0f), "nk <= ld");
  EXPECT_DEATH(FlashLoadRows(FlashStorage::kFloat32, a.data(), 8, 1, 8, c.data(), 4), "ld >= dim");
  std::vector<std::uint32_t> pairs(64, 0);
  std::vector<std::uint16_t> pb(128, 0);
  EXPECT_DEATH(
      FlashMatMulBf16(pairs.data(), 1, 1, 1, pb.data(), 1, 16, 8, nullptr, c.data(), 16, false),
      "cols % 16 == 0");
  // Within the rules, the same calls run.
  FlashExpRow(a.data(), 16, 0.0f);
  EXPECT_FLOAT_EQ(a[0], 1.0f);
#endif
}

}  // namespace
}  // namespace posenc
