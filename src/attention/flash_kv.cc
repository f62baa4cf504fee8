// KV-cache re-rotation for RoPE caches (include/posenc/flash_attention.h,
// ShiftRopeKeys): R(p + delta) = R(delta) R(p), so moving every cached key by
// delta positions is one rotation by the constant angle delta * inv_freq,
// done by posenc::ApplyRope with every token at position |delta| (forward for
// delta >= 0, inverse for delta < 0). RoFormer (Su et al. 2021) eq. 13-16:
// the rotation matrices form a one-parameter group. Error: one more
// rotation's rounding in the storage dtype. Valid |delta| <= 2^24 - 1.
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/thread_scratch.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"

namespace posenc {

namespace {

// The positions of a shift (Sk entries), the calling thread's, kept between
// calls: no allocation per call (kernels::ThreadBuffers).
struct ShiftIds {
  std::vector<std::int64_t> ids;
};

}  // namespace

void ShiftRopeKeys(const RopeParams& params, const TensorView& k, AttentionLayout layout,
                   std::int64_t delta, const Context& ctx) {
  if (!(delta >= -kMaxPosition && delta <= kMaxPosition)) {
    FailArgument(
        "delta", delta,
        "a shift in [-" + std::to_string(kMaxPosition) + ", " + std::to_string(kMaxPosition) + "]");
  }
  ValidateRopeParams(params);
  const double factor = params.frequencies.attention_factor;
  Require(factor == 1.0, "params.frequencies.attention_factor", factor,
          "1 for a re-rotation (the cached keys already carry the factor)");
  ValidateView(k, "k", 4, /*writable=*/true);
  const AttentionDims d = GetAttentionDims(k, layout, "k");
  if (d.head_dim != params.head_dim) {
    FailArgument("k head_dim", d.head_dim,
                 "params.head_dim (" + std::to_string(params.head_dim) + ")");
  }
  if (delta == 0) return;
  kernels::ThreadBuffers<ShiftIds> lease;
  std::vector<std::int64_t>& ids = lease.get().ids;  // every key moves by |delta|
  ids.assign(static_cast<std::size_t>(d.seq), std::llabs(delta));
  ApplyRope(params, k, layout, Positions::Ids(ids.data(), d.seq),
            delta > 0 ? RopeDirection::kForward : RopeDirection::kInverse, nullptr, ctx);
}

}  // namespace posenc
