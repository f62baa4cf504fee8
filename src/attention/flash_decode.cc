// Decode attention (FlashAttentionDecode, FlashAttentionDecodePaged): Sq <= 16 query tokens
// against a long KV cache, split-K. Contract, memory and numerics (FlashAttention's: float32 tiles
// and sums): include/posenc/flash_attention.h. Follows flash-decoding (Dao, Haziza, Massa, Sizov
// 2023, "Flash-Decoding for long-context inference") with FlashAttention-2's online softmax per
// split. The algorithm: 1. one task per (batch, chunk of keys) reads the chunk's keys and values
// once for every kv head, in blocks of kBlock keys, runs all G * Sq query rows of each kv head's
// GQA group against each block and leaves a partial (running max m, sum l, unnormalised output):
// RunChunk; 2. one task per (batch, query head, query) merges the chunks' partials with the
// log-sum-exp rule: Merge. Position terms, value terms and masks go through the scheme's policy
// exactly as in the prefill forward (attention/flash_internal.h). The plan, the query rows and the
// buffers are set up by attention/flash_decode_plan.cc (declarations: flash_decode_internal.h).
// Design: split-K, not the prefill engine's split over query tiles: a decode step has one query
// tile per head, so that would run on one thread and read the cache once per query head.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attention/flash_decode_internal.h"
#include "attention/flash_internal.h"
#include "kernels/float_mode.h"
#include "kernels/scalar/flash.h"
#include "kernels/simd/flash.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"

namespace posenc {
namespace {

using attention_internal::SchemeRow;
using flash_decode_internal::DecodeBuffers;
using flash_decode_internal::DecodePlan;
using flash_decode_internal::ElementAt;
using flash_decode_internal::Index;
using flash_decode_internal::kBlock;
using flash_decode_internal::kMaxQueries;
using flash_decode_internal::Queries;
using flash_decode_internal::Storage;
using flash_decode_internal::Work;
using flash_decode_internal::Z;
using flash_internal::kNegInf;
using flash_internal::PositionRange;
using flash_internal::Problem;
using flash_internal::RoundToBf16;

// Where one kv head's rows of the current block are.
struct BlockRows {
  const float* k = nullptr;            // float32 key rows (null: k16 or k_stored)
  const std::uint16_t* k16 = nullptr;  // bfloat16 rows for FlashDecodeLogitsBf16
  const void* k_stored = nullptr;      // rows in the cache's storage (keys_in_place)
  Index k_stride = 0;                  // elements between keys
  const float* v = nullptr;            // float32 value rows (null: v_stored)
  const void* v_stored = nullptr;      // value rows in the cache's storage
  Index v_stride = 0;
};

// Row kernels: Highway, or kernels/scalar/flash.h for Backend::kScalar.
struct DecodeOps {
  bool simd = true;
  flash_internal::TileOps tile{true};

