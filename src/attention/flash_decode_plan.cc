// The set-up of a decode call (FlashAttentionDecode; algorithm:
// src/attention/flash_decode.cc, contract: the public header, declarations in
// attention/flash_decode_internal.h): the plan (tile sizes, chunking, kernel
// choices), the query rows loaded and rotated once per call, and the
// calling thread's buffers (partials, per-worker Work) laid out before the
// chunk tasks start.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "attention/flash_decode_internal.h"
#include "kernels/simd/flash.h"
#include "posenc/flash_attention.h"

namespace posenc::flash_decode_internal {
namespace {

using flash_internal::kNegInf;
using flash_internal::Pad;

// Loads the call's query rows into `out` (Queries: the float32 rows and, for
// bf16_keys, their bfloat16 parts), rotated once when the scheme rotates.
void LoadQueries(const Problem& p, const DecodePlan& plan, const TensorView& q,
                 const std::vector<Index>& qpos, const Context& serial, Queries& out) {
  const auto& d = p.dims;
  const Index per_batch = d.kv_heads * plan.R;  // = H * Sq rows
  out.rows.assign(Z(d.batch * per_batch * plan.ldd), 0.0f);
  out.parts.assign(plan.bf16_keys ? Z(d.batch * per_batch * plan.q_parts * plan.D) : 0, 0);
  std::vector<float>& tile = out.tile;
  std::vector<Index>& pos = out.pos;
  tile.resize(Z(per_batch * plan.D));
  pos.resize(Z(per_batch));
  for (Index b = 0; b < d.batch; ++b) {
    for (Index h = 0; h < d.heads; ++h) {  // row h * Sq + i: head h = hk * G + hl
      flash_internal::LoadRows(q, p.qd, b, h, 0, plan.Sq, tile.data() + h * plan.Sq * plan.D,
                               plan.D);
      std::copy_n(qpos.data() + b * plan.Sq, plan.Sq, pos.data() + h * plan.Sq);
    }
    if (p.rope != nullptr) {
      flash_internal::RotateTile(*p.rope, tile.data(), per_batch, plan.D, pos.data(), serial);
    }
    for (Index r = 0; r < per_batch; ++r) {
      const float* src = tile.data() + r * plan.D;
      std::copy_n(src, plan.D, out.rows.data() + (b * per_batch + r) * plan.ldd);
      if (!plan.bf16_keys) continue;
      // q_parts 1: exact (q holds bfloat16 values); 3: hi + mid + lo.
      std::uint16_t* parts = out.parts.data() + (b * per_batch + r) * plan.q_parts * plan.D;
      for (Index x = 0; x < plan.D; ++x) {
        float rest = src[x];
        for (Index t = 0; t < plan.q_parts; ++t) {
          const BFloat16 part = FloatToBF16(rest);
          parts[t * plan.D + x] = part.bits;
          rest -= BF16ToFloat(part);  // exact: part is rest rounded to 8 bits
        }
      }
    }
  }
}

// Sizes worker w's buffers for this call. They are part of the calling
// thread's DecodeBuffers (kernels::ThreadBuffers) and keep their capacity
// from call to call: a serving loop calls decode once per token and layer, and
// fresh buffers would cost a first touch of every page each time the
// allocator has returned the freed pages to the system (docs/PERFORMANCE.md,
// "Design figures").
// Buffers of the same shape as the last call's are kept as they are (every
// task rewrites what it reads; the zero padding past D, Dv and nk is never
// written), else laid out afresh and zeroed.
void PrepareWork(const Problem& p, const DecodePlan& plan, const Context& ctx, Work& w) {
  const auto& d = p.dims;
  w.tile_terms.Reset(*p.scheme, 4 * (plan.Sq + kBlock), plan.ldk);
  w.serial = Context(1, ctx.backend());
  const WorkShape shape{d.kv_heads,      plan.D,         plan.Dv,        plan.R,
                        plan.Sq,         plan.q_parts,   plan.bf16_keys, plan.keys_in_place,
                        plan.block_rows, plan.v_in_place};
  if (w.shape == shape) return;
  w.shape = shape;
  const Index rows = d.kv_heads * plan.R;  // every query row of the batch row
  w.s_parts.assign(plan.q_parts > 1 ? Z(plan.R * plan.q_parts * plan.ldk) : 0, 0.0f);
  w.k.assign(Z(kBlock * plan.ldd), 0.0f);
  w.v.assign(Z(kBlock * plan.ldv), 0.0f);
  w.s.assign(Z(plan.R * plan.ldk), 0.0f);
  w.m.assign(Z(rows), kNegInf);
  w.l.assign(Z(rows), 0.0f);
  w.alpha.assign(Z(plan.R), 1.0f);
  w.acc.assign(Z(rows * plan.ldv), 0.0f);
  w.terms.assign(Z(plan.ldk), 0.0f);
  w.bias.assign(Z(plan.R * plan.ldk), 0.0f);
  w.bias_rows.assign(Z(plan.R), nullptr);
  w.tmp.assign(Z(std::max(plan.Sq, kBlock) * std::max(plan.D, plan.Dv)), 0.0f);
  w.kpos.assign(Z(kBlock), 0);
  if (plan.block_rows) {
    w.kall.assign(plan.bf16_keys || plan.keys_in_place ? 0 : Z(kBlock * d.kv_heads * plan.ldd),
                  0.0f);
    w.vall.assign(plan.v_in_place ? 0 : Z(kBlock * d.kv_heads * plan.ldv), 0.0f);
  }
}

}  // namespace

DecodePlan MakeDecodePlan(const Problem& p, const TensorView& q, const TensorView& k,
                          const TensorView& v, const Context& ctx) {
  const auto& d = p.dims;
  DecodePlan plan;
  plan.D = d.head_dim;
  plan.Dv = d.value_dim;
  plan.ldd = Pad(plan.D);
  plan.ldv = Pad(plan.Dv);
  plan.ldk = Pad(kBlock);
  plan.G = d.Group();
  plan.Sq = d.query_len;
  plan.R = plan.G * plan.Sq;
  plan.chunk = std::max(kMinChunk, (d.key_len + kMaxChunks - 1) / kMaxChunks);
  plan.chunk = (plan.chunk + kBlock - 1) / kBlock * kBlock;
  plan.chunks = std::max<Index>(1, (d.key_len + plan.chunk - 1) / plan.chunk);
  plan.bf16_keys = ctx.backend() != Backend::kScalar && k.dtype == DType::kBFloat16 &&
                   !p.rotate_keys && p.kd.stride_dim == 1 && kernels::simd::FlashBf16DotAvailable();
  plan.q_parts = q.dtype == DType::kBFloat16 && p.rope == nullptr ? 1 : 3;
  plan.keys_in_place = ctx.backend() != Backend::kScalar && !plan.bf16_keys && !p.rotate_keys &&
                       p.kd.stride_dim == 1 && k.dtype != DType::kFloat64 &&
                       plan.D % kernels::simd::kFlashPad == 0;
  plan.k_storage = Storage(k.dtype);
  const auto contiguous = [&](const TensorView& t, const AttentionDims& ad) {
    return t.dtype != DType::kFloat64 && ad.stride_dim == 1 && ad.stride_head == ad.head_dim &&
           ad.stride_seq == d.kv_heads * ad.head_dim;
  };
  plan.block_rows = !p.rotate_keys && contiguous(k, p.kd) && contiguous(v, p.vd);
  plan.v_in_place =
      ctx.backend() != Backend::kScalar && p.vd.stride_dim == 1 && v.dtype != DType::kFloat64;
  plan.v_storage = Storage(v.dtype);
  return plan;
}

void PrepareCall(const Problem& p, const DecodePlan& plan, const TensorView& q, const Context& ctx,
                 DecodeBuffers& buffers) {
  const auto& d = p.dims;
  std::vector<Index>& qpos = buffers.qpos;
  std::vector<PositionRange>& qranges = buffers.qranges;
  qpos.resize(Z(d.batch * plan.Sq));
  qranges.clear();
  for (Index b = 0; b < d.batch; ++b) {
    for (Index i = 0; i < plan.Sq; ++i) {
      qpos[Z(b * plan.Sq + i)] = p.pages.default_queries ? p.pages.seq_lens[b] - plan.Sq + i
                                                         : p.query_positions.At(b, i, plan.Sq);
    }
    qranges.push_back(flash_internal::RangeOf(qpos.data() + b * plan.Sq, plan.Sq));
  }
  const Index slots = d.batch * plan.chunks * d.heads * plan.Sq;
  std::vector<float>& part_ml = buffers.ml;
  std::vector<float>& part_acc = buffers.acc;
  LoadQueries(p, plan, q, qpos, Context(1, ctx.backend()), buffers.queries);
  // Capacity for the most chunks any Sk gives (kMaxChunks): as the cache
  // grows token by token the partials never reallocate.
  const Index max_slots = d.batch * kMaxChunks * d.heads * plan.Sq;
  part_ml.reserve(Z(2 * max_slots));
  part_acc.reserve(Z(max_slots * plan.Dv));
  part_ml.resize(Z(2 * slots));
  part_acc.resize(Z(slots * plan.Dv));
  const auto workers = Z(ctx.num_threads());
  if (buffers.works.size() < workers) {
    buffers.works.resize(workers);
    buffers.rows.resize(workers);
  }
  for (std::size_t w = 0; w < workers; ++w) {
    PrepareWork(p, plan, ctx, buffers.works[w]);
    buffers.rows[w].resize(Z(plan.Dv));
  }
}

}  // namespace posenc::flash_decode_internal
