// Decode attention (FlashAttentionDecode, include/posenc/flash_attention.h):
// a few query tokens (Sq <= 16) against a long KV cache, split-K
// ("flash-decoding": Dao, Haziza, Massa, Sizov 2023, "Flash-Decoding for
// long-context inference"; FlashAttention-2's online softmax per split).
//
// The prefill engine parallelises over query tiles; a decode step has one
// query tile per head, so it would run on one thread and read the cache
// once per query head. Here:
//  1. Keys are cut into chunks whose size depends on the cache length only
//     (>= 256 keys, <= kMaxChunks chunks), so results are bit-identical for
//     any thread count. One task per (batch, chunk) reads the chunk's keys
//     and values once, for every kv head, in 64-key blocks; all G * Sq
//     query rows of a kv head's GQA group run against each block:
//     - logits: for a bfloat16 cache whose keys are not rotated here (q as
//       one bfloat16 part, or three where q is not bfloat16: RoPE, float32
//       q; see DecodePlan::q_parts), FlashDecodeLogitsBf16 (AVX512_BF16
//       dot products on key rows, each row loaded once for up to 4 query
//       rows, one transposing lane sum per 16 keys) on the cache's
//       bfloat16 rows in place; otherwise the block's keys are converted
//       to float32 rows by a SIMD kernel (exact for 16-bit caches; rotated
//       when the kernel rotates keys) for FlashDecodeLogits;
//     - scale + the scheme's terms (TileTerms, per query head) + the online
//       softmax update + exp: one FlashSoftmaxTile call for all rows when
//       the block is fully visible and the scheme has no value terms, else
//       row by row with the mask;
//     - P . V with the rescale fused: the value rows are read in place in
//       the cache's storage and converted in registers
//       (FlashAccumulatePVStored) wherever their element stride is 1, else
//       from float32 rows (FlashAccumulatePVRows).
//     A bshd cache's block (every kv head of 64 keys: one contiguous run
//     of K, one of V) is first read once in address order (FlashTouch, or
//     the float32 conversion), so that the per-head kernels find it in
//     cache (DecodePlan::block_rows).
//     The chunk leaves its partial (running max m, sum l, unnormalised
//     output).
//  2. One task per (batch, query head, query) merges the chunks' partials
//     with the log-sum-exp rule: M = max m_c, L = sum l_c e^(m_c - M),
//     out = sum acc_c e^(m_c - M) / L, lse = M + log L.
// A paged cache (FlashAttentionDecodePaged) changes only where a block's
// keys are read (Locate): blocks are cut at page ends, so every block is
// one run at one stride as in a dense cache, and each sequence's chunks end
// at its own length (a task past it leaves an empty partial).
// Position terms, value terms and masks go through the scheme's policy
// exactly as in the prefill forward (attention/flash_internal.h).
// Memory: per call B * chunks * H * Sq * (Dv + 2) floats of partials and
// the query rows (B * H * Sq rows of D floats, and of D * q_parts bfloat16
// parts for bf16_keys, loaded and rotated once per call); per thread that
// runs a task, O(64 * Hkv * (D + Dv) + H * Sq * Dv) floats (the block
// buffers only where K or V is converted to float32), kept from call to
// call (the calling thread's, one per worker, see PrepareWork).
// Numerics: float32 tiles and sums like FlashAttention (same error rule:
// within 2x a plain float32 attention's error against float64); the
// partials are merged in float32 in chunk order. Positions [0, 2^24).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attention/flash_internal.h"
#include "kernels/simd/flash.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"