  void Logits(const float* q, Index ldq, Index rows, const float* k, Index ldk_rows, Index nk,
              Index dim, float* s, Index lds) const {
    if (simd) return kernels::simd::FlashDecodeLogits(q, ldq, rows, k, ldk_rows, nk, dim, s, lds);
    kernels::scalar::FlashDecodeLogits(q, ldq, rows, k, ldk_rows, nk, dim, s, lds);
  }
  float ScaleRow(float* row, Index nk, Index ld, float scale, const float* bias) const {
    return simd ? kernels::simd::FlashScaleRow(row, nk, ld, scale, bias)
                : kernels::scalar::FlashScaleRow(row, nk, ld, scale, bias);
  }
  void PVRows(const float* p, Index ldp, const float* v, Index ldvr, Index rows, Index nk,
              Index ldv, const float* alpha, float* acc) const {
    if (simd) {
      return kernels::simd::FlashAccumulatePVRows(p, ldp, v, ldvr, rows, nk, ldv, alpha, acc);
    }
    kernels::scalar::FlashAccumulatePVRows(p, ldp, v, ldvr, rows, nk, ldv, alpha, acc);
  }
};

// Keys [j0, j0 + nk) of kv head hk as float32 rows [nk, ldd] (zero padding),
// rotated when the kernel rotates keys.
void LoadKeys(const Problem& p, const DecodePlan& plan, const TensorView& k, Index b, Index hk,
              Index j0, Index nk, Work& w) {
  float* rows = w.k.data();
  if (p.rotate_keys) {
    flash_internal::LoadRows(k, p.kd, b, hk, j0, nk, w.tmp.data(), plan.D);
    flash_internal::RotateTile(*p.rope, w.tmp.data(), nk, plan.D, w.kpos.data(), w.serial);
    for (Index j = 0; j < nk; ++j)
      std::copy_n(w.tmp.data() + j * plan.D, plan.D, rows + j * plan.ldd);
  } else {
    flash_internal::LoadRows(k, p.kd, b, hk, j0, nk, rows, plan.ldd);
  }
  for (Index j = 0; j < nk; ++j)
    std::fill(rows + j * plan.ldd + plan.D, rows + (j + 1) * plan.ldd, 0.0f);
}

// RunBlock's softmax step in the general case, one query row at a time
// (masks, value terms, the scalar backend): the scheme's terms, the mask,
// scale + max, the online-softmax update, exp, and the value terms.
void RowByRow(const Problem& p, const DecodePlan& plan, const DecodeOps& ops,
              const std::vector<Index>& qpos, const PositionRange& queries,
              const PositionRange& keys, bool all_visible, Index b, Index hk, Index nk, Work& w) {
  const Index first = hk * plan.R;
  float* s = w.s.data();
  const bool values = p.scheme->Has(SchemeTerm::kValue);
  for (Index hl = 0; hl < plan.G; ++hl) {
    const Index h = hk * plan.G + hl;
    if (w.tile_terms.active()) w.tile_terms.Prepare(h, queries, w.kpos.data(), nk, keys);
    for (Index i = 0; i < plan.Sq; ++i) {
      const Index r = hl * plan.Sq + i, qp = qpos[Z(b * plan.Sq + i)];
      float* row = s + r * plan.ldk;
      const float* qi = w.q + (first + r) * plan.ldd;
      (void)b;
      const float* bias = nullptr;
      if (w.tile_terms.active()) bias = w.tile_terms.Row(qp, qi, p.scale, w.terms.data());
      if (!all_visible) {
        float* mask = w.terms.data();
        if (bias == nullptr) {
          std::fill(mask, mask + plan.ldk, 0.0f);
        } else if (bias != mask) {
          std::copy(bias, bias + plan.ldk, mask);
        }
        for (Index j = 0; j < nk; ++j) {
          if (!p.Visible(qp, w.kpos[Z(j)])) mask[j] = kNegInf;
        }
        bias = mask;
      }
      const float row_max = ops.ScaleRow(row, nk, plan.ldk, p.scale, bias);
      float& alpha = w.alpha[Z(r)];
      if (row_max == kNegInf) {
        std::fill(row, row + plan.ldk, 0.0f);
        alpha = 1.0f;
        continue;
      }
      float& m = w.m[Z(first + r)];
      const float m_new = std::max(m, row_max);
      alpha = std::exp(m - m_new);
      m = m_new;
      float& l = w.l[Z(first + r)];
      l = l * alpha + ops.tile.ExpRow(row, plan.ldk, m_new, p.Exp());
      if (values) {  // rescale now, then the scheme's value terms
        float* acc = w.acc.data() + (first + r) * plan.ldv;
        for (Index x = 0; x < plan.ldv; ++x) acc[x] *= alpha;
        alpha = 1.0f;
        SchemeRow<float> sr;
        sr.head = h;
        sr.qpos = qp;
        sr.q = qi;
        sr.kpos = w.kpos.data();
        sr.nk = nk;
        p.scheme->AddValues(sr, row, acc);
      }
    }
  }
}

// P . V of the block for the R rows of kv head hk, with the rescale fused; P
// rounded to bfloat16 first under FlashPrecision::kBFloat16 (the values are
// bfloat16, so the products stay exact and only the sums are float32). The
// value rows are read in place in the cache's storage and converted in
// registers (FlashAccumulatePVStored) wherever their element stride is 1
// (plan.v_in_place), else from float32 rows (FlashAccumulatePVRows).
void PV(const Problem& p, const DecodePlan& plan, const DecodeOps& ops, const BlockRows& rows,
        Index nk, Index first, Work& w) {
  float* s = w.s.data();
  if (p.Bf16()) {
    for (Index r = 0; r < plan.R; ++r) RoundToBf16(s + r * plan.ldk, nk);
  }
  if (rows.v_stored != nullptr) {
    kernels::simd::FlashAccumulatePVStored(plan.v_storage, s, plan.ldk, rows.v_stored,
                                           rows.v_stride, plan.R, nk, plan.Dv, plan.ldv,
                                           w.alpha.data(), w.acc.data() + first * plan.ldv);
    return;
  }
  ops.PVRows(s, plan.ldk, rows.v, rows.v_stride, plan.R, nk, plan.ldv, w.alpha.data(),
             w.acc.data() + first * plan.ldv);
}

// Keys [j0, j0 + nk) against the R query rows of kv head hk: logits, the
// scheme's terms and the mask, the online softmax update and P . V.
// Logits: for a bfloat16 cache whose keys are not rotated here (q as one
// bfloat16 part, or three where q is not bfloat16: RoPE, float32 q; see
// DecodePlan::q_parts), FlashDecodeLogitsBf16 (AVX512_BF16 dot products on
// key rows, each row loaded once for up to 4 query rows, one transposing
// lane sum per 16 keys) on the cache's bfloat16 rows in place; otherwise
// the block's keys were converted to float32 rows by a SIMD kernel (exact
// for 16-bit caches; rotated when the kernel rotates keys) for
// FlashDecodeLogits.
// Softmax: scale + the scheme's terms (TileTerms, per query head) + the
// online softmax update + exp, in one FlashSoftmaxTile call for all rows
// when the block is fully visible and the scheme has no value terms, else
// row by row with the mask (RowByRow).
void RunBlock(const Problem& p, const DecodePlan& plan, const DecodeOps& ops, const BlockRows& rows,
              const std::vector<Index>& qpos, const PositionRange& queries,
              const PositionRange& keys, bool all_visible, Index b, Index hk, Index nk, Work& w) {
  const Index first = hk * plan.R;
  float* s = w.s.data();
  if (rows.k16 != nullptr && plan.q_parts == 1) {
    kernels::simd::FlashDecodeLogitsBf16(w.q16 + first * plan.D, plan.D, plan.R, rows.k16,
                                         rows.k_stride, nk, plan.D, s, plan.ldk);
  } else if (rows.k16 != nullptr) {  // q as 3 bfloat16 parts: sum the parts' logits
    float* sp = w.s_parts.data();
    kernels::simd::FlashDecodeLogitsBf16(w.q16 + first * plan.q_parts * plan.D, plan.D,
                                         plan.R * plan.q_parts, rows.k16, rows.k_stride, nk, plan.D,
                                         sp, plan.ldk);
    for (Index r = 0; r < plan.R; ++r) {
      const float* part = sp + r * plan.q_parts * plan.ldk;
      float* row = s + r * plan.ldk;
      std::copy_n(part, plan.ldk, row);
      for (Index t = 1; t < plan.q_parts; ++t) {
        kernels::simd::FlashAddRow(row, part + t * plan.ldk, plan.ldk);
      }
    }
  } else if (rows.k_stored != nullptr) {
    kernels::simd::FlashDecodeLogitsStored(plan.k_storage, w.q + first * plan.ldd, plan.ldd, plan.R,
                                           rows.k_stored, rows.k_stride, nk, plan.D, s, plan.ldk);
  } else {
    ops.Logits(w.q + first * plan.ldd, plan.ldd, plan.R, rows.k, rows.k_stride, nk, plan.ldd, s,
               plan.ldk);
  }
  const bool values = p.scheme->Has(SchemeTerm::kValue);
  if (ops.simd && all_visible && !values) {
    // The common case in one SIMD call for all R rows (FlashSoftmaxTile:
    // the same operations as ScaleRow + ExpRow row by row): each head's
    // terms copied out of its distance table (Prepare of the next head
    // replaces the table), or none.
    const float** bias = nullptr;
    if (w.tile_terms.active()) {
      for (Index hl = 0; hl < plan.G; ++hl) {
        w.tile_terms.Prepare(hk * plan.G + hl, queries, w.kpos.data(), nk, keys);
        for (Index i = 0; i < plan.Sq; ++i) {
          const Index r = hl * plan.Sq + i;
          float* dst = w.bias.data() + r * plan.ldk;
          const float* terms = w.tile_terms.Row(qpos[Z(b * plan.Sq + i)],
                                                w.q + (first + r) * plan.ldd, p.scale, dst);
          if (terms != dst) std::copy_n(terms, plan.ldk, dst);
          w.bias_rows[Z(r)] = dst;
        }
      }
      bias = w.bias_rows.data();
    }
    kernels::simd::FlashSoftmaxRows shape;
    shape.exp = p.Exp();
    kernels::simd::FlashSoftmaxTile(s, plan.ldk, plan.R, nk, p.scale, bias, w.m.data() + first,
                                    w.l.data() + first, w.alpha.data(), shape);
  } else {
    RowByRow(p, plan, ops, qpos, queries, keys, all_visible, b, hk, nk, w);
  }
  PV(p, plan, ops, rows, nk, first, w);
}

// Where keys [j0, j0 + n) of batch row b are stored: the row (dense) or
// page (paged) and slot of key j0, and how many of the n follow it at one
// stride (in a paged cache, up to the end of its page). This is all a paged
// cache (FlashAttentionDecodePaged) changes: blocks are cut at page ends, so
// every block is one run at one stride as in a dense cache.
struct Stored {
  Index b = 0, j = 0, n = 0;
};
Stored Locate(const Problem& p, Index b, Index j0, Index n) {
  const auto& pages = p.pages;
  if (pages.block_table == nullptr) return {b, j0, n};
  const Index slot = j0 % pages.page_size;
  return {pages.block_table[b * pages.max_pages + j0 / pages.page_size], slot,
          std::min(n, pages.page_size - slot)};
}

// One block of keys [at.j, at.j + nk) of batch row b, for the two block
// strategies below.
struct BlockCall {
  const Problem& p;
  const DecodePlan& plan;
  const DecodeOps& ops;
  const TensorView& k;
  const TensorView& v;
  const std::vector<Index>& qpos;
  const PositionRange& queries;
  const PositionRange& keys;
  bool all_visible;
  Index b;
  const Stored& at;
  Index nk;
};

// One block of a bshd cache (plan.block_rows; every kv head of the block's
// keys is one contiguous run of K, one of V): unless keys_in_place, reads
// the keys and values of every kv head once in address order (FlashTouch,
// or the float32 conversion), so that the per-head kernels find them in
// cache; then runs the block for each kv head on those rows.
inline void RunBlockAllHeads(const BlockCall& call, Work& w) {
  const auto& [p, plan, ops, k, v, qpos, queries, keys, all_visible, b, at, nk] = call;
  const Index Hkv = p.dims.kv_heads;
  const auto kbase = at.b * p.kd.stride_batch + at.j * p.kd.stride_seq;
  const auto vbase = at.b * p.vd.stride_batch + at.j * p.vd.stride_seq;
  BlockRows rows;
  // keys_in_place: no pass; the kernels read each row once where it is
  // (the touch passes cost time there: docs/PERFORMANCE.md, "Decode without
  // AVX512_BF16").
  if (plan.bf16_keys) {
    w.touched ^= kernels::simd::FlashTouch(ElementAt(k, kbase), nk * Hkv * plan.D * 2);
  } else if (!plan.keys_in_place) {
    kernels::simd::FlashLoadRows(Storage(k.dtype), ElementAt(k, kbase), plan.D, nk * Hkv, plan.D,
                                 w.kall.data(), plan.ldd);
  }
  if (!plan.v_in_place) {
    kernels::simd::FlashLoadRows(Storage(v.dtype), ElementAt(v, vbase), plan.Dv, nk * Hkv, plan.Dv,
                                 w.vall.data(), plan.ldv);
  } else if (!plan.keys_in_place) {
    w.touched ^= kernels::simd::FlashTouch(
        ElementAt(v, vbase), nk * Hkv * plan.Dv * static_cast<Index>(DTypeSize(v.dtype)));
  }
  for (Index hk = 0; hk < Hkv; ++hk) {
    if (plan.bf16_keys) {
      rows.k16 = k.As<const std::uint16_t>() + kbase + hk * plan.D;
      rows.k_stride = Hkv * plan.D;
    } else if (plan.keys_in_place) {
      rows.k_stored = ElementAt(k, kbase + hk * plan.D);
      rows.k_stride = Hkv * plan.D;
    } else {
      rows.k = w.kall.data() + hk * plan.ldd;
      rows.k_stride = Hkv * plan.ldd;
    }
    if (plan.v_in_place) {
      rows.v_stored = ElementAt(v, vbase + hk * plan.Dv);
      rows.v_stride = Hkv * plan.Dv;
    } else {
      rows.v = w.vall.data() + hk * plan.ldv;
      rows.v_stride = Hkv * plan.ldv;
    }
    RunBlock(p, plan, ops, rows, qpos, queries, keys, all_visible, b, hk, nk, w);
  }
}

// One block of any other layout: one kv head at a time, its keys read in
// place (bfloat16) or loaded as float32 rows, its values likewise.
inline void RunBlockPerHead(const BlockCall& call, Work& w) {
  const auto& [p, plan, ops, k, v, qpos, queries, keys, all_visible, b, at, nk] = call;
  const Index Hkv = p.dims.kv_heads;
  for (Index hk = 0; hk < Hkv; ++hk) {
    BlockRows rows;
    if (plan.bf16_keys) {
      rows.k16 = k.As<const std::uint16_t>() + at.b * p.kd.stride_batch + hk * p.kd.stride_head +
                 at.j * p.kd.stride_seq;
      rows.k_stride = p.kd.stride_seq;
    } else if (plan.keys_in_place) {
      rows.k_stored =
          ElementAt(k, at.b * p.kd.stride_batch + hk * p.kd.stride_head + at.j * p.kd.stride_seq);
      rows.k_stride = p.kd.stride_seq;
    } else {
      LoadKeys(p, plan, k, at.b, hk, at.j, nk, w);
      rows.k = w.k.data();
      rows.k_stride = plan.ldd;
    }
    if (plan.v_in_place) {
      rows.v_stored =
          ElementAt(v, at.b * p.vd.stride_batch + hk * p.vd.stride_head + at.j * p.vd.stride_seq);
      rows.v_stride = p.vd.stride_seq;
    } else {
      flash_internal::LoadRows(v, p.vd, at.b, hk, at.j, nk, w.v.data(), plan.ldv);
      for (Index j = 0; j < nk; ++j) {
        std::fill(w.v.data() + j * plan.ldv + plan.Dv, w.v.data() + (j + 1) * plan.ldv, 0.0f);
      }
      rows.v = w.v.data();
      rows.v_stride = plan.ldv;
    }
    RunBlock(p, plan, ops, rows, qpos, queries, keys, all_visible, b, hk, nk, w);
  }
}

// Writes the worker's softmax state of chunk c of batch row b to the
// partials: [B, chunks, H, Sq] (m, l) and the unnormalised outputs.
inline void StorePartials(const Problem& p, const DecodePlan& plan, Index b, Index c, const Work& w,
                          float* part_ml, float* part_acc) {
  const Index Hkv = p.dims.kv_heads;
  for (Index r = 0; r < Hkv * plan.R; ++r) {
    const Index h = r / plan.Sq, i = r % plan.Sq;
    const Index slot = ((b * plan.chunks + c) * p.dims.heads + h) * plan.Sq + i;
    part_ml[2 * slot] = w.m[Z(r)];
    part_ml[2 * slot + 1] = w.l[Z(r)];
    std::copy_n(w.acc.data() + r * plan.ldv, plan.Dv, part_acc + slot * plan.Dv);
  }
}

// One (batch, chunk) task: partials of every query head. Blocks of keys
// outside, kv heads inside, so the cache is read in address order (a bshd
// block holds the kv heads of each key side by side); the softmax state of
// every query row of every kv head lives in the worker's buffers. The chunk
// size depends on the cache length only (>= kMinChunk keys, <= kMaxChunks
// chunks: MakeDecodePlan), so results are bit-identical for any thread
// count. Each sequence's chunks end at its own length (paged cache): a task
// past it leaves an empty partial.
void RunChunk(const Problem& p, const DecodePlan& plan, const DecodeOps& ops,
              const Queries& queries_in, const TensorView& k, const TensorView& v,
              const std::vector<Index>& qpos, const std::vector<PositionRange>& qranges, Index b,
              Index c, float* part_ml, float* part_acc, Work& w) {
  const Index Sk = p.dims.key_len, Hkv = p.dims.kv_heads, j_begin = c * plan.chunk;
  const Index len = p.pages.seq_lens != nullptr ? p.pages.seq_lens[b] : Sk;
  const Index j_end = std::min(len, j_begin + plan.chunk);
  const PositionRange& queries = qranges[Z(b)];
  w.q = queries_in.rows.data() + b * Hkv * plan.R * plan.ldd;
  w.q16 =
      plan.bf16_keys ? queries_in.parts.data() + b * Hkv * plan.R * plan.q_parts * plan.D : nullptr;
  std::fill(w.m.begin(), w.m.end(), kNegInf);
  std::fill(w.l.begin(), w.l.end(), 0.0f);
  std::fill(w.acc.begin(), w.acc.end(), 0.0f);
  for (Index j0 = j_begin, nk = 0; j0 < j_end; j0 += nk) {
    const Stored at = Locate(p, b, j0, std::min(kBlock, j_end - j0));
    nk = at.n;
    for (Index j = 0; j < nk; ++j) w.kpos[Z(j)] = p.key_positions.At(b, j0 + j, Sk);
    const PositionRange keys = flash_internal::RangeOf(w.kpos.data(), nk);
    if (p.TileHidden(queries.min, queries.max, keys.min, keys.max)) continue;
    const bool all_visible = p.TileVisible(queries.min, queries.max, keys.min, keys.max);
    const BlockCall call{p, plan, ops, k, v, qpos, queries, keys, all_visible, b, at, nk};
    if (plan.block_rows) {  // every kv head's rows of the block, in address order
      RunBlockAllHeads(call, w);
    } else {
      RunBlockPerHead(call, w);
    }
  }
  StorePartials(p, plan, b, c, w, part_ml, part_acc);
}

// Merges the chunks' partials of (b, h, i) into out (and lse) with the
// log-sum-exp rule, in float32 in chunk order:
//   M = max m_c, L = sum l_c e^(m_c - M), out = sum acc_c e^(m_c - M) / L,
//   lse = M + log L.
void Merge(const Problem& p, const DecodePlan& plan, const float* part_ml, const float* part_acc,
           const TensorView& out, const TensorView& lse, Index b, Index h, Index i, float* row) {
  const auto slot = [&](Index c) {
    return ((b * plan.chunks + c) * p.dims.heads + h) * plan.Sq + i;
  };
  float mx = kNegInf;
  for (Index c = 0; c < plan.chunks; ++c) mx = std::max(mx, part_ml[2 * slot(c)]);
  std::fill(row, row + plan.Dv, 0.0f);
  float l = 0.0f;
  if (mx != kNegInf) {
    for (Index c = 0; c < plan.chunks; ++c) {
      const float mc = part_ml[2 * slot(c)];
      if (mc == kNegInf) continue;
      const float wgt = std::exp(mc - mx);
      l += part_ml[2 * slot(c) + 1] * wgt;
      const float* acc = part_acc + slot(c) * plan.Dv;
      for (Index x = 0; x < plan.Dv; ++x) row[x] += wgt * acc[x];
    }
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  const auto& od = p.od;
  const Index base = b * od.stride_batch + h * od.stride_head + i * od.stride_seq;
  for (Index x = 0; x < plan.Dv; ++x) {
    if (out.dtype == DType::kFloat32) {
      out.As<float>()[base + x * od.stride_dim] = row[x] * inv;
    } else {
      StoreFromDouble(out.data, out.dtype, base + x * od.stride_dim,
                      static_cast<double>(row[x] * inv));
    }
  }
  if (lse.data != nullptr) {
    lse.As<float>()[b * lse.strides[0] + h * lse.strides[1] + i * lse.strides[2]] =
        l > 0.0f ? mx + std::log(l) : kNegInf;
  }
}

// Merges every (batch, query head, query) row's chunk partials into out
// (and lse), in tasks of per_task rows, one merge row per worker.
void MergeAll(const Problem& p, const DecodePlan& plan, const TensorView& out, const Context& ctx,
              DecodeBuffers& buffers) {
  const auto& d = p.dims;
  // The merge reads chunks * Dv floats per query row: below ~2^14 of them in
  // all it runs on the calling thread (waking the pool costs more).
  const Index merges = d.batch * d.heads * plan.Sq;
  const Index per_task = merges * plan.chunks * plan.Dv <= (Index{1} << 14)
                             ? merges
                             : std::max<Index>(1, merges / (4 * ctx.num_threads()));
  const std::vector<float>& part_ml = buffers.ml;
  const std::vector<float>& part_acc = buffers.acc;
  ctx.ParallelFor((merges + per_task - 1) / per_task, [&](Index task, int worker) {
    std::vector<float>& row = buffers.rows[Z(worker)];
    for (Index x = task * per_task; x < std::min(merges, (task + 1) * per_task); ++x) {
      const Index i = x % plan.Sq, bh = x / plan.Sq;
      Merge(p, plan, part_ml.data(), part_acc.data(), out, p.lse, bh / d.heads, bh % d.heads, i,
            row.data());
    }
  });
}

// The decode of a validated problem (both entry points below).
void Decode(Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
            const TensorView& out, const TensorView& lse, const Context& ctx) {
  const auto& d = p.dims;
  Require(d.query_len >= 1 && d.query_len <= kMaxQueries, "q.shape[seq]", d.query_len,
          "1 to 16 query tokens per batch row (FlashAttentionDecode; use FlashAttention for "
          "prefill)");
  if (lse.data != nullptr) flash_internal::SetLseOutput(p, lse, q, k, v, out);
  const DecodePlan plan = flash_decode_internal::MakeDecodePlan(p, q, k, v, ctx);
  // The calling thread's buffers, kept between calls (DecodeBuffers): the
  // partials and query rows, and per worker that runs a task
  // O(64 * Hkv * (D + Dv) + H * Sq * Dv) floats (the block buffers only
  // where K or V is converted to float32; see PrepareWork).
  flash_internal::ThreadBuffers<DecodeBuffers> lease;
  DecodeBuffers& buffers = lease.get();
  flash_decode_internal::PrepareCall(p, plan, q, ctx, buffers);
  const bool simd = ctx.backend() != Backend::kScalar;
  const DecodeOps ops{simd, flash_internal::TileOps{simd}};
  ctx.ParallelFor(d.batch * plan.chunks, [&](Index task, int worker) {
    const kernels::ScopedFlushSubnormals ftz;  // kernels/float_mode.h
    Work& w = buffers.works[Z(worker)];
    RunChunk(p, plan, ops, buffers.queries, k, v, buffers.qpos, buffers.qranges, task / plan.chunks,
             task % plan.chunks, buffers.ml.data(), buffers.acc.data(), w);
  });
  MergeAll(p, plan, out, ctx, buffers);
}

}  // namespace

void FlashAttentionDecode(const AttentionParams& params, const TensorView& q, const TensorView& k,
                          const TensorView& v, const TensorView& out, const TensorView& lse,
                          const FlashAttentionOptions& options, const Context& ctx) {
  Problem p = flash_internal::Setup(params, q, k, v, out, options);
  Decode(p, q, k, v, out, lse, ctx);
}

void FlashAttentionDecode(const PreparedDecode& plan, const TensorView& q, const TensorView& k,
                          const TensorView& v, const TensorView& out, const TensorView& lse,
                          const std::optional<Positions>& query_positions,
                          const std::optional<Positions>& key_positions, const Context& ctx) {
  Problem p =
      flash_internal::SetupPrepared(plan.state(), q, k, v, out, query_positions, key_positions);
  Decode(p, q, k, v, out, lse, ctx);
}

void FlashAttentionDecodePaged(const PreparedDecode& plan, const TensorView& q,
                               const PagedKVCache& cache, const TensorView& out,
                               const TensorView& lse,
                               const std::optional<Positions>& query_positions,
                               const std::optional<Positions>& key_positions, const Context& ctx) {
  Problem p =
      flash_internal::SetupPaged(plan.state(), q, cache, out, query_positions, key_positions);
  Decode(p, q, cache.k_pages, cache.v_pages, out, lse, ctx);
}

}  // namespace posenc
