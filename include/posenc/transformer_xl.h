// posenc/transformer_xl.h: Transformer-XL relative attention scores.
//
// Dai et al. 2019, "Transformer-XL: Attentive Language Models Beyond a
// Fixed-Length Context", https://arxiv.org/abs/1901.02860, section 3.3:
//   score(i, j) = [ (q_i + u) . k_j  +  (q_i + v) . (W_R R_{i-j}) ] * scale
// (terms (a)+(c) and (b)+(d) of the paper; u = r_w_bias, v = r_r_bias, one
// per head; scale = 1/sqrt(d_head)). Reference: HF transformers
// `RelPartialLearnableMultiHeadAttn` (deleted in v5, PR #42235; last at the
// parent of 9f31104786), so posenc is the maintained reference.
//
// Conventions (all as HF):
//  - R is a sinusoid with [sin | cos] halves, inv_freq = base^(-2c/d),
//    over pos_seq = klen-1, klen-2, ..., 0 (DESCENDING): row r of R encodes
//    distance klen-1-r. clamp_len > 0 clamps distances to <= clamp_len.
//  - Queries are the last qlen of the klen keys (klen = mem_len + qlen):
//    query i sits at mem_len + i, so its distance to key j is
//    mem_len + i - j, and R row klen-1-distance = qlen-1-i+j.
//  - BD is computed for all (i, r) as (q_i + v) . RW[r] (RW = W_R R, the
//    caller's projection, [klen, d_head] per head) and aligned with
//    rel_shift: pad one zero column on the left, view [klen+1, qlen], drop
//    the first row, view [qlen, klen]. The direct form indexes RW by the
//    distance instead; the two agree wherever distance >= 0 (the causal
//    region the mask keeps). Above it (future keys) rel_shift leaves the
//    zero pad (at distance -1) and wrapped values of the next row; the
//    direct form gives the content term only there. Both are masked by
//    Transformer-XL's causal mask.
// Numerics: R in float64 rounded once to the output dtype (float32: within
// 2^-24 + 1e-12 of float64); scores in float64 (matrix helpers) or the row
// type. Valid: 1 <= qlen <= klen <= 2^20, distances < 2^24.
#pragma once

#include <cstdint>
#include <string_view>

#include "posenc/relative.h"
#include "posenc/scheme.h"
#include "posenc/tensor.h"

namespace posenc {

struct TransformerXLParams {
  std::int64_t dim = 0;        // d_model of R: even, in [2, 65536]
  std::int64_t clamp_len = 0;  // > 0: distances clamped to clamp_len; <= 0: none
  double base = 10000.0;       // finite, > 1
};

// Throws InvalidArgument naming dim or base.
void ValidateTransformerXLParams(const TransformerXLParams& params);

// R: out [klen, dim] (any dtype, strided allowed); row r is the sinusoid of
// min(klen - 1 - r, clamp_len) as [sin(p w_0..) | cos(p w_0..)].
void TransformerXLPositionEmbedding(const TransformerXLParams& params, std::int64_t klen,
                                    const TensorView& out);

// Distance of query i to key j and the R row that encodes it. Unchecked.
inline std::int64_t TransformerXLDistance(std::int64_t qlen, std::int64_t klen, std::int64_t i,
                                          std::int64_t j) noexcept {
  return (klen - qlen) + i - j;
}
inline std::int64_t TransformerXLRow(std::int64_t klen, std::int64_t distance) noexcept {
  return klen - 1 - distance;
}

// ---- per-row function for attention loops (unchecked) ----
// For query i (of qlen) against all klen keys, adds the position terms
//   out[j] += scale * ( u . k_j + (q_i + v) . RW[TransformerXLRow(klen, d)] )
// with d = TransformerXLDistance(qlen, klen, i, j); keys with d < 0 get
// scale * u . k_j only. The caller adds scale * q_i . k_j (its content term).
// q, u, v: d_head entries; k, rw: klen rows at row strides ld_k, ld_rw.
void TransformerXLAddPositionTermsRow(const float* q, const float* u, const float* v,
                                      const float* k, std::int64_t ld_k, const float* rw,
                                      std::int64_t ld_rw, std::int64_t d_head, std::int64_t qlen,
                                      std::int64_t klen, std::int64_t i, float scale,
                                      float* out) noexcept;
void TransformerXLAddPositionTermsRow(const double* q, const double* u, const double* v,
                                      const double* k, std::int64_t ld_k, const double* rw,
                                      std::int64_t ld_rw, std::int64_t d_head, std::int64_t qlen,
                                      std::int64_t klen, std::int64_t i, double scale,
                                      double* out) noexcept;

// ---- whole-matrix helpers (validated, float64 arithmetic) ----
enum class TransformerXLMethod : std::uint8_t {
  kDirect,    // index RW by distance per (i, j)
  kRelShift,  // HF: BD for all (i, r), then RelShift
};
std::string_view TransformerXLMethodName(TransformerXLMethod m);  // "direct", "rel_shift"
TransformerXLMethod ParseTransformerXLMethod(std::string_view text,
                                             std::string_view arg = "method");

// HF _rel_shift of one [qlen, klen] matrix: out[i][j] = flat(padded)[i*klen
// + j + qlen] where padded = [zeros(qlen, 1) | x] (row-major). x, out any
// dtype, same shape, must not overlap.
void TransformerXLRelShift(const TensorView& x, const TensorView& out);

// Full scores of one head: q [qlen, d_head], k [klen, d_head], rw [klen,
// d_head], u and v [d_head], out [qlen, klen]; qlen <= klen; scale > 0
// finite (HF: 1/sqrt(d_head)). Any dtypes; computed in float64.
void TransformerXLScores(const TensorView& q, const TensorView& k, const TensorView& rw,
                         const TensorView& u, const TensorView& v, double scale,
                         TransformerXLMethod method, const TensorView& out);

// The attention scheme "transformer_xl": (q_i + u_h) . k_j + (q_i + v_h) .
// RW[row(p - r), h], scaled. u = r_w_bias [H, D], v = r_r_bias [H, D];
// rw = W_R R [R, H, D] in HF order: row r encodes distance R - 1 - r (R =
// klen in HF). Every visible pair with p >= r needs p - r < R; pairs with
// p < r (bidirectional) get the u . k term only. Views the caller keeps alive.
PositionScheme TransformerXLScheme(const TensorView& r_w_bias, const TensorView& r_r_bias,
                                   const TensorView& rw);

}  // namespace posenc
