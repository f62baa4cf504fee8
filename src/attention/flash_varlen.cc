// Packed variable-length fused attention (FlashAttentionVarlen; contract and convention:
// include/posenc/flash_attention.h). Convention: flash-attn's varlen API (Dao et al.,
// flash_attn_varlen_func, github.com/Dao-AILab/flash-attention), queries bottom-right aligned as
// in flash-attn >= 2.1 for causal masks. Formula, schemes and numerics: exactly FlashAttention's.
// Design: every sequence is one relative-position segment of the shared forward engine
// (attention/flash_forward_engine.cc), so nothing is copied per sequence: sequences share one
// validation, one scratch and one thread-pool dispatch.
#include <string>
#include <vector>

#include "attention/flash_forward_engine.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"

namespace posenc {
namespace {

// [total, heads, dim] -> [1, total, heads, dim] (bshd), same memory.
TensorView AddBatchAxis(const TensorView& view) {
  TensorView v4 = view;
  v4.rank = 4;
  v4.shape = {1, view.shape[0], view.shape[1], view.shape[2], 0, 0};
  v4.strides = {0, view.strides[0], view.strides[1], view.strides[2], 0, 0};
  return v4;
}

// Checks one cu_seqlens list against its tensor's token count.
void CheckOffsets(std::span<const std::int64_t> cu, const std::string& arg, std::int64_t total,
                  const std::string& total_name) {
  if (cu.size() < 2) {
    FailArgument(arg + ".size()", static_cast<std::int64_t>(cu.size()),
                 "batch + 1 offsets with batch >= 1 (at least 2)");
  }
  if (cu[0] != 0) {
    FailArgument(arg + "[0]", cu[0], "0 (the first sequence starts at token 0)");
  }
  for (std::size_t b = 1; b < cu.size(); ++b) {
    if (cu[b] < cu[b - 1]) {
      FailArgument(arg + "[" + std::to_string(b) + "]", cu[b],
                   "an offset >= " + arg + "[" + std::to_string(b - 1) +
                       "] = " + std::to_string(cu[b - 1]) + " (offsets are nondecreasing)");
    }
  }
  if (cu.back() != total) {
    FailArgument(arg + "[" + std::to_string(cu.size() - 1) + "]", cu.back(),
                 "the total token count of " + total_name + " (" + std::to_string(total) + ")");
  }
}

}  // namespace

void FlashAttentionVarlen(const AttentionParams& params, const TensorView& q, const TensorView& k,
                          const TensorView& v, const TensorView& out,
                          std::span<const std::int64_t> cu_seqlens_q,
                          std::span<const std::int64_t> cu_seqlens_k,
                          const FlashAttentionOptions& options, const Context& ctx) {
  ValidateView(q, "q", 3);
  ValidateView(k, "k", 3);
  ValidateView(v, "v", 3);
  ValidateView(out, "out", 3, /*writable=*/true);
  if (params.query_positions.has_value()) {
    FailArgument(
        "params.query_positions", "set",
        "unset for FlashAttentionVarlen (positions restart at 0 in every sequence; query i "
        "of sequence b sits at Sk_b - Sq_b + i)");
  }
  Require(!params.key_positions.has_value(), "params.key_positions", "set",
          "unset for FlashAttentionVarlen (key j of every sequence sits at j)");
  CheckOffsets(cu_seqlens_q, "cu_seqlens_q", q.shape[0], "q (total_q)");
  if (cu_seqlens_k.size() != cu_seqlens_q.size()) {
    FailArgument("cu_seqlens_k.size()", static_cast<std::int64_t>(cu_seqlens_k.size()),
                 "the size of cu_seqlens_q (" + std::to_string(cu_seqlens_q.size()) +
                     "): both lists describe the same batch");
  }
  CheckOffsets(cu_seqlens_k, "cu_seqlens_k", k.shape[0], "k (total_k)");
  if (k.shape[0] > kMaxPosition + 1) {
    FailArgument("k", k.Describe(), "at most 2^24 key tokens in total (positions are < 2^24)");
  }
  // One relative-position segment per sequence: the tasks over (sequence, head, query tile) of
  // all sequences run in the same ParallelFor per group of packed K/V (one group unless the
  // packed float32 K/V exceed 16 MiB). The engine skips a sequence with no queries (its keys are
  // never packed).
  std::vector<flash_internal::Segment> segments;
  for (std::size_t b = 0; b + 1 < cu_seqlens_q.size(); ++b) {
    flash_internal::Segment s;
    s.q0 = cu_seqlens_q[b];
    s.nq = cu_seqlens_q[b + 1] - s.q0;
    s.k0 = cu_seqlens_k[b];
    s.nk = cu_seqlens_k[b + 1] - s.k0;
    if (s.nq > s.nk) {
      FailArgument(
          "cu_seqlens_q",
          "sequence " + std::to_string(b) + " with " + std::to_string(s.nq) + " queries and " +
              std::to_string(s.nk) + " keys",
          "at most as many queries as keys in every sequence (queries are bottom-right aligned "
          "to the keys)");
    }
    s.relative = true;
    s.q_pos0 = s.nk - s.nq;
    segments.push_back(s);
  }
  // The rank-3 views become [1, total, H, D] bshd views of the same memory.
  AttentionParams p4 = params;
  p4.layout = AttentionLayout::kBSHD;
  const TensorView q4 = AddBatchAxis(q), k4 = AddBatchAxis(k), v4 = AddBatchAxis(v),
                   out4 = AddBatchAxis(out);
  const flash_internal::Problem problem = flash_internal::Setup(p4, q4, k4, v4, out4, options);
  flash_internal::RunSegments(problem, segments, q4, k4, v4, out4, options, ctx);
}

}  // namespace posenc
