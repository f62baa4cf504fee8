// Backward of the fused (flash) attention: FlashAttentionBackward's validation and entry point
// (contract: include/posenc/flash_attention.h; the work split: flash_backward_engine.cc).
// Paper: FlashAttention-2 (Dao 2023, "FlashAttention-2: Faster Attention with Better Parallelism
// and Work Partitioning", Alg. 2), backward by recomputation from the row log-sum-exp.
// Formula (logit_ij = scale * q_i . k_j + T_ij, the forward's contract, with T_ij the scheme's
// terms: bias b_h(p, r) + scale * c(q_i, p, r); value terms a_ij added to the output):
//   P_ij  = exp(logit_ij - lse_i) (recomputed per tile);  D_i = dO_i . O_i (= sum_j P_ij dP_ij)
//   dP_ij = dO_i . (v_j + a_ij);   dS_ij = P_ij (dP_ij - D_i)   (d logit_ij)
//   dv_j += P_ij dO_i;   dk_j += scale dS_ij q_i;   dq_i += scale sum_j dS_ij (k_j + dc/dq)
// The scheme (attention/scheme_policy.h) supplies T_ij, its value terms and the gradients of its
// parameters. RoPE: q and k are rotated copies, so dq and dk are rotated back with R(-p) (ApplyRope
// kInverse); with pre-rotated keys dk stays as is.
// Design: inputs are validated here, at the boundary; the engine assumes validated shapes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention/flash_backward_engine.h"
#include "attention/flash_internal.h"
#include "attention/scheme_policy.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"

