// The forward's tile plan (flash_forward_plan.h).
#include "attention/flash_forward_plan.h"

#include <algorithm>

#include "kernels/simd/flash.h"

namespace posenc::flash_internal {

ForwardPlan MakePlan(const Problem& p, const std::vector<Segment>& segs,
                     const FlashAttentionOptions& options, bool bf16, bool simd) {
  ForwardPlan plan;
  plan.bf16 = bf16;
  plan.bf16_pv = p.Bf16();
  plan.pv_pairs = plan.bf16_pv && (!simd || kernels::simd::FlashBf16DotPreferred());
  plan.simd = simd;
  std::int64_t max_q = 1, max_k = 1;
  for (const Segment& s : segs) {
    max_q = std::max(max_q, s.nq);
    max_k = std::max(max_k, s.nk);
  }
  plan.bq = std::min(options.query_tile, max_q);
  plan.bk = std::min(options.key_tile, max_k);
  plan.ldk = Pad(plan.bk);
  plan.D = p.dims.head_dim;
  plan.Dv = p.dims.value_dim;
  plan.ldv = Pad(plan.Dv);
  plan.tile_floats = plan.KtFloats() + plan.VFloats() + (bf16 ? plan.D * plan.ldk / 2 : 0);
  std::int64_t tiles = 0;
  for (const Segment& s : segs) {
    plan.tile_base.push_back(tiles);
    tiles += plan.KeyTiles(s);
  }
  plan.kpos.assign(static_cast<std::size_t>(tiles * plan.bk), 0);
  plan.ranges.assign(static_cast<std::size_t>(tiles), PositionRange{});
  for (std::size_t si = 0; si < segs.size(); ++si) {
    const Segment& s = segs[si];
    for (std::int64_t t = 0; t < plan.KeyTiles(s); ++t) {
      const std::int64_t tile = plan.tile_base[si] + t, j0 = t * plan.bk;
      const std::int64_t nk = std::min(plan.bk, s.nk - j0);
      std::int64_t* kp = &plan.kpos[static_cast<std::size_t>(tile * plan.bk)];
      for (std::int64_t j = 0; j < nk; ++j) {
        kp[j] = s.relative ? j0 + j : p.key_positions.At(s.batch, s.k0 + j0 + j, p.dims.key_len);
      }
      plan.ranges[static_cast<std::size_t>(tile)] =
          s.relative ? ConsecutiveRange(j0, nk) : RangeOf(kp, nk);
    }
  }
  return plan;
}

}  // namespace posenc::flash_internal
