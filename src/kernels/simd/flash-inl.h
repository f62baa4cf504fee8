// Per-target tile kernels of the fused attention (included once per Highway
// target by flash.cc). Numerics and coverage: kernels/simd/flash.h.

#if defined(POSENC_KERNELS_SIMD_FLASH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_SIMD_FLASH_INL_H_
#undef POSENC_KERNELS_SIMD_FLASH_INL_H_
#else
#define POSENC_KERNELS_SIMD_FLASH_INL_H_
#endif

#include <cstdint>
#include <limits>

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "kernels/float_mode.h"
#include "kernels/simd/flash_softmax-inl.h"
#include "kernels/simd/simd_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::kernels::simd {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

// Register blocking of the logits: kRows query rows x kVecs vectors of key
// columns per step (kVecs loads and kRows broadcasts feed kRows * kVecs
// independent FMAs). AVX-512 has 32 vector registers: 4 x 4 accumulators
// (a 64-key tile row in one pass); narrower targets with 16 registers use
// 4 x 2. ld is a multiple of the lane count on every target (kFlashPad is).
#if HWY_TARGET <= HWY_AVX3
inline constexpr int kFlashVecs = 4;
#else
inline constexpr int kFlashVecs = 2;
#endif

template <int kRows, int kVecs>
HWY_INLINE void LogitsBlock(const float* q, std::int64_t ldq, const float* kt, std::int64_t dim,
                            std::int64_t ld, std::int64_t j, float* s) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  hn::Vec<decltype(d)> a[kRows][kVecs];
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kVecs; ++c) a[r][c] = hn::Zero(d);
  for (std::int64_t x = 0; x < dim; ++x) {
    hn::Vec<decltype(d)> k[kVecs];
    for (int c = 0; c < kVecs; ++c) k[c] = hn::LoadU(d, kt + x * ld + j + c * N);
    for (int r = 0; r < kRows; ++r) {
      const auto qx = hn::Set(d, q[r * ldq + x]);
      for (int c = 0; c < kVecs; ++c) a[r][c] = hn::MulAdd(qx, k[c], a[r][c]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kVecs; ++c) hn::StoreU(a[r][c], d, s + r * ld + j + c * N);
}

// Columns [0, cols) of kRows rows (cols a multiple of the lane count).
template <int kRows>
HWY_INLINE void LogitsRows(const float* q, std::int64_t ldq, const float* kt, std::int64_t dim,
                           std::int64_t ld, std::int64_t cols, float* s) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t j = 0;
  for (; j + kFlashVecs * N <= cols; j += kFlashVecs * N) {
    LogitsBlock<kRows, kFlashVecs>(q, ldq, kt, dim, ld, j, s);
  }
  // The rest in one block where it fits (kRows x 3 or x 2 independent
  // accumulators rather than kRows: the FMA latency stays hidden).
  if (kFlashVecs > 3 && cols - j == 3 * N) return LogitsBlock<kRows, 3>(q, ldq, kt, dim, ld, j, s);
  if (kFlashVecs > 2 && cols - j == 2 * N) return LogitsBlock<kRows, 2>(q, ldq, kt, dim, ld, j, s);
  for (; j < cols; j += N) LogitsBlock<kRows, 1>(q, ldq, kt, dim, ld, j, s);
}

void FlashTileLogitsColsImpl(const float* q, std::int64_t ldq, const float* kt, std::int64_t nq,
                             std::int64_t dim, std::int64_t ld, std::int64_t cols, float* s) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
  if (cols == N) {  // one vector of columns: 8 rows keep 8 accumulators busy
    for (; i + 8 <= nq; i += 8) LogitsBlock<8, 1>(q + i * ldq, ldq, kt, dim, ld, 0, s + i * ld);
  }
  for (; i + 4 <= nq; i += 4) LogitsRows<4>(q + i * ldq, ldq, kt, dim, ld, cols, s + i * ld);
  for (; i < nq; ++i) LogitsRows<1>(q + i * ldq, ldq, kt, dim, ld, cols, s + i * ld);
}

void FlashTileLogitsImpl(const float* q, std::int64_t ldq, const float* kt, std::int64_t nq,
                         std::int64_t dim, std::int64_t ld, float* s) {
  FlashTileLogitsColsImpl(q, ldq, kt, nq, dim, ld, ld, s);
}