namespace posenc {
namespace {

using attention_internal::SchemeRow;
using flash_internal::kNegInf;
using flash_internal::Pad;
using flash_internal::PositionRange;
using flash_internal::Problem;
using flash_internal::RoundToBf16;
using Index = std::int64_t;

constexpr Index kMaxQueries = 16;  // decode: Sq <= 16
// Keys per block: the fastest of 32, 64 and 128 at long caches
// (docs/PERFORMANCE.md, "Design figures").
constexpr Index kBlock = 64;
constexpr Index kMinChunk = 256;  // keys per chunk, at least
constexpr Index kMaxChunks = 64;  // chunks per batch row, at most

std::size_t Z(Index i) { return static_cast<std::size_t>(i); }

struct DecodePlan {
  Index D = 0, Dv = 0, ldd = 0, ldv = 0, ldk = 0, G = 1, Sq = 0, R = 0, chunk = 0, chunks = 0;
  // bfloat16 cache, keys not rotated here: logits by VDPBF16PS straight
  // from the cache rows (no float32 copy of K).
  bool bf16_keys = false;
  // bfloat16 parts per query row for bf16_keys: 1 where q is bfloat16 and
  // not rotated (exact); else 3, q = hi + mid + lo (each the bfloat16
  // rounding of what the parts before it leave: q to within 2^-27 of
  // itself, below float32's own rounding), the logits the sum of the three
  // parts' dot products, (hi + mid) + lo. Three bfloat16 dot products cost
  // less than converting the keys to float32 (RoPE with a pre-rotated
  // cache, float32 or float16 q).
  Index q_parts = 1;
  // K and V hold the kv heads of a key side by side (bshd, unit strides,
  // keys not rotated here): a block of keys is one contiguous run. Its keys
  // and values are read once in address order for every kv head (converted
  // to float32 rows, or, where the kernels read them in place, touched by
  // FlashTouch) so the hardware prefetchers see one sequential stream
  // instead of Hkv streams of 2 KiB strides: faster than reading in place
  // without the pass, than copying, and than software prefetch
  // (docs/PERFORMANCE.md, "Design figures").
  bool block_rows = false;
  // Unit value strides and a SIMD backend: P . V reads the value rows in
  // their storage (FlashAccumulatePVStored, converted in registers; no
  // float32 copy of V, which costs a pass over the cache).
  bool v_in_place = false;
  kernels::simd::FlashStorage v_storage = kernels::simd::FlashStorage::kFloat32;
};

// Where one kv head's rows of the current block are.
struct BlockRows {
  const float* k = nullptr;  // float32 key rows (null: bfloat16 rows k16)
  const std::uint16_t* k16 = nullptr;
  Index k_stride = 0;              // elements between keys
  const float* v = nullptr;        // float32 value rows (null: v_stored)
  const void* v_stored = nullptr;  // value rows in the cache's storage
  Index v_stride = 0;
};

// The sizes a Work's buffers were laid out for (PrepareWork; the padded
// strides follow from D, Dv and kBlock).
struct WorkShape {
  Index kv_heads = -1, D = 0, Dv = 0, R = 0, Sq = 0;
  Index q_parts = 1;
  bool bf16_keys = false, block_rows = false, v_in_place = false;
  bool operator==(const WorkShape&) const = default;
};

struct Work {
  WorkShape shape;  // of the buffers below (kv_heads -1: none yet)
  // The task's batch row's query rows in the call's Queries (read only).
  const float* q = nullptr;
  const std::uint16_t* q16 = nullptr;
  std::vector<float> k, v, s, m, l, alpha, acc, terms, tmp;
  std::vector<float> s_parts;           // q_parts > 1: the parts' logits [R * q_parts, ldk]
  std::vector<float> kall, vall;        // block_rows: the block's K / V rows of every kv head
  std::vector<float> bias;              // [R, ldk]: the terms of each row (FlashSoftmaxTile)
  std::vector<const float*> bias_rows;  // [R]: pointers into bias
  std::uint32_t touched = 0;            // FlashTouch's results (kept: the reads stay)
  std::vector<Index> kpos;
  flash_internal::TileTerms tile_terms;
  Context serial{1};
};

// Row kernels: Highway, or plain loops for Backend::kScalar.
struct DecodeOps {
  bool simd = true;
  flash_internal::TileOps tile{true};

