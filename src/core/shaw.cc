// Shaw et al. 2018 relative position representations (keys and values).
// Formula, paper, conventions: include/posenc/shaw.h. Row functions are
// plain loops over contiguous rows, templated on float / double; matrix
// helpers validate their views and compute in float64.
#include "posenc/shaw.h"

#include <cmath>
#include <string>

#include "posenc/dtype.h"
#include "posenc/error.h"
#include "posenc/positions.h"

namespace posenc {

void ValidateShawParams(const ShawParams& params) {
  Require(params.clip >= 0 && params.clip <= (std::int64_t{1} << 20), "clip", params.clip,
          "a clipping distance k in [0, 2^20] (the tables have 2k+1 rows)");
  Require(params.head_dim >= 1 && params.head_dim <= 65536, "head_dim", params.head_dim,
          "a dimension in [1, 65536]");
}

void ValidateShawTable(const ShawParams& params, const TensorView& table, std::string_view arg) {
  ValidateShawParams(params);
  const std::string a(arg);
  ValidateView(table, a, 2);
  if (table.shape[0] != params.TableRows()) {
    FailArgument(a + ".shape[0]", table.shape[0],
                 "2k+1 = " + std::to_string(params.TableRows()) +
                     " rows (clip k = " + std::to_string(params.clip) + ")");
  }
  if (table.shape[1] != params.head_dim) {
    FailArgument(a + ".shape[1]", table.shape[1],
                 "head_dim D = " + std::to_string(params.head_dim));
  }
  if (!(table.dtype == DType::kFloat32 || table.dtype == DType::kFloat64)) {
    FailArgument(a + ".dtype", DTypeName(table.dtype), "float32 or float64");
  }
  if (!(table.strides[1] == 1 && table.strides[0] == params.head_dim)) {
    FailArgument(a + ".strides", table.Describe(), "contiguous rows (row-major [2k+1, D])");
  }
}

namespace {

template <typename T>
void AddKeyLogits(const ShawParams& p, const T* a_key, const T* q, std::int64_t qp,
                  const std::int64_t* kp, std::int64_t nk, T scale, T* logits) {
  const std::int64_t d = p.head_dim;
  for (std::int64_t c = 0; c < nk; ++c) {
    const T* row = a_key + ShawIndex(p.clip, qp, kp[c]) * d;
    T dot = 0;
    for (std::int64_t e = 0; e < d; ++e) dot += q[e] * row[e];
    logits[c] += scale * dot;
  }
}

template <typename T>
void AddValueOutput(const ShawParams& p, const T* a_value, const T* probs, std::int64_t qp,
                    const std::int64_t* kp, std::int64_t nk, T* out) {
  const std::int64_t d = p.head_dim;
  for (std::int64_t c = 0; c < nk; ++c) {
    const T* row = a_value + ShawIndex(p.clip, qp, kp[c]) * d;
    const T w = probs[c];
    for (std::int64_t e = 0; e < d; ++e) out[e] += w * row[e];
  }
}

template <typename T>
void KeyTableGrad(const ShawParams& p, const T* q, std::int64_t qp, const std::int64_t* kp,
                  std::int64_t nk, const T* dlogits, T scale, T* d_a_key) {
  const std::int64_t d = p.head_dim;
  for (std::int64_t c = 0; c < nk; ++c) {
    T* row = d_a_key + ShawIndex(p.clip, qp, kp[c]) * d;
    const T g = scale * dlogits[c];
    for (std::int64_t e = 0; e < d; ++e) row[e] += g * q[e];
  }
}

template <typename T>
void KeyQueryGrad(const ShawParams& p, const T* a_key, std::int64_t qp, const std::int64_t* kp,
                  std::int64_t nk, const T* dlogits, T scale, T* dq) {
  const std::int64_t d = p.head_dim;
  for (std::int64_t c = 0; c < nk; ++c) {
    const T* row = a_key + ShawIndex(p.clip, qp, kp[c]) * d;
    const T g = scale * dlogits[c];
    for (std::int64_t e = 0; e < d; ++e) dq[e] += g * row[e];
  }
}

template <typename T>
void ValueTableGrad(const ShawParams& p, const T* probs, std::int64_t qp, const std::int64_t* kp,
                    std::int64_t nk, const T* dout, T* d_a_value) {
  const std::int64_t d = p.head_dim;
  for (std::int64_t c = 0; c < nk; ++c) {
    T* row = d_a_value + ShawIndex(p.clip, qp, kp[c]) * d;
    const T w = probs[c];
    for (std::int64_t e = 0; e < d; ++e) row[e] += w * dout[e];
  }
}

template <typename T>
void ValueProbsGrad(const ShawParams& p, const T* a_value, std::int64_t qp, const std::int64_t* kp,
                    std::int64_t nk, const T* dout, T* dprobs) {
  const std::int64_t d = p.head_dim;
  for (std::int64_t c = 0; c < nk; ++c) {
    const T* row = a_value + ShawIndex(p.clip, qp, kp[c]) * d;
    T dot = 0;
    for (std::int64_t e = 0; e < d; ++e) dot += dout[e] * row[e];
    dprobs[c] += dot;
  }
}

}  // namespace

#define POSENC_SHAW_ROWS(T)                                                                      \
  void ShawAddKeyLogits(const ShawParams& p, const T* a_key, const T* q, std::int64_t query_pos, \
                        const std::int64_t* key_pos, std::int64_t nk, T scale,                   \
                        T* logits) noexcept {                                                    \
    AddKeyLogits(p, a_key, q, query_pos, key_pos, nk, scale, logits);                            \
  }                                                                                              \
  void ShawAddValueOutput(const ShawParams& p, const T* a_value, const T* probs,                 \
                          std::int64_t query_pos, const std::int64_t* key_pos, std::int64_t nk,  \
                          T* out) noexcept {                                                     \
    AddValueOutput(p, a_value, probs, query_pos, key_pos, nk, out);                              \
  }                                                                                              \
  void ShawKeyTableGrad(const ShawParams& p, const T* q, std::int64_t query_pos,                 \
                        const std::int64_t* key_pos, std::int64_t nk, const T* dlogits, T scale, \
                        T* d_a_key) noexcept {                                                   \
    KeyTableGrad(p, q, query_pos, key_pos, nk, dlogits, scale, d_a_key);                         \
  }                                                                                              \
  void ShawKeyQueryGrad(const ShawParams& p, const T* a_key, std::int64_t query_pos,             \
                        const std::int64_t* key_pos, std::int64_t nk, const T* dlogits, T scale, \
                        T* dq) noexcept {                                                        \
    KeyQueryGrad(p, a_key, query_pos, key_pos, nk, dlogits, scale, dq);                          \
  }                                                                                              \
  void ShawValueTableGrad(const ShawParams& p, const T* probs, std::int64_t query_pos,           \
                          const std::int64_t* key_pos, std::int64_t nk, const T* dout,           \
                          T* d_a_value) noexcept {                                               \
    ValueTableGrad(p, probs, query_pos, key_pos, nk, dout, d_a_value);                           \
  }                                                                                              \
  void ShawValueProbsGrad(const ShawParams& p, const T* a_value, std::int64_t query_pos,         \
                          const std::int64_t* key_pos, std::int64_t nk, const T* dout,           \
                          T* dprobs) noexcept {                                                  \
    ValueProbsGrad(p, a_value, query_pos, key_pos, nk, dout, dprobs);                            \
  }

POSENC_SHAW_ROWS(float)
POSENC_SHAW_ROWS(double)
#undef POSENC_SHAW_ROWS

namespace {

double At(const TensorView& v, std::int64_t r, std::int64_t c) {
  return LoadAsDouble(v.data, v.dtype, r * v.strides[0] + c * v.strides[1]);
}

void Put(const TensorView& v, std::int64_t r, std::int64_t c, double x, BiasWrite write) {
  const std::int64_t off = r * v.strides[0] + c * v.strides[1];
  if (write == BiasWrite::kAdd) x += LoadAsDouble(v.data, v.dtype, off);
  StoreFromDouble(v.data, v.dtype, off, x);
}

void CheckOffset(std::int64_t query_offset, std::int64_t query_len) {
  if (!(query_offset >= 0 && query_offset <= kMaxPosition - (query_len - 1))) {
    FailArgument("query_offset", query_offset,
                 "an offset >= 0 with query_offset + query_len - 1 <= 2^24 - 1");
  }
}

}  // namespace

void ShawKeyLogitsMatrix(const ShawParams& params, const TensorView& a_key, const TensorView& q,
                         std::int64_t query_offset, std::int64_t key_len, double scale,
                         const TensorView& logits, BiasWrite write) {
  ValidateShawTable(params, a_key, "a_key");
  ValidateView(q, "q", 2);
  if (q.shape[1] != params.head_dim) {
    FailArgument("q.shape[1]", q.shape[1],
                 "head_dim D = " + std::to_string(params.head_dim) + " (the a_key width)");
  }
  Require(key_len >= 1, "key_len", key_len, "at least 1 (an empty key sequence)");
  Require(std::isfinite(scale), "scale", scale, "a finite number");
  const std::int64_t sq = q.shape[0];
  CheckOffset(query_offset, sq);
  ValidateView(logits, "logits", 2, /*writable=*/true);
  if (!(logits.shape[0] == sq && logits.shape[1] == key_len)) {
    FailArgument(
        "logits.shape", logits.Describe(),
        "[query_len, key_len] = [" + std::to_string(sq) + ", " + std::to_string(key_len) + "]");
  }
  RequireNoOverlap(logits, "logits", q, "q", false);
  RequireNoOverlap(logits, "logits", a_key, "a_key", false);
  for (std::int64_t i = 0; i < sq; ++i) {
    for (std::int64_t j = 0; j < key_len; ++j) {
      const std::int64_t idx = ShawIndex(params.clip, query_offset + i, j);
      double dot = 0.0;
      for (std::int64_t e = 0; e < params.head_dim; ++e) dot += At(q, i, e) * At(a_key, idx, e);
      Put(logits, i, j, scale * dot, write);
    }
  }
}

void ShawValueOutputMatrix(const ShawParams& params, const TensorView& a_value,
                           const TensorView& probs, std::int64_t query_offset,
                           const TensorView& out, BiasWrite write) {
  ValidateShawTable(params, a_value, "a_value");
  ValidateView(probs, "probs", 2);
  const std::int64_t sq = probs.shape[0], sk = probs.shape[1];
  CheckOffset(query_offset, sq);
  ValidateView(out, "out", 2, /*writable=*/true);
  if (!(out.shape[0] == sq && out.shape[1] == params.head_dim)) {
    FailArgument(
        "out.shape", out.Describe(),
        "[query_len, D] = [" + std::to_string(sq) + ", " + std::to_string(params.head_dim) + "]");
  }
  RequireNoOverlap(out, "out", probs, "probs", false);
  RequireNoOverlap(out, "out", a_value, "a_value", false);
  for (std::int64_t i = 0; i < sq; ++i) {
    for (std::int64_t e = 0; e < params.head_dim; ++e) {
      double sum = 0.0;
      for (std::int64_t j = 0; j < sk; ++j) {
        sum += At(probs, i, j) * At(a_value, ShawIndex(params.clip, query_offset + i, j), e);
      }
      Put(out, i, e, sum, write);
    }
  }
}

std::vector<std::int64_t> ShawIndexMatrix(const ShawParams& params, std::int64_t query_len,
                                          std::int64_t key_len, std::int64_t query_offset) {
  ValidateShawParams(params);
  Require(query_len >= 1 && query_len <= 65536, "query_len", query_len, "a length in [1, 65536]");
  Require(key_len >= 1 && key_len <= 65536, "key_len", key_len, "a length in [1, 65536]");
  CheckOffset(query_offset, query_len);
  std::vector<std::int64_t> m(static_cast<std::size_t>(query_len * key_len));
  for (std::int64_t i = 0; i < query_len; ++i)
    for (std::int64_t j = 0; j < key_len; ++j)
      m[static_cast<std::size_t>(i * key_len + j)] = ShawIndex(params.clip, query_offset + i, j);
  return m;
}

}  // namespace posenc
