// posenc/shaw.h: relative position representations on keys and values.
//
// Shaw, Uszkoreit, Vaswani 2018, "Self-Attention with Relative Position
// Representations", https://arxiv.org/abs/1803.02155, eq. (3)-(5):
//   idx(i, j) = clip(j - i, -k, k) + k            (k = clip distance >= 0)
//   e_ij      = q_i . (k_j + a^K[idx(i, j)]) / sqrt(D)
//   z_i       = sum_j alpha_ij (v_j + a^V[idx(i, j)])
// a^K and a^V are learned [2k + 1, D] tables shared by all heads (as in the
// paper and tensor2tensor `dot_product_attention_relative`; HF BERT's
// `relative_key` used the same idea with an unclipped table and was removed
// from transformers in v5, PR #41170, so posenc is the maintained reference).
// Positions are absolute token positions; i and j above are p_q and p_k.
//
// This file gives the position terms only; the attention (q.k, softmax, v)
// is the caller's. Per-row functions for attention loops:
//   ShawAddKeyLogits   logits[c] += scale * q . a^K[idx(p_q, p_k[c])]
//   ShawAddValueOutput out[:]    += sum_c probs[c] * a^V[idx(p_q, p_k[c])]
// and their backward:
//   ShawKeyTableGrad   dA^K[idx] += scale * dlogits[c] * q
//   ShawKeyQueryGrad   dq        += scale * sum_c dlogits[c] * a^K[idx]
//   ShawValueTableGrad dA^V[idx] += probs[c] * dout
//   ShawValueProbsGrad dprobs[c] += dout . a^V[idx]
// Numerics: float32 rows accumulate in float32 (error vs float64 <= D * 2^-24
// relative to sum |terms|); float64 rows in float64. Any positions in
// [0, kMaxPosition]; the index is always in [0, 2k].
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/relative.h"
#include "posenc/scheme.h"
#include "posenc/tensor.h"

namespace posenc {

struct ShawParams {
  std::int64_t clip = 16;     // k >= 0 (<= 2^20); table rows 2k + 1
  std::int64_t head_dim = 0;  // D in [1, 65536]
  std::int64_t TableRows() const { return 2 * clip + 1; }
};

// Throws InvalidArgument naming clip or head_dim.
void ValidateShawParams(const ShawParams& params);

// idx(p_q, p_k) = clip(p_k - p_q, -k, k) + k, in [0, 2k]. Unchecked.
inline std::int64_t ShawIndex(std::int64_t clip, std::int64_t query_pos,
                              std::int64_t key_pos) noexcept {
  std::int64_t r = key_pos - query_pos;
  r = r < -clip ? -clip : (r > clip ? clip : r);
  return r + clip;
}

// Throws InvalidArgument unless `table` is a rank-2 [2k + 1, D] view of
// float32 or float64 (named `arg`, e.g. "a_key"), contiguous rows.
void ValidateShawTable(const ShawParams& params, const TensorView& table, std::string_view arg);

// ---- per-row functions (unchecked: validate params and tables once) ----
// `table` points at a contiguous [2k + 1, D] table; q, out, dq, dout have D
// entries; key_pos, logits, probs, dlogits, dprobs have nk entries.
void ShawAddKeyLogits(const ShawParams& p, const float* a_key, const float* q,
                      std::int64_t query_pos, const std::int64_t* key_pos, std::int64_t nk,
                      float scale, float* logits) noexcept;
void ShawAddKeyLogits(const ShawParams& p, const double* a_key, const double* q,
                      std::int64_t query_pos, const std::int64_t* key_pos, std::int64_t nk,
                      double scale, double* logits) noexcept;

void ShawAddValueOutput(const ShawParams& p, const float* a_value, const float* probs,
                        std::int64_t query_pos, const std::int64_t* key_pos, std::int64_t nk,
                        float* out) noexcept;
void ShawAddValueOutput(const ShawParams& p, const double* a_value, const double* probs,
                        std::int64_t query_pos, const std::int64_t* key_pos, std::int64_t nk,
                        double* out) noexcept;

void ShawKeyTableGrad(const ShawParams& p, const float* q, std::int64_t query_pos,
                      const std::int64_t* key_pos, std::int64_t nk, const float* dlogits,
                      float scale, float* d_a_key) noexcept;
void ShawKeyTableGrad(const ShawParams& p, const double* q, std::int64_t query_pos,
                      const std::int64_t* key_pos, std::int64_t nk, const double* dlogits,
                      double scale, double* d_a_key) noexcept;

void ShawKeyQueryGrad(const ShawParams& p, const float* a_key, std::int64_t query_pos,
                      const std::int64_t* key_pos, std::int64_t nk, const float* dlogits,
                      float scale, float* dq) noexcept;
void ShawKeyQueryGrad(const ShawParams& p, const double* a_key, std::int64_t query_pos,
                      const std::int64_t* key_pos, std::int64_t nk, const double* dlogits,
                      double scale, double* dq) noexcept;

void ShawValueTableGrad(const ShawParams& p, const float* probs, std::int64_t query_pos,
                        const std::int64_t* key_pos, std::int64_t nk, const float* dout,
                        float* d_a_value) noexcept;
void ShawValueTableGrad(const ShawParams& p, const double* probs, std::int64_t query_pos,
                        const std::int64_t* key_pos, std::int64_t nk, const double* dout,
                        double* d_a_value) noexcept;

void ShawValueProbsGrad(const ShawParams& p, const float* a_value, std::int64_t query_pos,
                        const std::int64_t* key_pos, std::int64_t nk, const float* dout,
                        float* dprobs) noexcept;
void ShawValueProbsGrad(const ShawParams& p, const double* a_value, std::int64_t query_pos,
                        const std::int64_t* key_pos, std::int64_t nk, const double* dout,
                        double* dprobs) noexcept;

// ---- whole-matrix helpers (validated; tests and pictures) ----
// Queries at query_offset + i, keys at j. Computed in float64; q, probs,
// logits, out of any dtype (strided), tables as ValidateShawTable: q [Sq, D],
// probs/logits [Sq, Sk], out [Sq, D]. Empty sequences are rejected.
// logits[i, j] (=|+=) scale * q_i . a^K[idx(i, j)].
void ShawKeyLogitsMatrix(const ShawParams& params, const TensorView& a_key, const TensorView& q,
                         std::int64_t query_offset, std::int64_t key_len, double scale,
                         const TensorView& logits, BiasWrite write);
// out[i, :] (=|+=) sum_j probs[i, j] a^V[idx(i, j)].
void ShawValueOutputMatrix(const ShawParams& params, const TensorView& a_value,
                           const TensorView& probs, std::int64_t query_offset,
                           const TensorView& out, BiasWrite write);

// idx(query_offset + i, j) for every pair, row-major [query_len, key_len].
std::vector<std::int64_t> ShawIndexMatrix(const ShawParams& params, std::int64_t query_len,
                                          std::int64_t key_len, std::int64_t query_offset = 0);

// The attention scheme "shaw": q_i . a^K[idx] inside the scaled logit and
// a^V[idx] added to v_j, idx = ShawIndex(clip, p, r). a_key [2 clip + 1, D]
// and a_value [2 clip + 1, Dv] (float32 or float64) are views the caller
// keeps alive; params.head_dim must equal D (and Dv).
PositionScheme ShawScheme(const ShawParams& params, const TensorView& a_key,
                          const TensorView& a_value);

}  // namespace posenc