  void Logits(const float* q, Index ldq, Index rows, const float* k, Index ldk_rows, Index nk,
              Index dim, float* s, Index lds) const {
    if (simd) return kernels::simd::FlashDecodeLogits(q, ldq, rows, k, ldk_rows, nk, dim, s, lds);
    for (Index r = 0; r < rows; ++r) {
      std::fill(s + r * lds, s + r * lds + lds, 0.0f);
      for (Index j = 0; j < nk; ++j)
        s[r * lds + j] = flash_internal::Dot(q + r * ldq, k + j * ldk_rows, dim);
    }
  }
  float ScaleRow(float* row, Index nk, Index ld, float scale, const float* bias) const {
    if (simd) return kernels::simd::FlashScaleRow(row, nk, ld, scale, bias);
    float mx = kNegInf;
    for (Index j = 0; j < ld; ++j) {
      row[j] = j < nk ? row[j] * scale + (bias ? bias[j] : 0.0f) : kNegInf;
      mx = std::max(mx, row[j]);
    }
    return mx;
  }
  void PVRows(const float* p, Index ldp, const float* v, Index ldvr, Index rows, Index nk,
              Index ldv, const float* alpha, float* acc) const {
    if (simd) {
      return kernels::simd::FlashAccumulatePVRows(p, ldp, v, ldvr, rows, nk, ldv, alpha, acc);
    }
    for (Index i = 0; i < rows; ++i) {
      for (Index x = 0; x < ldv; ++x) acc[i * ldv + x] *= alpha[i];
      for (Index j = 0; j < nk; ++j) {
        for (Index x = 0; x < ldv; ++x) acc[i * ldv + x] += p[i * ldp + j] * v[j * ldvr + x];
      }
    }
  }
};

// The query rows of the call, rotated once (not per chunk: a RoPE table
// per chunk and kv head would be rebuilt chunks x Hkv times): for
// batch row b, row hk * R + hl * Sq + i of kv head hk's group member hl,
// [Hkv * R, ldd] floats at rows + b * Hkv * R * ldd, and for bf16_keys the
// bfloat16 parts, row (hk * R + r) * q_parts + t holding part t of row r,
// [Hkv * R * q_parts, D] at parts + b * Hkv * R * q_parts * D.
struct Queries {
  std::vector<float> rows;
  std::vector<std::uint16_t> parts;
  std::vector<float> tile;  // scratch of LoadQueries (kept: no allocation per call)
  std::vector<Index> pos;
};

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

kernels::simd::FlashStorage Storage(DType dtype) {
  using kernels::simd::FlashStorage;
  return dtype == DType::kFloat32    ? FlashStorage::kFloat32
         : dtype == DType::kBFloat16 ? FlashStorage::kBFloat16
                                     : FlashStorage::kFloat16;
}

const void* ElementAt(const TensorView& view, Index offset) {
  return static_cast<const char*>(view.data) + offset * static_cast<Index>(DTypeSize(view.dtype));
}

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
      l = l * alpha + ops.tile.ExpRow(row, plan.ldk, m_new);
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

// P . V of the block for the R rows of kv head hk, with the rescale; P
// rounded to bfloat16 first under FlashPrecision::kBFloat16 (the values are
// bfloat16, so the products stay exact and only the sums are float32).
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
    kernels::simd::FlashSoftmaxTile(s, plan.ldk, plan.R, nk, p.scale, bias, w.m.data() + first,
                                    w.l.data() + first, w.alpha.data());
  } else {
    RowByRow(p, plan, ops, qpos, queries, keys, all_visible, b, hk, nk, w);
  }
  PV(p, plan, ops, rows, nk, first, w);
}

// Where keys [j0, j0 + n) of batch row b are stored: the row (dense) or
// page (paged) and slot of key j0, and how many of the n follow it at one
// stride (in a paged cache, up to the end of its page).
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