namespace posenc {
namespace {

using attention_internal::CheckAttentionTensor;
using flash_internal::BackwardCall;
using flash_internal::CheckLse;
using flash_internal::kNegInf;
using flash_internal::PositionRange;
using Index = std::int64_t;

using flash_internal::Z;

float LseAt(const TensorView& lse, Index b, Index h, Index i) {
  return lse.As<const float>()[b * lse.strides[0] + h * lse.strides[1] + i * lse.strides[2]];
}

// The positions [batch, len] and the min and max of every (batch, tile).
std::vector<PositionRange> TileRanges(const Positions& pos, Index batch, Index len, Index tile,
                                      std::vector<Index>& ids) {
  const Index tiles = (len + tile - 1) / tile;
  ids.assign(Z(batch * len), 0);
  for (Index b = 0; b < batch; ++b)
    for (Index s = 0; s < len; ++s) ids[Z(b * len + s)] = pos.At(b, s, len);
  std::vector<PositionRange> ranges;
  for (Index b = 0; b < batch; ++b)
    for (Index t = 0; t < tiles; ++t) {
      const Index n = std::min(tile, len - t * tile);
      ranges.push_back(pos.ids == nullptr  // default positions: offset + s
                           ? flash_internal::ConsecutiveRange(pos.offset + t * tile, n)
                           : flash_internal::RangeOf(&ids[Z(b * len + t * tile)], n));
    }
  return ranges;
}

// Validates a backward call against the float64 oracle's rules
// (AttentionReferenceBackward, src/attention/reference.cc): same shapes,
// overwrite rules and table gradients.
BackwardCall Validate(const AttentionParams& params, const TensorView& q, const TensorView& k,
                      const TensorView& v, const TensorView& out, const TensorView& dout,
                      const TensorView& lse, const AttentionGrads& g,
                      const FlashAttentionOptions& options) {
  BackwardCall c;
  c.p = flash_internal::SetupInputs(params, q, k, v, options);
  const auto& d = c.p.dims;
  const AttentionLayout L = params.layout;
  c.od = CheckAttentionTensor(out, L, "out", d.batch, d.query_len, d.heads, d.value_dim, false);
  c.dod = CheckAttentionTensor(dout, L, "dout", d.batch, d.query_len, d.heads, d.value_dim, false);
  flash_internal::CheckPrecisionInputs(c.p.precision, {{"dout", &dout}});
  c.dqd =
      CheckAttentionTensor(g.dq, L, "grads.dq", d.batch, d.query_len, d.heads, d.head_dim, true);
  c.dkd =
      CheckAttentionTensor(g.dk, L, "grads.dk", d.batch, d.key_len, d.kv_heads, d.head_dim, true);
  c.dvd =
      CheckAttentionTensor(g.dv, L, "grads.dv", d.batch, d.key_len, d.kv_heads, d.value_dim, true);
  std::vector<std::pair<TensorView, std::string>> inputs = {
      {q, "q"}, {k, "k"}, {v, "v"}, {out, "out"}, {dout, "dout"}};
  if (lse.data != nullptr) {
    CheckLse(lse, d, "lse", /*writable=*/false);
    for (Index b = 0; b < d.batch; ++b)
      for (Index h = 0; h < d.heads; ++h)
        for (Index i = 0; i < d.query_len; ++i) {
          const float x = LseAt(lse, b, h, i);
          if (!(std::isfinite(x) || x == kNegInf)) {
            FailArgument("lse[" + std::to_string(b) + ", " + std::to_string(h) + ", " +
                             std::to_string(i) + "]",
                         x, "a finite log-sum-exp, or -inf for a query that sees no key");
          }
        }
    inputs.emplace_back(lse, "lse");
  }
  std::vector<std::pair<TensorView, std::string>> outputs = {
      {g.dq, "grads.dq"}, {g.dk, "grads.dk"}, {g.dv, "grads.dv"}};
  // The scheme's tensors are inputs; their requested gradients are outputs.
  for (const auto& [name, value] : params.scheme.args.entries()) {
    if (value.type == SchemeArgType::kTensor && value.tensor.data != nullptr) {
      inputs.emplace_back(value.tensor, "scheme." + name);
    }
  }
  std::vector<std::string> labels;
  c.scheme_grads = attention_internal::CheckSchemeGrads(*c.p.scheme, g, &labels);
  for (std::size_t i = 0; i < c.scheme_grads.size(); ++i) {
    if (c.scheme_grads[i].data == nullptr) continue;
    outputs.emplace_back(c.scheme_grads[i], labels[i]);
    c.any_scheme_grad = true;
  }
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    for (const auto& [view, name] : inputs) {
      RequireNoOverlap(outputs[o].first, outputs[o].second, view, name, /*inplace_allowed=*/false);
    }
    for (std::size_t o2 = 0; o2 < o; ++o2) {
      RequireNoOverlap(outputs[o].first, outputs[o].second, outputs[o2].first, outputs[o2].second,
                       /*inplace_allowed=*/false);
    }
  }
  c.bq = std::min(options.query_tile, d.query_len);
  c.bk = std::min(options.key_tile, d.key_len);
  c.q_tiles = (d.query_len + c.bq - 1) / c.bq;
  c.k_tiles = (d.key_len + c.bk - 1) / c.bk;
  c.q_ranges = TileRanges(c.p.query_positions, d.batch, d.query_len, c.bq, c.qpos);
  c.k_ranges = TileRanges(c.p.key_positions, d.batch, d.key_len, c.bk, c.kpos);
  c.lse = lse;
  return c;
}

}  // namespace

void FlashAttentionBackward(const AttentionParams& params, const TensorView& q, const TensorView& k,
                            const TensorView& v, const TensorView& out, const TensorView& dout,
                            const TensorView& lse, const AttentionGrads& grads,
                            const FlashAttentionOptions& options, const Context& ctx) {
  BackwardCall c = Validate(params, q, k, v, out, dout, lse, grads, options);
  const auto& d = c.p.dims;
  std::vector<float> lse_buffer, out_buffer;
  // No lse given: the forward engine recomputes it first, into a scratch
  // output (extra memory: that output and the lse).
  if (c.lse.data == nullptr) {
    lse_buffer.assign(Z(d.batch * d.heads * d.query_len), kNegInf);
    out_buffer.assign(Z(d.batch * d.query_len * d.heads * d.value_dim), 0.0f);
    c.lse =
        TensorView::Contiguous(lse_buffer.data(), DType::kFloat32, {d.batch, d.heads, d.query_len});
    const TensorView scratch_out = TensorView::Contiguous(
        out_buffer.data(), DType::kFloat32, {d.batch, d.query_len, d.heads, d.value_dim});
    flash_internal::Problem forward = c.p;
    forward.od = GetAttentionDims(scratch_out, AttentionLayout::kBSHD, "out");
    forward.lse = c.lse;
    flash_internal::RunForward(forward, q, k, v, scratch_out, options, ctx);
  }
  flash_internal::RunBackward(c, q, k, v, out, dout, grads, ctx);
}

}  // namespace posenc