// P . V over value rows of storage S read in place (the conversion to
// float32 is exact and happens in registers, no float32 copy of V): v rows
// at stride ldvr elements, columns [x, x + kVecs * N) all below dv.
template <Store S, int kRows, int kVecs>
HWY_INLINE void PVBlockStored(const float* p, std::int64_t ldp, const unsigned char* v,
                              std::int64_t ldvr, std::int64_t nk, std::int64_t ldv, std::int64_t x,
                              const float* alpha, float* acc) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  constexpr std::int64_t kB = kStoreBytes<S>;
  hn::Vec<decltype(d)> a[kRows][kVecs];
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kVecs; ++c) a[r][c] = hn::LoadU(d, acc + r * ldv + x + c * N);
    if (alpha != nullptr) {
      const auto al = hn::Set(d, alpha[r]);
      for (int c = 0; c < kVecs; ++c) a[r][c] = hn::Mul(a[r][c], al);
    }
  }
  for (std::int64_t j = 0; j < nk; ++j) {
    const unsigned char* row = v + (j * ldvr + x) * kB;
    hn::Vec<decltype(d)> vj[kVecs];
    for (int c = 0; c < kVecs; ++c) vj[c] = LoadF<S>(d, row + c * N * kB);
    for (int r = 0; r < kRows; ++r) {
      const auto pj = hn::Set(d, p[r * ldp + j]);
      for (int c = 0; c < kVecs; ++c) a[r][c] = hn::MulAdd(pj, vj[c], a[r][c]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kVecs; ++c) hn::StoreU(a[r][c], d, acc + r * ldv + x + c * N);
}

// The same blocking for P . V: kRows probability rows x kVecs vectors of
// value columns; each accumulator row is first multiplied by alpha[r] (the
// online-softmax rescale), when alpha is given. Float32 value rows: the
// stored-rows kernel with float32 storage.
template <int kRows, int kVecs>
HWY_INLINE void PVBlock(const float* p, std::int64_t ldp, const float* v, std::int64_t ldvr,
                        std::int64_t nk, std::int64_t ldv, std::int64_t x, const float* alpha,
                        float* acc) {
  PVBlockStored<Store::kF32, kRows, kVecs>(p, ldp, reinterpret_cast<const unsigned char*>(v), ldvr,
                                           nk, ldv, x, alpha, acc);
}

template <int kRows>
HWY_INLINE void PVRows(const float* p, std::int64_t ldp, const float* v, std::int64_t ldvr,
                       std::int64_t nk, std::int64_t ldv, const float* alpha, float* acc) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t x = 0;
  for (; x + kFlashVecs * N <= ldv; x += kFlashVecs * N) {
    PVBlock<kRows, kFlashVecs>(p, ldp, v, ldvr, nk, ldv, x, alpha, acc);
  }
  for (; x < ldv; x += N) PVBlock<kRows, 1>(p, ldp, v, ldvr, nk, ldv, x, alpha, acc);
}

// v rows at stride ldvr (>= ldv), accumulator rows at stride ldv.
void FlashAccumulatePVRowsImpl(const float* p, std::int64_t ldp, const float* v, std::int64_t ldvr,
                               std::int64_t nq, std::int64_t nk, std::int64_t ldv,
                               const float* alpha, float* acc) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
  if (kFlashVecs > 2 && ldv == 2 * N) {  // narrow rows (head dim 32 on AVX-512): 8 x 2 blocks
    for (; i + 8 <= nq; i += 8) {
      PVBlock<8, 2>(p + i * ldp, ldp, v, ldvr, nk, ldv, 0, alpha ? alpha + i : nullptr,
                    acc + i * ldv);
    }
  }
  for (; i + 4 <= nq; i += 4) {
    PVRows<4>(p + i * ldp, ldp, v, ldvr, nk, ldv, alpha ? alpha + i : nullptr, acc + i * ldv);
  }
  for (; i < nq; ++i) {
    PVRows<1>(p + i * ldp, ldp, v, ldvr, nk, ldv, alpha ? alpha + i : nullptr, acc + i * ldv);
  }
}

