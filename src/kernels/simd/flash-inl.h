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

HWY_BEFORE_NAMESPACE();
namespace posenc::kernels::simd {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

// Register blocking: kRows query rows x up to two vectors of keys per
// step (2 loads and kRows broadcasts feed 2 * kRows independent FMAs);
// ld is a multiple of the lane count on every target (kFlashPad is).
template <int kRows>
HWY_INLINE void LogitsRows(const float* q, const float* kt, std::int64_t dim, std::int64_t ld,
                           float* s) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t j = 0;
  for (; j + 2 * N <= ld; j += 2 * N) {
    hn::Vec<decltype(d)> a0[kRows], a1[kRows];
    for (int r = 0; r < kRows; ++r) a0[r] = a1[r] = hn::Zero(d);
    for (std::int64_t x = 0; x < dim; ++x) {
      const auto k0 = hn::LoadU(d, kt + x * ld + j);
      const auto k1 = hn::LoadU(d, kt + x * ld + j + N);
      for (int r = 0; r < kRows; ++r) {
        const auto qx = hn::Set(d, q[r * dim + x]);
        a0[r] = hn::MulAdd(qx, k0, a0[r]);
        a1[r] = hn::MulAdd(qx, k1, a1[r]);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      hn::StoreU(a0[r], d, s + r * ld + j);
      hn::StoreU(a1[r], d, s + r * ld + j + N);
    }
  }
  for (; j < ld; j += N) {
    hn::Vec<decltype(d)> a0[kRows];
    for (int r = 0; r < kRows; ++r) a0[r] = hn::Zero(d);
    for (std::int64_t x = 0; x < dim; ++x) {
      const auto k0 = hn::LoadU(d, kt + x * ld + j);
      for (int r = 0; r < kRows; ++r) a0[r] = hn::MulAdd(hn::Set(d, q[r * dim + x]), k0, a0[r]);
    }
    for (int r = 0; r < kRows; ++r) hn::StoreU(a0[r], d, s + r * ld + j);
  }
}

void FlashTileLogitsImpl(const float* q, const float* kt, std::int64_t nq, std::int64_t dim,
                         std::int64_t ld, float* s) {
  std::int64_t i = 0;
  for (; i + 4 <= nq; i += 4) LogitsRows<4>(q + i * dim, kt, dim, ld, s + i * ld);
  for (; i < nq; ++i) LogitsRows<1>(q + i * dim, kt, dim, ld, s + i * ld);
}

float FlashExpRowImpl(float* row, std::int64_t n, float max) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  const auto neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const auto vmax = hn::Set(d, max);
  auto sum = hn::Zero(d);
  for (std::int64_t j = 0; j < n; j += N) {
    const auto x = hn::LoadU(d, row + j);
    const auto visible = hn::Gt(x, neg_inf);
    const auto e = hn::IfThenElseZero(visible, hn::Exp(d, hn::Sub(x, vmax)));
    hn::StoreU(e, d, row + j);
    sum = hn::Add(sum, e);
  }
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

// Same blocking for P . V: kRows probability rows x up to two vectors of
// value columns per step.
template <int kRows>
HWY_INLINE void PVRows(const float* p, std::int64_t ldp, const float* v, std::int64_t nk,
                       std::int64_t ldv, float* acc) {
  const hn::ScalableTag<float> d;
  const auto N = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t x = 0;
  for (; x + 2 * N <= ldv; x += 2 * N) {
    hn::Vec<decltype(d)> a0[kRows], a1[kRows];
    for (int r = 0; r < kRows; ++r) {
      a0[r] = hn::LoadU(d, acc + r * ldv + x);
      a1[r] = hn::LoadU(d, acc + r * ldv + x + N);
    }
    for (std::int64_t j = 0; j < nk; ++j) {
      const auto v0 = hn::LoadU(d, v + j * ldv + x);
      const auto v1 = hn::LoadU(d, v + j * ldv + x + N);
      for (int r = 0; r < kRows; ++r) {
        const auto pj = hn::Set(d, p[r * ldp + j]);
        a0[r] = hn::MulAdd(pj, v0, a0[r]);
        a1[r] = hn::MulAdd(pj, v1, a1[r]);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      hn::StoreU(a0[r], d, acc + r * ldv + x);
      hn::StoreU(a1[r], d, acc + r * ldv + x + N);
    }
  }
  for (; x < ldv; x += N) {
    hn::Vec<decltype(d)> a0[kRows];
    for (int r = 0; r < kRows; ++r) a0[r] = hn::LoadU(d, acc + r * ldv + x);
    for (std::int64_t j = 0; j < nk; ++j) {
      const auto v0 = hn::LoadU(d, v + j * ldv + x);
      for (int r = 0; r < kRows; ++r) a0[r] = hn::MulAdd(hn::Set(d, p[r * ldp + j]), v0, a0[r]);
    }
    for (int r = 0; r < kRows; ++r) hn::StoreU(a0[r], d, acc + r * ldv + x);
  }
}

void FlashAccumulatePVImpl(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                           std::int64_t nk, std::int64_t ldv, float* acc) {
  std::int64_t i = 0;
  for (; i + 4 <= nq; i += 4) PVRows<4>(p + i * ldp, ldp, v, nk, ldv, acc + i * ldv);
  for (; i < nq; ++i) PVRows<1>(p + i * ldp, ldp, v, nk, ldv, acc + i * ldv);
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::kernels::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