// One (batch, chunk) task: partials of every query head. Blocks of keys
// outside, kv heads inside, so the cache is read in address order (a bshd
// block holds the kv heads of each key side by side); the softmax state of
// every query row of every kv head lives in the worker's buffers.
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
    if (plan.block_rows) {  // every kv head's rows of the block, in address order
      const auto kbase = at.b * p.kd.stride_batch + at.j * p.kd.stride_seq;
      const auto vbase = at.b * p.vd.stride_batch + at.j * p.vd.stride_seq;
      BlockRows rows;
      if (plan.bf16_keys) {
        w.touched ^= kernels::simd::FlashTouch(ElementAt(k, kbase), nk * Hkv * plan.D * 2);
      } else {
        kernels::simd::FlashLoadRows(Storage(k.dtype), ElementAt(k, kbase), plan.D, nk * Hkv,
                                     plan.D, w.kall.data(), plan.ldd);
      }
      if (plan.v_in_place) {
        w.touched ^= kernels::simd::FlashTouch(
            ElementAt(v, vbase), nk * Hkv * plan.Dv * static_cast<Index>(DTypeSize(v.dtype)));
      } else {
        kernels::simd::FlashLoadRows(Storage(v.dtype), ElementAt(v, vbase), plan.Dv, nk * Hkv,
                                     plan.Dv, w.vall.data(), plan.ldv);
      }
      for (Index hk = 0; hk < Hkv; ++hk) {
        if (plan.bf16_keys) {
          rows.k16 = k.As<const std::uint16_t>() + kbase + hk * plan.D;
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
      continue;
    }
    for (Index hk = 0; hk < Hkv; ++hk) {  // other layouts: one kv head at a time
      BlockRows rows;
      if (plan.bf16_keys) {
        rows.k16 = k.As<const std::uint16_t>() + at.b * p.kd.stride_batch + hk * p.kd.stride_head +
                   at.j * p.kd.stride_seq;
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
  // Partials: [B, chunks, H, Sq] (m, l) and the unnormalised outputs.
  for (Index r = 0; r < Hkv * plan.R; ++r) {
    const Index h = r / plan.Sq, i = r % plan.Sq;
    const Index slot = ((b * plan.chunks + c) * p.dims.heads + h) * plan.Sq + i;
    part_ml[2 * slot] = w.m[Z(r)];
    part_ml[2 * slot + 1] = w.l[Z(r)];
    std::copy_n(w.acc.data() + r * plan.ldv, plan.Dv, part_acc + slot * plan.Dv);
  }
}

// Merges the chunks' partials of (b, h, i) into out (and lse).
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

// Sizes the worker's buffers for this call. The buffers live in a
// thread_local Work of the thread that runs the task and keep their capacity
// from call to call: a serving loop calls decode once per token and layer, and
// fresh buffers would cost a first touch of every page each time the
// allocator has returned the freed pages to the system (docs/PERFORMANCE.md,
// "Design figures"). RunChunk does not re-enter decode on its thread
// (its only Context is the serial one), so one Work per thread suffices.
// Buffers of the same shape as the last call's are kept as they are (every
// task rewrites what it reads; the zero padding past D, Dv and nk is never
// written), else laid out afresh and zeroed.
void PrepareWork(const Problem& p, const DecodePlan& plan, const Context& ctx, Work& w) {
  const auto& d = p.dims;
  w.tile_terms.Reset(*p.scheme, 4 * (plan.Sq + kBlock), plan.ldk);
  w.serial = Context(1, ctx.backend());
  const WorkShape shape{d.kv_heads,   plan.D,         plan.Dv,         plan.R,         plan.Sq,
                        plan.q_parts, plan.bf16_keys, plan.block_rows, plan.v_in_place};
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
    w.kall.assign(plan.bf16_keys ? 0 : Z(kBlock * d.kv_heads * plan.ldd), 0.0f);
    w.vall.assign(plan.v_in_place ? 0 : Z(kBlock * d.kv_heads * plan.ldv), 0.0f);
  }
}

// The decode of a validated problem (both entry points below).
void Decode(Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
            const TensorView& out, const TensorView& lse, const Context& ctx) {
  const auto& d = p.dims;
  Require(d.query_len >= 1 && d.query_len <= kMaxQueries, "q.shape[seq]", d.query_len,
          "1 to 16 query tokens per batch row (FlashAttentionDecode; use FlashAttention for "
          "prefill)");
  if (lse.data != nullptr) flash_internal::SetLseOutput(p, lse, q, k, v, out);
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
  const auto contiguous = [&](const TensorView& t, const AttentionDims& ad) {
    return t.dtype != DType::kFloat64 && ad.stride_dim == 1 && ad.stride_head == ad.head_dim &&
           ad.stride_seq == d.kv_heads * ad.head_dim;
  };
  plan.block_rows = !p.rotate_keys && contiguous(k, p.kd) && contiguous(v, p.vd);
  plan.v_in_place =
      ctx.backend() != Backend::kScalar && p.vd.stride_dim == 1 && v.dtype != DType::kFloat64;
  plan.v_storage = Storage(v.dtype);
  // The partials, the query rows and positions: the calling thread's, kept
  // between calls (ThreadBuffers; partials 1 MiB at 32768 keys, GQA 32/8,
  // D = 128), so a call in the steady state allocates nothing here; the
  // partials are not zeroed: every task writes all the slots of its (batch,
  // chunk).
  // works[w]: worker w's blocks, laid out here on the calling thread for
  // every worker before the tasks start (a worker that happens to get no
  // task in one call must not allocate in the next: tasks are handed out
  // dynamically); rows[w]: worker w's merge row.
  struct CallBuffers {
    std::vector<float> ml, acc;
    Queries queries;
    std::vector<Index> qpos;
    std::vector<PositionRange> qranges;
    std::vector<Work> works;
    std::vector<std::vector<float>> rows;
  };
  flash_internal::ThreadBuffers<CallBuffers> lease;
  CallBuffers& buffers = lease.get();
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
  const bool simd = ctx.backend() != Backend::kScalar;
  const DecodeOps ops{simd, flash_internal::TileOps{simd}};
  const auto workers = Z(ctx.num_threads());
  if (buffers.works.size() < workers) {
    buffers.works.resize(workers);
    buffers.rows.resize(workers);
  }
  for (std::size_t w = 0; w < workers; ++w) {
    PrepareWork(p, plan, ctx, buffers.works[w]);
    buffers.rows[w].resize(Z(plan.Dv));
  }
  ctx.ParallelFor(d.batch * plan.chunks, [&](Index task, int worker) {
    Work& w = buffers.works[Z(worker)];
    RunChunk(p, plan, ops, buffers.queries, k, v, qpos, qranges, task / plan.chunks,
             task % plan.chunks, part_ml.data(), part_acc.data(), w);
  });
  // The merge reads chunks * Dv floats per query row: below ~2^14 of them in
  // all it runs on the calling thread (waking the pool costs more).
  const Index merges = d.batch * d.heads * plan.Sq;
  const Index per_task = merges * plan.chunks * plan.Dv <= (Index{1} << 14)
                             ? merges
                             : std::max<Index>(1, merges / (4 * ctx.num_threads()));
  ctx.ParallelFor((merges + per_task - 1) / per_task, [&](Index task, int worker) {
    std::vector<float>& row = buffers.rows[Z(worker)];
    for (Index x = task * per_task; x < std::min(merges, (task + 1) * per_task); ++x) {
      const Index i = x % plan.Sq, bh = x / plan.Sq;
      Merge(p, plan, part_ml.data(), part_acc.data(), out, p.lse, bh / d.heads, bh % d.heads, i,
            row.data());
    }
  });
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