template <Store S, int kRows>
HWY_INLINE void PVRowsStored(const float* p, std::int64_t ldp, const unsigned char* v,
                             std::int64_t ldvr, std::int64_t nk, std::int64_t dv, std::int64_t ldv,
                             const float* alpha, float* acc) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t x = 0;
  for (; x + kFlashVecs * N <= dv; x += kFlashVecs * N) {
    PVBlockStored<S, kRows, kFlashVecs>(p, ldp, v, ldvr, nk, ldv, x, alpha, acc);
  }
  for (; x + N <= dv; x += N) PVBlockStored<S, kRows, 1>(p, ldp, v, ldvr, nk, ldv, x, alpha, acc);
  if (x == dv) return;  // no tail; the padding columns [dv, ldv) stay zero
  // Columns [x, dv), fewer than one vector: one element at a time (the rows
  // end at dv, so a full vector could read past the buffer).
  const hn::CappedTag<float, 1> d1;
  constexpr std::int64_t kB = kStoreBytes<S>;
  for (int r = 0; r < kRows; ++r) {
    float* a = acc + r * ldv;
    if (alpha != nullptr)
      for (std::int64_t c = x; c < dv; ++c) a[c] *= alpha[r];
    for (std::int64_t j = 0; j < nk; ++j) {
      const auto pj = hn::Set(d1, p[r * ldp + j]);
      for (std::int64_t c = x; c < dv; ++c) {  // the vector path's MulAdd, one lane
        const auto sum =
            hn::MulAdd(pj, LoadF<S>(d1, v + (j * ldvr + c) * kB), hn::LoadU(d1, a + c));
        hn::StoreU(sum, d1, a + c);
      }
    }
  }
}

template <Store S>
void PVStoredTyped(const float* p, std::int64_t ldp, const void* v, std::int64_t ldvr,
                   std::int64_t nq, std::int64_t nk, std::int64_t dv, std::int64_t ldv,
                   const float* alpha, float* acc) {
  const auto* base = static_cast<const unsigned char*>(v);
  std::int64_t i = 0;
  for (; i + 4 <= nq; i += 4) {
    PVRowsStored<S, 4>(p + i * ldp, ldp, base, ldvr, nk, dv, ldv, alpha ? alpha + i : nullptr,
                       acc + i * ldv);
  }
  for (; i < nq; ++i) {
    PVRowsStored<S, 1>(p + i * ldp, ldp, base, ldvr, nk, dv, ldv, alpha ? alpha + i : nullptr,
                       acc + i * ldv);
  }
}

void FlashAccumulatePVStoredImpl(int store, const float* p, std::int64_t ldp, const void* v,
                                 std::int64_t ldvr, std::int64_t nq, std::int64_t nk,
                                 std::int64_t dv, std::int64_t ldv, const float* alpha,
                                 float* acc) {
  if (store == 0) return PVStoredTyped<Store::kF32>(p, ldp, v, ldvr, nq, nk, dv, ldv, alpha, acc);
  if (store == 1) return PVStoredTyped<Store::kBF16>(p, ldp, v, ldvr, nq, nk, dv, ldv, alpha, acc);
  PVStoredTyped<Store::kF16>(p, ldp, v, ldvr, nq, nk, dv, ldv, alpha, acc);
}

void FlashAccumulatePVScaledImpl(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                                 std::int64_t nk, std::int64_t ldv, const float* alpha,
                                 float* acc) {
  FlashAccumulatePVRowsImpl(p, ldp, v, ldv, nq, nk, ldv, alpha, acc);
}

void FlashAccumulatePVImpl(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                           std::int64_t nk, std::int64_t ldv, float* acc) {
  FlashAccumulatePVScaledImpl(p, ldp, v, nq, nk, ldv, nullptr, acc);
}

