// Per-target decode logits of the fused attention (included once per
// Highway target by flash.cc, after flash-inl.h): q rows against key rows,
// one transposing lane sum per group of keys; the key rows as float32 rows
// or in their storage, read in place. Numerics and coverage:
// kernels/simd/flash.h (FlashDecodeLogits).

#if defined(POSENC_KERNELS_SIMD_FLASH_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_SIMD_FLASH_DECODE_INL_H_
#undef POSENC_KERNELS_SIMD_FLASH_DECODE_INL_H_
#else
#define POSENC_KERNELS_SIMD_FLASH_DECODE_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace posenc::kernels::simd {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

// Sums each of the kN vectors a[] over its lanes into lane i of the result
// (kN = Lanes): a tree of ConcatEven / ConcatOdd + Add (after each level,
// vector i holds the partial sums of vectors 2i and 2i + 1 side by side),
// log2(Lanes) levels instead of one horizontal sum per vector. Unrolled at
// compile time so the vectors stay in registers.
template <std::size_t kN, class D, class V>
HWY_INLINE V SumLanesOfEach(D d, const V* a) {
#if HWY_TARGET == HWY_SCALAR  // one lane: each vector is its own sum
  (void)d;
  return a[0];
#else
  if constexpr (kN == 1) {
    (void)d;
    return a[0];
  } else {
    V b[kN / 2];
    for (std::size_t i = 0; i < kN / 2; ++i) {
      b[i] = hn::Add(hn::ConcatEven(d, a[2 * i + 1], a[2 * i]),
                     hn::ConcatOdd(d, a[2 * i + 1], a[2 * i]));
    }
    return SumLanesOfEach<kN / 2>(d, b);
  }
#endif
}

// Decode logits: s[r * lds + j] = q_r . k_j for r < R, j < Pad(nk), with k
// as rows (stride ldkr, readable up to Pad(nk) rows, zero-padded to dim, a
// multiple of kFlashPad): per query row and group of Lanes keys, one vector
// accumulator per key along dim (Lanes independent FMA chains), then one
// transposing lane sum (SumLanesOfEach) stored as a vector.
void FlashDecodeLogitsImpl(const float* q, std::int64_t ldq, std::int64_t R, const float* k,
                           std::int64_t ldkr, std::int64_t nk, std::int64_t dim, float* s,
                           std::int64_t lds) {
  const hn::ScalableTag<float> d;
  constexpr std::size_t kN = hn::MaxLanes(decltype(d)());
  using V = hn::Vec<decltype(d)>;
  for (std::int64_t j0 = 0; j0 < nk; j0 += static_cast<std::int64_t>(kN)) {
    const float* kj = k + j0 * ldkr;
    for (std::int64_t r = 0; r < R; ++r) {
      const float* qr = q + r * ldq;
      V acc[kN];
      for (std::size_t jj = 0; jj < kN; ++jj) acc[jj] = hn::Zero(d);
      for (std::int64_t x = 0; x < dim; x += static_cast<std::int64_t>(kN)) {
        const V qv = hn::LoadU(d, qr + x);
        for (std::size_t jj = 0; jj < kN; ++jj) {
          acc[jj] =
              hn::MulAdd(qv, hn::LoadU(d, kj + static_cast<std::int64_t>(jj) * ldkr + x), acc[jj]);
        }
      }
      hn::StoreU(SumLanesOfEach<kN>(d, acc), d, s + r * lds + j0);
    }
  }
}

