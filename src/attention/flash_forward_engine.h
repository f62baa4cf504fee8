// The forward engine of the fused attention, shared by FlashAttention
// (dense batches, src/attention/flash_forward.cc) and FlashAttentionVarlen (packed
// sequences, src/attention/flash_varlen.cc). Contract and numerics:
// include/posenc/flash_attention.h; design: src/attention/flash_forward_engine.cc.
// Internal to src/attention.
#pragma once

#include <cstdint>
#include <vector>

#include "attention/flash_internal.h"

namespace posenc::flash_internal {

// One independent attention problem inside a call: queries [q0, q0 + nq)
// and keys [k0, k0 + nk) (sequence indices of the views) of batch row
// `batch`. Positions: with `relative`, query i of the segment sits at
// q_pos0 + i and key j at j (varlen: positions restart in every sequence);
// otherwise at the Problem's positions At(batch, q0 + i, query_len) and
// At(batch, k0 + j, key_len).
struct Segment {
  std::int64_t batch = 0, q0 = 0, nq = 0, k0 = 0, nk = 0;
  bool relative = false;
  std::int64_t q_pos0 = 0;
};

// Runs the forward over every segment (validated by the caller: Setup for
// p, segments inside the views, nq == 0 allowed) and writes out (and
// p.lse when its data is non-null, indexed [batch, head, q0 + i]).
void RunSegments(const Problem& p, const std::vector<Segment>& segments, const TensorView& q,
                 const TensorView& k, const TensorView& v, const TensorView& out,
                 const FlashAttentionOptions& options, const Context& ctx);

}  // namespace posenc::flash_internal
