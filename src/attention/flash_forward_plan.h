// The tile plan of one forward call of the fused attention (tile sizes,
// padded strides, the bfloat16 choices and every key tile's positions),
// made once per call by the forward engine (flash_forward_engine.cc).
// Internal to src/attention.
#pragma once

#include <cstdint>
#include <vector>

#include "attention/flash_forward_engine.h"
#include "attention/flash_internal.h"

namespace posenc::flash_internal {

// Tile geometry and key positions of one forward call (positions do not
// depend on the head, so they are computed once per key tile).
struct ForwardPlan {
  std::int64_t bq = 1, bk = 1, ldk = 0, ldv = 0, D = 0, Dv = 0;
  // Packed key tile: K^T block [D, ldk] + V block [bk, ldv]; with bf16, the
  // V block + K^T as bfloat16 pairs [D / 2, ldk, 2] (no float32 K^T: the
  // bfloat16 dot products read the pairs only); with bf16_pv, V as
  // bfloat16 pairs [(bk + 1) / 2, ldv, 2] (FlashMatMulBf16's B) instead of
  // float32 rows when pv_pairs.
  std::int64_t tile_floats = 0;
  std::int64_t KtFloats() const { return bf16 ? 0 : D * ldk; }
  std::int64_t VFloats() const { return pv_pairs ? (bk + 1) / 2 * ldv : bk * ldv; }
  bool bf16 = false;     // bfloat16 q.k logits (FlashTileLogitsBf16)
  bool bf16_pv = false;  // FlashPrecision::kBFloat16: bfloat16 P . V
  // bf16_pv with VDPBF16PS (FlashBf16DotPreferred) or the scalar backend:
  // P and V as bfloat16 pairs (FlashMatMulBf16); otherwise P is rounded to
  // bfloat16 values in place and runs the float32 P . V kernel.
  bool pv_pairs = false;
  bool simd = true;                     // FlashMatMulBf16's VDPBF16PS path allowed
  std::vector<std::int64_t> tile_base;  // per segment: its first key tile
  std::vector<std::int64_t> kpos;       // [tiles, bk]
  std::vector<PositionRange> ranges;    // [tiles]
  std::int64_t KeyTiles(const Segment& s) const { return (s.nk + bk - 1) / bk; }
  std::int64_t QueryTiles(const Segment& s) const { return (s.nq + bq - 1) / bq; }
};

// The plan of a call over `segs`: tiles of options.query_tile x
// options.key_tile (capped by the longest segment), bf16: bfloat16 q . k
// logits, simd: not Backend::kScalar.
ForwardPlan MakePlan(const Problem& p, const std::vector<Segment>& segs,
                     const FlashAttentionOptions& options, bool bf16, bool simd);

}  // namespace posenc::flash_internal
