// The engine of the fused attention backward (FlashAttentionBackward,
// include/posenc/flash_attention.h): the validated call (built by
// src/attention/flash_backward.cc) and the FlashAttention-2 work split that
// runs it (src/attention/flash_backward_engine.cc, design there). Internal to
// src/attention.
#pragma once

#include <cstdint>
#include <vector>

#include "attention/flash_internal.h"
#include "attention/scheme_policy.h"

namespace posenc::flash_internal {

// One validated backward call.
struct BackwardCall {
  Problem p;
  AttentionDims od{}, dod{}, dqd{}, dkd{}, dvd{};
  TensorView lse;                        // float32 [B, H, Sq]: given, or recomputed
  std::vector<TensorView> scheme_grads;  // per trainable tensor (null data: not requested)
  bool any_scheme_grad = false;
  std::int64_t bq = 1, bk = 1, q_tiles = 0, k_tiles = 0;
  std::vector<std::int64_t> qpos, kpos;           // [B, Sq], [B, Sk] positions
  std::vector<PositionRange> q_ranges, k_ranges;  // per (batch, tile)
};

// Runs the backward of a validated call whose c.lse holds the forward's
// log-sum-exp (the entry point recomputes it first when none is given) and
// writes grads (dq, dk, dv and the requested scheme gradients).
void RunBackward(const BackwardCall& c, const TensorView& q, const TensorView& k,
                 const TensorView& v, const TensorView& out, const TensorView& dout,
                 const AttentionGrads& grads, const Context& ctx);

}  // namespace posenc::flash_internal
