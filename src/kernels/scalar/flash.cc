// Scalar flash tile and decode kernels (kernels/scalar/flash.h).
#include "kernels/scalar/flash.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace posenc::kernels::scalar {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// P = exp(y) by the exp `exp` names (kernels/flash_exp.h).
float Exp(float y, FlashExp exp) {
  return exp == FlashExp::kBFloat16 ? ExpNonPositiveBf16(y) : std::exp(y);
}

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

float FlashExpRow(float* row, std::int64_t n, float max, FlashExp exp) {
  float sum = 0.0f;
  for (std::int64_t j = 0; j < n; ++j) {
    row[j] = row[j] == kNegInf ? 0.0f : Exp(row[j] - max, exp);
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
                      const float* bias, float lse, float delta, FlashExp exp) {
  for (std::int64_t j = 0; j < ld; ++j) {
    const float x = j < nk ? s[j] * scale + (bias ? bias[j] : 0.0f) : kNegInf;
    const float p = x == kNegInf ? 0.0f : Exp(x - lse, exp);
    s[j] = p;
    dp[j] = p * (dp[j] - delta);
  }
}

void FlashAddRow(float* dst, const float* src, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) dst[j] += src[j];
}

void FlashLogSumExp(const float* m, const float* l, std::int64_t n, float* lse) {
  for (std::int64_t i = 0; i < n; ++i) {
    lse[i] = l[i] > 0.0f ? m[i] + static_cast<float>(std::log(static_cast<double>(l[i]))) : kNegInf;
  }
}

void FlashRowDotsF64(const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                     std::int64_t n, std::int64_t dim, double* out) {
  for (std::int64_t r = 0; r < n; ++r) {
    double sums[16] = {};
    for (std::int64_t x = 0; x < dim; ++x) {
      sums[x % 16] += static_cast<double>(a[r * lda + x]) * b[r * ldb + x];
    }
    for (int w = 8; w >= 1; w /= 2) {
      for (int k = 0; k < w; ++k) sums[k] += sums[k + w];
    }
    out[r] = sums[0];
  }
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