// FlashDecodeLogitsImpl for key rows in their storage S, converted in
// registers, each key row read once for kRows query rows: keys in passes of
// kPass (pairs), every (row, key) accumulator the same FMA chain along dim as
// FlashDecodeLogitsImpl's, each pair's first lane-sum level taken at once
// (the first level of SumLanesOfEach), the rest as there: bit-identical to
// FlashDecodeLogitsImpl on the float32 copy of the rows. Keys at or past nk
// are not read and give 0, up to Pad(nk).
#if HWY_TARGET != HWY_SCALAR
template <Store S, int kRows, int kPass>
HWY_INLINE void DecodeLogitsStoredRows(const float* q, std::int64_t ldq, const unsigned char* k,
                                       std::int64_t ldkr, std::int64_t nk, std::int64_t dim,
                                       float* s, std::int64_t lds) {
  const hn::ScalableTag<float> d;
  constexpr std::size_t kN = hn::MaxLanes(decltype(d)());
  constexpr std::int64_t kB = kStoreBytes<S>;
  static_assert(kN % kPass == 0 && kPass % 2 == 0, "passes of whole pairs within a group");
  using V = hn::Vec<decltype(d)>;
  const std::int64_t padded = (nk + kFlashPad - 1) / kFlashPad * kFlashPad;
  for (std::int64_t j0 = 0; j0 < padded; j0 += static_cast<std::int64_t>(kN)) {
    V level[kRows][kN / 2];
    for (std::size_t p0 = 0; p0 < kN; p0 += kPass) {
      V a[kRows][kPass];
      for (int r = 0; r < kRows; ++r)
        for (int c = 0; c < kPass; ++c) a[r][c] = hn::Zero(d);
      const std::int64_t j = j0 + static_cast<std::int64_t>(p0);
      const std::int64_t valid = nk - j;  // keys of this pass to read
      const unsigned char* kj = valid > 0 ? k + j * ldkr * kB : k;
      for (std::int64_t x = 0; x < dim && valid > 0; x += static_cast<std::int64_t>(kN)) {
        V kv[kPass];
        for (int c = 0; c < kPass; ++c) {
          kv[c] = c < valid ? LoadF<S>(d, kj + (c * ldkr + x) * kB) : hn::Zero(d);
        }
        for (int r = 0; r < kRows; ++r) {
          const V qv = hn::LoadU(d, q + r * ldq + x);
          for (int c = 0; c < kPass; ++c) a[r][c] = hn::MulAdd(qv, kv[c], a[r][c]);
        }
      }
      for (int r = 0; r < kRows; ++r) {
        for (int c = 0; c < kPass; c += 2) {
          level[r][(p0 + static_cast<std::size_t>(c)) / 2] = hn::Add(
              hn::ConcatEven(d, a[r][c + 1], a[r][c]), hn::ConcatOdd(d, a[r][c + 1], a[r][c]));
        }
      }
    }
    for (int r = 0; r < kRows; ++r) {
      hn::StoreU(SumLanesOfEach<kN / 2>(d, level[r]), d, s + r * lds + j0);
    }
  }
}
#endif  // HWY_TARGET != HWY_SCALAR

template <Store S>
void DecodeLogitsStoredTyped(const float* q, std::int64_t ldq, std::int64_t R, const void* k,
                             std::int64_t ldkr, std::int64_t nk, std::int64_t dim, float* s,
                             std::int64_t lds) {
  const auto* kb = static_cast<const unsigned char*>(k);
#if HWY_TARGET == HWY_SCALAR  // one lane: no pairs to sum
  const hn::ScalableTag<float> d;
  for (std::int64_t r = 0; r < R; ++r) {
    for (std::int64_t j = 0; j < (nk + kFlashPad - 1) / kFlashPad * kFlashPad; ++j) {
      auto acc = hn::Zero(d);
      for (std::int64_t x = 0; j < nk && x < dim; ++x) {
        acc = hn::MulAdd(hn::LoadU(d, q + r * ldq + x),
                         LoadF<S>(d, kb + (j * ldkr + x) * kStoreBytes<S>), acc);
      }
      s[r * lds + j] = hn::GetLane(acc);
    }
  }
#else
  constexpr std::size_t kN = hn::MaxLanes(hn::ScalableTag<float>());
  // Keys per pass: the logits' register blocking (kFlashVecs: 4 x 4
  // accumulators in AVX-512's 32 registers, 4 x 2 in 16).
  constexpr int kPass = kFlashVecs < static_cast<int>(kN) ? kFlashVecs : 2;
  std::int64_t r = 0;
  for (; r + 4 <= R; r += 4) {
    DecodeLogitsStoredRows<S, 4, kPass>(q + r * ldq, ldq, kb, ldkr, nk, dim, s + r * lds, lds);
  }
  if (R - r >= 2) {
    DecodeLogitsStoredRows<S, 2, kPass>(q + r * ldq, ldq, kb, ldkr, nk, dim, s + r * lds, lds);
    r += 2;
  }
  if (R - r == 1) {
    DecodeLogitsStoredRows<S, 1, kPass>(q + r * ldq, ldq, kb, ldkr, nk, dim, s + r * lds, lds);
  }
#endif
}

void FlashDecodeLogitsStoredImpl(int store, const float* q, std::int64_t ldq, std::int64_t R,
                                 const void* k, std::int64_t ldkr, std::int64_t nk,
                                 std::int64_t dim, float* s, std::int64_t lds) {
  if (store == 0) return DecodeLogitsStoredTyped<Store::kF32>(q, ldq, R, k, ldkr, nk, dim, s, lds);
  if (store == 1) return DecodeLogitsStoredTyped<Store::kBF16>(q, ldq, R, k, ldkr, nk, dim, s, lds);
  DecodeLogitsStoredTyped<Store::kF16>(q, ldq, R, k, ldkr, nk, dim, s, lds);
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::kernels::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