// The transposed accumulation of the backward (dV += P^T dO, dK += dS^T Q):
// kRows output rows (keys j) x kVecs vectors of columns; per query row i one
// load of v's row and kRows broadcasts of p[i, j..j + kRows) feed kRows x
// kVecs FMAs, so P is read in place (no transposed copy).
template <int kRows, int kVecs>
HWY_INLINE void PTVBlock(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                         std::int64_t ldv, std::int64_t x, float* acc) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  hn::Vec<decltype(d)> a[kRows][kVecs];
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kVecs; ++c) a[r][c] = hn::LoadU(d, acc + r * ldv + x + c * N);
  for (std::int64_t i = 0; i < nq; ++i) {
    hn::Vec<decltype(d)> vi[kVecs];
    for (int c = 0; c < kVecs; ++c) vi[c] = hn::LoadU(d, v + i * ldv + x + c * N);
    for (int r = 0; r < kRows; ++r) {
      const auto pij = hn::Set(d, p[i * ldp + r]);
      for (int c = 0; c < kVecs; ++c) a[r][c] = hn::MulAdd(pij, vi[c], a[r][c]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kVecs; ++c) hn::StoreU(a[r][c], d, acc + r * ldv + x + c * N);
}

template <int kRows>
HWY_INLINE void PTVRows(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                        std::int64_t ldv, float* acc) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t x = 0;
  for (; x + kFlashVecs * N <= ldv; x += kFlashVecs * N) {
    PTVBlock<kRows, kFlashVecs>(p, ldp, v, nq, ldv, x, acc);
  }
  for (; x < ldv; x += N) PTVBlock<kRows, 1>(p, ldp, v, nq, ldv, x, acc);
}

void FlashAccumulatePTVImpl(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                            std::int64_t nk, std::int64_t ldv, float* acc) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t j = 0;
  if (kFlashVecs > 2 && ldv == 2 * N) {  // narrow rows (head dim 32 on AVX-512): 8 x 2 blocks
    for (; j + 8 <= nk; j += 8) PTVBlock<8, 2>(p + j, ldp, v, nq, ldv, 0, acc + j * ldv);
  }
  for (; j + 4 <= nk; j += 4) PTVRows<4>(p + j, ldp, v, nq, ldv, acc + j * ldv);
  for (; j < nk; ++j) PTVRows<1>(p + j, ldp, v, nq, ldv, acc + j * ldv);
}

// dst[j] += src[j], j < n.
void FlashAddRowImpl(float* dst, const float* src, std::int64_t n) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t j = 0;
  for (; j + N <= n; j += N) {
    hn::StoreU(hn::Add(hn::LoadU(d, dst + j), hn::LoadU(d, src + j)), d, dst + j);
  }
  for (; j < n; ++j) dst[j] += src[j];
}

// lse[i] = m[i] + log(l[i]) for l[i] > 0 (the log in float64, Highway's
// Log: <= 4 ulp of a double, so the float32 result is the correctly
// rounded log in all but rare ties), -inf otherwise, i < n: the forward's
// log-sum-exp of a tile's rows, one vector of rows at a time instead of one
// logf call per row.
void FlashLogSumExpImpl(const float* m, const float* l, std::int64_t n, float* lse) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const auto N = static_cast<std::int64_t>(hn::Lanes(dd));
  std::int64_t i = 0;
  const auto step = [&](auto d32, auto d64, std::int64_t at) {
    const auto vl = hn::LoadU(d32, l + at);
    const auto positive = hn::Gt(vl, hn::Zero(d32));
    // log(1) for the rows without a sum: no NaN or -inf in the float64 log.
    const auto safe = hn::PromoteTo(d64, hn::IfThenElse(positive, vl, hn::Set(d32, 1.0f)));
    const auto lg = hn::DemoteTo(d32, hn::Log(d64, safe));
    hn::StoreU(hn::IfThenElse(positive, hn::Add(hn::LoadU(d32, m + at), lg),
                              hn::Set(d32, -std::numeric_limits<float>::infinity())),
               d32, lse + at);
  };
  for (; i + N <= n; i += N) step(df, dd, i);
  const hn::CappedTag<double, 1> d1;
  const hn::Rebind<float, decltype(d1)> f1;
  for (; i < n; ++i) step(f1, d1, i);
}

