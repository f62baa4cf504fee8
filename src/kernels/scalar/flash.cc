// Scalar flash tile and decode kernels (kernels/scalar/flash.h).
#include "kernels/scalar/flash.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace posenc::kernels::scalar {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float Dot(const float* a, const float* b, std::int64_t n) {
  float s = 0.0f;
  for (std::int64_t x = 0; x < n; ++x) s += a[x] * b[x];
  return s;
}
}  // namespace

void FlashTileLogits(const float* q, std::int64_t ldq, const float* kt, std::int64_t nq,
                     std::int64_t dim, std::int64_t ld, float* s) {
  for (std::int64_t i = 0; i < nq; ++i) {
    float* row = s + i * ld;
    std::fill(row, row + ld, 0.0f);
    const float* qi = q + i * ldq;
    for (std::int64_t x = 0; x < dim; ++x) {
      const float a = qi[x];
      const float* kx = kt + x * ld;
      for (std::int64_t j = 0; j < ld; ++j) row[j] += a * kx[j];
    }
  }
}

float FlashExpRow(float* row, std::int64_t n, float max) {
  float sum = 0.0f;
  for (std::int64_t j = 0; j < n; ++j) {
    row[j] = row[j] == kNegInf ? 0.0f : std::exp(row[j] - max);
    sum += row[j];
  }
  return sum;
}

void FlashAccumulatePV(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                       std::int64_t nk, std::int64_t ldv, float* acc) {
  FlashAccumulatePVScaled(p, ldp, v, nq, nk, ldv, nullptr, acc);
}

void FlashAccumulatePVScaled(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                             std::int64_t nk, std::int64_t ldv, const float* alpha, float* acc) {
  for (std::int64_t i = 0; i < nq; ++i) {
    float* a = acc + i * ldv;
    if (alpha != nullptr) {
      for (std::int64_t x = 0; x < ldv; ++x) a[x] *= alpha[i];
    }
    for (std::int64_t j = 0; j < nk; ++j) {
      const float pj = p[i * ldp + j];
      if (pj == 0.0f) continue;
      for (std::int64_t x = 0; x < ldv; ++x) a[x] += pj * v[j * ldv + x];
    }
  }
}

void FlashAccumulatePTV(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                        std::int64_t nk, std::int64_t ldv, float* acc) {
  for (std::int64_t i = 0; i < nq; ++i) {
    for (std::int64_t j = 0; j < nk; ++j) {
      const float pij = p[i * ldp + j];
      if (pij == 0.0f) continue;
      for (std::int64_t x = 0; x < ldv; ++x) acc[j * ldv + x] += pij * v[i * ldv + x];
    }
  }
}

void FlashBackwardRow(float* s, float* dp, std::int64_t nk, std::int64_t ld, float scale,
                      const float* bias, float lse, float delta) {
  for (std::int64_t j = 0; j < ld; ++j) {
    const float x = j < nk ? s[j] * scale + (bias ? bias[j] : 0.0f) : kNegInf;
    const float p = x == kNegInf ? 0.0f : std::exp(x - lse);
    s[j] = p;
    dp[j] = p * (dp[j] - delta);
  }
}

void FlashAddRow(float* dst, const float* src, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) dst[j] += src[j];
}

float FlashScaleRow(float* row, std::int64_t nk, std::int64_t ld, float scale, const float* bias) {
  float mx = kNegInf;
  for (std::int64_t j = 0; j < ld; ++j) {
    row[j] = j < nk ? row[j] * scale + (bias ? bias[j] : 0.0f) : kNegInf;
    mx = std::max(mx, row[j]);
  }
  return mx;
}

void FlashDecodeLogits(const float* q, std::int64_t ldq, std::int64_t rows, const float* k,
                       std::int64_t ldk_rows, std::int64_t nk, std::int64_t dim, float* s,
                       std::int64_t lds) {
  for (std::int64_t r = 0; r < rows; ++r) {
    std::fill(s + r * lds, s + r * lds + lds, 0.0f);
    for (std::int64_t j = 0; j < nk; ++j) s[r * lds + j] = Dot(q + r * ldq, k + j * ldk_rows, dim);
  }
}

void FlashAccumulatePVRows(const float* p, std::int64_t ldp, const float* v, std::int64_t ldvr,
                           std::int64_t nq, std::int64_t nk, std::int64_t ldv, const float* alpha,
                           float* acc) {
  for (std::int64_t i = 0; i < nq; ++i) {
    for (std::int64_t x = 0; x < ldv; ++x) acc[i * ldv + x] *= alpha[i];
    for (std::int64_t j = 0; j < nk; ++j) {
      for (std::int64_t x = 0; x < ldv; ++x) acc[i * ldv + x] += p[i * ldp + j] * v[j * ldvr + x];
    }
  }
}

}  // namespace posenc::kernels::scalar
