// Internals of the decode attention (FlashAttentionDecode,
// include/posenc/flash_attention.h), shared by src/attention/flash_decode.cc
// (the chunk tasks and the merge; the algorithm in that file, the contract in
// the public header) and src/attention/flash_decode_plan.cc (the plan of
// a call, and the query rows and buffers laid out before the tasks start).
// Internal to src/attention.
#pragma once

#include <cstdint>
#include <vector>

#include "attention/flash_internal.h"
#include "kernels/simd/flash.h"

namespace posenc::flash_decode_internal {

using flash_internal::PositionRange;
using flash_internal::Problem;
using Index = std::int64_t;

constexpr Index kMaxQueries = 16;  // decode: Sq <= 16
// Keys per block: the fastest of 32, 64 and 128 at long caches
// (docs/PERFORMANCE.md, "Design figures").
constexpr Index kBlock = 64;
constexpr Index kMinChunk = 256;  // keys per chunk, at least
constexpr Index kMaxChunks = 64;  // chunks per batch row, at most

using flash_internal::Z;

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
  // Not bf16_keys, a SIMD backend, unit key strides, keys not rotated here,
  // D a multiple of kFlashPad, K float32 or 16-bit: the float32 logits read
  // the key rows in their storage (FlashDecodeLogitsStored, converted in
  // registers, each row once for 4 query rows), no float32 copy of K and
  // no FlashTouch pass over K or V.
  bool keys_in_place = false;
  kernels::simd::FlashStorage k_storage = kernels::simd::FlashStorage::kFloat32;
  // K and V hold the kv heads of a key side by side (bshd, unit strides,
  // keys not rotated here): a block of keys is one contiguous run. Unless
  // keys_in_place, its keys and values are read once in address order for
  // every kv head (converted to float32 rows, or, where the kernels read
  // them in place, touched by FlashTouch) so the hardware prefetchers see
  // one sequential stream instead of Hkv streams of 2 KiB strides: with the
  // AVX512_BF16 logits, faster than reading in place without the pass, than
  // copying, and than software prefetch (docs/PERFORMANCE.md, "Design
  // figures").
  bool block_rows = false;
  // Unit value strides and a SIMD backend: P . V reads the value rows in
  // their storage (FlashAccumulatePVStored, converted in registers; no
  // float32 copy of V, which costs a pass over the cache).
  bool v_in_place = false;
  kernels::simd::FlashStorage v_storage = kernels::simd::FlashStorage::kFloat32;
};

// The sizes a Work's buffers were laid out for (PrepareWork; the padded
// strides follow from D, Dv and kBlock).
struct WorkShape {
  Index kv_heads = -1, D = 0, Dv = 0, R = 0, Sq = 0;
  Index q_parts = 1;
  bool bf16_keys = false, keys_in_place = false, block_rows = false, v_in_place = false;
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

// The partials, the query rows and positions: the calling thread's, kept
// between calls (ThreadBuffers; partials 1 MiB at 32768 keys, GQA 32/8,
// D = 128), so a call in the steady state allocates nothing here; the
// partials are not zeroed: every task writes all the slots of its (batch,
// chunk).
// works[w]: worker w's blocks, laid out on the calling thread for
// every worker before the tasks start (a worker that happens to get no
// task in one call must not allocate in the next: tasks are handed out
// dynamically); rows[w]: worker w's merge row.
struct DecodeBuffers {
  std::vector<float> ml, acc;
  Queries queries;
  std::vector<Index> qpos;
  std::vector<PositionRange> qranges;
  std::vector<Work> works;
  std::vector<std::vector<float>> rows;
};

// The storage kind of a float32, bfloat16 or float16 view.
inline kernels::simd::FlashStorage Storage(DType dtype) {
  using kernels::simd::FlashStorage;
  return dtype == DType::kFloat32    ? FlashStorage::kFloat32
         : dtype == DType::kBFloat16 ? FlashStorage::kBFloat16
                                     : FlashStorage::kFloat16;
}

// The address of element `offset` of view's storage.
inline const void* ElementAt(const TensorView& view, Index offset) {
  return static_cast<const char*>(view.data) + offset * static_cast<Index>(DTypeSize(view.dtype));
}

// The tile sizes, chunking and kernel choices of a validated problem
// (p.dims.query_len already checked to be in [1, kMaxQueries]).
DecodePlan MakeDecodePlan(const Problem& p, const TensorView& q, const TensorView& k,
                          const TensorView& v, const Context& ctx);

// Lays out the call's buffers before the tasks start: the query positions
// and ranges, the query rows (rotated once), the partials sized for the
// plan's chunks, and every worker's Work and merge row.
void PrepareCall(const Problem& p, const DecodePlan& plan, const TensorView& q, const Context& ctx,
                 DecodeBuffers& buffers);

}  // namespace posenc::flash_decode_internal