// The sum of v's lanes by halving, lane k of each half added to lane k of
// the other (the tree of kernels/scalar/flash.h FlashRowDotsF64).
template <class D>
HWY_INLINE double SumByHalves(D d, hn::Vec<D> v) {
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  return hn::GetLane(v);
#else
  if constexpr (hn::MaxLanes(D()) == 1) {
    (void)d;
    return hn::GetLane(v);
  } else {
    const hn::Half<D> dh;
    return SumByHalves(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
#endif
}

// out[r] = sum_x a[r * lda + x] * b[r * ldb + x] in float64 (each product
// exact), x < dim, r < n, in the order kernels/scalar/flash.h
// (FlashRowDotsF64) defines: 16 partial sums, sum k over x = k (mod 16) in
// increasing x, then halving (k + 8, k + 4, k + 2, k + 1). Vectors of any
// width hold the 16 sums (AVX-512: 2 x 8 lanes; SCALAR: 16 x 1) and halve
// in registers, so every target gives the reference's bits. b's rows are of
// storage kind S (converted exactly in registers), ldb in elements.
template <Store S>
void RowDotsF64Typed(const float* a, std::int64_t lda, const unsigned char* b, std::int64_t ldb,
                     std::int64_t n, std::int64_t dim, double* out) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const hn::CappedTag<float, 1> d1;
  constexpr std::size_t kN = hn::MaxLanes(dd);
  static_assert(kN <= 16 && 16 % kN == 0);
  constexpr std::size_t kAcc = 16 / kN;
  constexpr std::int64_t kB = kStoreBytes<S>;
  for (std::int64_t r = 0; r < n; ++r) {
    const float* x0 = a + r * lda;
    const unsigned char* y0 = b + r * ldb * kB;
    hn::Vec<decltype(dd)> acc[kAcc];
    for (std::size_t k = 0; k < kAcc; ++k) acc[k] = hn::Zero(dd);
    std::int64_t x = 0;
    for (; x + 16 <= dim; x += 16) {
      for (std::size_t k = 0; k < kAcc; ++k) {
        const std::int64_t o = x + static_cast<std::int64_t>(k * kN);
        acc[k] = hn::MulAdd(hn::PromoteTo(dd, hn::LoadU(df, x0 + o)),
                            hn::PromoteTo(dd, LoadF<S>(df, y0 + o * kB)), acc[k]);
      }
    }
    if (x < dim) {  // a tail: the partial sums in memory, added as the reference adds them
      HWY_ALIGN double sums[16];
      for (std::size_t k = 0; k < kAcc; ++k) hn::Store(acc[k], dd, sums + k * kN);
      for (; x < dim; ++x) {
        sums[x % 16] += static_cast<double>(x0[x]) * hn::GetLane(LoadF<S>(d1, y0 + x * kB));
      }
      for (std::size_t k = 0; k < kAcc; ++k) acc[k] = hn::Load(dd, sums + k * kN);
    }
    // Halving across the vectors (k + 8, ... while whole vectors pair up),
    // then within the one left.
    for (std::size_t w = kAcc / 2; w >= 1; w /= 2) {
      for (std::size_t k = 0; k < w; ++k) acc[k] = hn::Add(acc[k], acc[k + w]);
    }
    out[r] = SumByHalves(dd, acc[0]);
  }
}

void FlashRowDotsF64Impl(const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                         std::int64_t n, std::int64_t dim, double* out) {
  RowDotsF64Typed<Store::kF32>(a, lda, reinterpret_cast<const unsigned char*>(b), ldb, n, dim, out);
}

// b in storage kind `store` (FlashStorage order: 0 float32, 1 bfloat16, 2 float16).
void FlashRowDotsF64StoredImpl(int store, const float* a, std::int64_t lda, const void* b,
                               std::int64_t ldb, std::int64_t n, std::int64_t dim, double* out) {
  const auto* bytes = static_cast<const unsigned char*>(b);
  if (store == 0) return RowDotsF64Typed<Store::kF32>(a, lda, bytes, ldb, n, dim, out);
  if (store == 1) return RowDotsF64Typed<Store::kBF16>(a, lda, bytes, ldb, n, dim, out);
  RowDotsF64Typed<Store::kF16>(a, lda, bytes, ldb, n, dim, out);
}

// Rows of exactly kVecs vectors (dim == ld == kVecs * Lanes(d)): the
// vectors of a row unrolled, no tails (the attention's head dims 32, 64,
// 128: LoadRowsTyped was 8-13 % of a training step).
template <Store S, int kVecs, class D>
HWY_INLINE void LoadRowsExact(D d, const unsigned char* base, std::int64_t stride, std::int64_t n,
                              float* dst) {
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < n; ++r) {
    const unsigned char* row = base + r * stride * kStoreBytes<S>;
    float* out = dst + r * kVecs * N;
    hn::Vec<D> v[kVecs];
    for (int c = 0; c < kVecs; ++c) v[c] = LoadF<S>(d, row + c * N * kStoreBytes<S>);
    for (int c = 0; c < kVecs; ++c) hn::StoreU(v[c], d, out + c * N);
  }
}

// Rows of storage kind S (unit element stride, row stride `stride`
// elements) as float32 rows of ld >= dim floats, zero past dim. The 16-bit
// conversions are exact.
template <Store S>
void LoadRowsTyped(const void* src, std::int64_t stride, std::int64_t n, std::int64_t dim,
                   float* dst, std::int64_t ld) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  const auto* base = static_cast<const unsigned char*>(src);
  if (ld == dim) {
    if (dim == N) return LoadRowsExact<S, 1>(d, base, stride, n, dst);
    if (dim == 2 * N) return LoadRowsExact<S, 2>(d, base, stride, n, dst);
    if (dim == 4 * N) return LoadRowsExact<S, 4>(d, base, stride, n, dst);
    if (dim == 8 * N) return LoadRowsExact<S, 8>(d, base, stride, n, dst);
  }
  for (std::int64_t r = 0; r < n; ++r) {
    const unsigned char* row = base + r * stride * kStoreBytes<S>;
    float* out = dst + r * ld;
    std::int64_t x = 0;
    for (; x + N <= dim; x += N) hn::StoreU(LoadF<S>(d, row + x * kStoreBytes<S>), d, out + x);
    for (; x < dim; ++x) {
      const hn::CappedTag<float, 1> d1;
      hn::StoreU(LoadF<S>(d1, row + x * kStoreBytes<S>), d1, out + x);
    }
    for (; x < ld; ++x) out[x] = 0.0f;
  }
}

template <class D>
hn::Vec<hn::Rebind<std::uint16_t, D>> Bf16BitsOf(D d, hn::Vec<D> v) {
  const auto bits = hn::ShiftRight<16>(Bf16HighBits(d, v));
  return hn::DemoteTo(hn::Rebind<std::uint16_t, D>(), hn::BitCast(hn::RebindToSigned<D>(), bits));
}

// dst[r * ld + j] = the bfloat16 value of src[r * ld + j] (Bf16HighBits),
// r < rows, j < n (n a multiple of the lane count).
void FlashRoundRowsBf16Impl(const float* src, std::int64_t ld, std::int64_t rows, std::int64_t n,
                            float* dst) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < n; j += N) {
      hn::StoreU(hn::BitCast(d, Bf16HighBits(d, hn::LoadU(d, src + r * ld + j))), d,
                 dst + r * ld + j);
    }
  }
}

// Sixteen values v as their bfloat16 bits at out, exactly as Bf16BitsOf:
// with VCVTNEPS2BF16 (kConvert, AVX-512 targets) unless a lane is
// subnormal, which the instruction flushes to +-0 and FloatToBF16 does not
// (the engines' stores run under FTZ and DAZ, so the integer path is only
// taken for callers without them, and by the tests' table). kNormal: v was
// computed with subnormal results flushed (kernels/float_mode.h), so no lane
// is subnormal and the check is skipped.
template <bool kConvert, bool kNormal, class D>
HWY_INLINE void StoreBf16Bits(D d, hn::Vec<D> v, std::uint16_t* out) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (kConvert && hn::MaxLanes(D()) == 16) {
    if constexpr (kNormal) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), ConvertToBf16(v.raw));
      return;
    }
    const auto tiny = hn::And(hn::Lt(hn::Abs(v), hn::Set(d, std::numeric_limits<float>::min())),
                              hn::Ne(v, hn::Zero(d)));
    if (HWY_LIKELY(hn::AllFalse(d, tiny))) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), ConvertToBf16(v.raw));
      return;
    }
  }
#endif
  hn::StoreU(Bf16BitsOf(d, v), hn::Rebind<std::uint16_t, D>(), out);
}

// Row r of n float32 rows (stride ld) times scale (or row_scale[r] when
// given) into row r of dst (unit element stride, row stride `stride`
// elements) as float32 (bf16 false) or bfloat16 bits (StoreBf16Bits:
// kConvert as FlashBf16ConvertPreferred, kNormal under flushed subnormal
// results), dim values per row.
template <bool kBf16, bool kConvert = false, bool kNormal = false>
void StoreRowsTyped(const float* src, std::int64_t ld, std::int64_t n, std::int64_t dim,
                    float scale, const float* row_scale, void* dst, std::int64_t stride) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < n; ++r) {
    const float rs = row_scale != nullptr ? row_scale[r] : scale;
    const auto vscale = hn::Set(d, rs);
    const auto vscale1 = hn::Set(d1, rs);
    const float* in = src + r * ld;
    std::int64_t x = 0;
    if constexpr (kBf16) {
      std::uint16_t* out = static_cast<std::uint16_t*>(dst) + r * stride;
      for (; x + N <= dim; x += N) {
        StoreBf16Bits<kConvert, kNormal>(d, hn::Mul(hn::LoadU(d, in + x), vscale), out + x);
      }
      for (; x < dim; ++x) {
        hn::StoreU(Bf16BitsOf(d1, hn::Mul(hn::LoadU(d1, in + x), vscale1)),
                   hn::Rebind<std::uint16_t, decltype(d1)>(), out + x);
      }
    } else {
      float* out = static_cast<float*>(dst) + r * stride;
      for (; x + N <= dim; x += N) hn::StoreU(hn::Mul(hn::LoadU(d, in + x), vscale), d, out + x);
      for (; x < dim; ++x) out[x] = in[x] * rs;
    }
  }
}

void FlashStoreRowsImpl(int store, const float* src, std::int64_t ld, std::int64_t n,
                        std::int64_t dim, float scale, const float* row_scale, void* dst,
                        std::int64_t stride, bool convert) {
  if (store == 1) {
    if (kHaveBf16Convert && convert) {
      // The engines' tasks flush subnormal results: the products stored here
      // cannot be subnormal, and each vector converts without the check.
      if (FlushingSubnormalResults()) {
        return StoreRowsTyped<true, kHaveBf16Convert, true>(src, ld, n, dim, scale, row_scale, dst,
                                                            stride);
      }
      return StoreRowsTyped<true, kHaveBf16Convert>(src, ld, n, dim, scale, row_scale, dst, stride);
    }
    return StoreRowsTyped<true>(src, ld, n, dim, scale, row_scale, dst, stride);
  }
  StoreRowsTyped<false>(src, ld, n, dim, scale, row_scale, dst, stride);
}

// Reads bytes [p, p + bytes) once in address order, four independent
// vectors per step (the loads, not the ORs, limit), and returns the OR of
// all the 32-bit words read (bytes past the last whole vector OR-ed in
// singly): the caller keeps it, so the loads cannot be dropped.
std::uint32_t FlashTouchImpl(const void* p, std::int64_t bytes) {
  const hn::ScalableTag<std::uint32_t> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d) * sizeof(std::uint32_t));  // bytes
  const auto* c = static_cast<const unsigned char*>(p);
  const auto at = [&](std::int64_t i) {  // unaligned: a bfloat16 cache is 2-byte aligned
    return hn::LoadU(d, reinterpret_cast<const std::uint32_t*>(c + i));
  };
  auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
  std::int64_t i = 0;
  for (; i + 4 * N <= bytes; i += 4 * N) {
    a0 = hn::Or(a0, at(i));
    a1 = hn::Or(a1, at(i + N));
    a2 = hn::Or(a2, at(i + 2 * N));
    a3 = hn::Or(a3, at(i + 3 * N));
  }
  for (; i + N <= bytes; i += N) a0 = hn::Or(a0, at(i));
  std::uint32_t all = 0;
  for (; i < bytes; ++i) all |= c[i];
  HWY_ALIGN std::uint32_t lanes[hn::MaxLanes(d)];
  hn::Store(hn::Or(hn::Or(a0, a1), hn::Or(a2, a3)), d, lanes);
  for (std::size_t x = 0; x < hn::Lanes(d); ++x) all |= lanes[x];
  return all;
}

void FlashLoadRowsImpl(int store, const void* src, std::int64_t stride, std::int64_t n,
                       std::int64_t dim, float* dst, std::int64_t ld) {
  if (store == 0) return LoadRowsTyped<Store::kF32>(src, stride, n, dim, dst, ld);
  if (store == 1) return LoadRowsTyped<Store::kBF16>(src, stride, n, dim, dst, ld);
  LoadRowsTyped<Store::kF16>(src, stride, n, dim, dst, ld);
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::kernels::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
