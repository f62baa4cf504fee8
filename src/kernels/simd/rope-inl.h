// Per-target RoPE kernels (included once per Highway target by rope.cc);
// the cos/sin rows they rotate with come from rope_tables-inl.h.
// Numerics, conventions and coverage: kernels/simd/rope.h.

#if defined(POSENC_KERNELS_SIMD_ROPE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_SIMD_ROPE_INL_H_
#undef POSENC_KERNELS_SIMD_ROPE_INL_H_
#else
#define POSENC_KERNELS_SIMD_ROPE_INL_H_
#endif

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include "kernels/simd/rope.h"
#include "kernels/simd/rope_bf16_avx512.h"
#include "kernels/simd/rope_rows.h"
#include "kernels/simd/rope_tables-inl.h"
#include "kernels/simd/simd_math-inl.h"
#include "kernels/thread_scratch.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::kernels::simd {
namespace HWY_NAMESPACE {

namespace rope_detail {

using scalar::RopePairs;

// Tokens per task: at most kMaxTokenTile, at least kMinTokenTile (fewer
// only at the end of a sequence). Their cos/sin rows are computed once and
// reused by every head of every tensor in the task. Long tiles matter in the
// bhsd layout: a task walks each head's rows of its tile contiguously
// (256 tokens x 128 float32 = 128 KiB per head), so the hardware prefetcher
// sees long streams (short tiles are slower there: docs/PERFORMANCE.md,
// "Design figures").
constexpr std::int64_t kMaxTokenTile = 256;
constexpr std::int64_t kMinTokenTile = 32;
// Below this many rotated elements (all tensors) a call runs on the calling
// thread: waking the pool costs more than rotating one decode token of q
// and k (32 + 32 heads x 128) does.
constexpr std::int64_t kSerialElements = std::int64_t{1} << 17;

// Calls fn(d, j) for j = 0, step, ... covering [0, n) with the widest float
// vectors first, then 8, 4, 2 (and 1 when kMinLanes == 1) lanes.
template <int kMinLanes, class Fn>
HWY_INLINE void ForChunks(std::int64_t n, Fn&& fn) {
  std::int64_t j = 0;
  const hn::ScalableTag<float> d;
  const std::int64_t nl = static_cast<std::int64_t>(hn::Lanes(d));
  for (; j + nl <= n; j += nl) fn(d, j);
  const hn::CappedTag<float, 8> d8;
  for (; j + static_cast<std::int64_t>(hn::Lanes(d8)) <= n; j += hn::Lanes(d8)) fn(d8, j);
  const hn::CappedTag<float, 4> d4;
  for (; j + static_cast<std::int64_t>(hn::Lanes(d4)) <= n; j += hn::Lanes(d4)) fn(d4, j);
  const hn::CappedTag<float, 2> d2;
  for (; j + static_cast<std::int64_t>(hn::Lanes(d2)) <= n; j += hn::Lanes(d2)) fn(d2, j);
  if constexpr (kMinLanes == 1) {
    const hn::CappedTag<float, 1> d1;
    for (; j < n; ++j) fn(d1, j);
  }
}

// Rotates one row (rotary part only). c/s: float32 rows of the tile.
//  kHalfSplit: c[j] = af cos, s[j] = sign af sin, j < half.
//  kInterleaved: c[2j] = c[2j+1] = af cos, s[2j] = -sign af sin,
//    s[2j+1] = +sign af sin; out = v*c + swap_pairs(v)*s.
template <Store S, RopePairs P>
HWY_INLINE void RotateRow(const float* HWY_RESTRICT c, const float* HWY_RESTRICT s, const char* in,
                          char* out, std::int64_t half) {
  constexpr std::int64_t kB = kStoreBytes<S>;
  if constexpr (P == RopePairs::kHalfSplit) {
    const std::int64_t yo = half * kB;
    ForChunks<1>(half, [&](auto d, std::int64_t j) HWY_ATTR {
      const auto x = LoadF<S>(d, in + j * kB);
      const auto y = LoadF<S>(d, in + yo + j * kB);
      const auto vc = hn::LoadU(d, c + j);
      const auto vs = hn::LoadU(d, s + j);
      StoreF<S>(d, hn::NegMulAdd(y, vs, hn::Mul(x, vc)), out + j * kB);
      StoreF<S>(d, hn::MulAdd(x, vs, hn::Mul(y, vc)), out + yo + j * kB);
    });
  } else {
#if HWY_TARGET == HWY_SCALAR
    const hn::CappedTag<float, 1> d1;
    for (std::int64_t j = 0; j < 2 * half; j += 2) {
      const auto x = LoadF<S>(d1, in + j * kB);
      const auto y = LoadF<S>(d1, in + (j + 1) * kB);
      StoreF<S>(d1, hn::MulAdd(y, hn::Set(d1, s[j]), hn::Mul(x, hn::Set(d1, c[j]))), out + j * kB);
      StoreF<S>(d1, hn::MulAdd(x, hn::Set(d1, s[j + 1]), hn::Mul(y, hn::Set(d1, c[j + 1]))),
                out + (j + 1) * kB);
    }
#else
    ForChunks<2>(2 * half, [&](auto d, std::int64_t j) HWY_ATTR {
      const auto v = LoadF<S>(d, in + j * kB);
      const auto r =
          hn::MulAdd(hn::Reverse2(d, v), hn::LoadU(d, s + j), hn::Mul(v, hn::LoadU(d, c + j)));
      StoreF<S>(d, r, out + j * kB);
    });
#endif
  }
}

// HF numerics (scalar RotateRowT kHF): c/s already rounded to the storage
// type; every product and the sum rounded to it, no FMA (rope.cc is built
// with -ffp-contract=off so Mul + Add are never fused).
template <Store S, RopePairs P>
HWY_INLINE void RotateRowHF(const float* HWY_RESTRICT c, const float* HWY_RESTRICT s,
                            const char* in, char* out, std::int64_t half) {
  constexpr std::int64_t kB = kStoreBytes<S>;
  if constexpr (P == RopePairs::kHalfSplit) {
    const std::int64_t yo = half * kB;
    ForChunks<1>(half, [&](auto d, std::int64_t j) HWY_ATTR {
      const auto x = LoadF<S>(d, in + j * kB);
      const auto y = LoadF<S>(d, in + yo + j * kB);
      const auto vc = hn::LoadU(d, c + j);
      const auto vs = hn::LoadU(d, s + j);
      const auto xc = RoundF<S>(d, hn::Mul(x, vc)), ys = RoundF<S>(d, hn::Neg(hn::Mul(y, vs)));
      const auto yc = RoundF<S>(d, hn::Mul(y, vc)), xs = RoundF<S>(d, hn::Mul(x, vs));
      StoreF<S>(d, hn::Add(xc, ys), out + j * kB);
      StoreF<S>(d, hn::Add(yc, xs), out + yo + j * kB);
    });
  } else {
#if HWY_TARGET == HWY_SCALAR
    const hn::CappedTag<float, 1> d1;
    for (std::int64_t j = 0; j < 2 * half; j += 2) {
      const auto x = LoadF<S>(d1, in + j * kB);
      const auto y = LoadF<S>(d1, in + (j + 1) * kB);
      const auto xc = RoundF<S>(d1, hn::Mul(x, hn::Set(d1, c[j])));
      const auto ys = RoundF<S>(d1, hn::Mul(y, hn::Set(d1, s[j])));
      const auto yc = RoundF<S>(d1, hn::Mul(y, hn::Set(d1, c[j + 1])));
      const auto xs = RoundF<S>(d1, hn::Mul(x, hn::Set(d1, s[j + 1])));
      StoreF<S>(d1, hn::Add(xc, ys), out + j * kB);
      StoreF<S>(d1, hn::Add(yc, xs), out + (j + 1) * kB);
    }
#else
    ForChunks<2>(2 * half, [&](auto d, std::int64_t j) HWY_ATTR {
      const auto v = LoadF<S>(d, in + j * kB);
      const auto vc = RoundF<S>(d, hn::Mul(v, hn::LoadU(d, c + j)));
      const auto vs = RoundF<S>(d, hn::Mul(hn::Reverse2(d, v), hn::LoadU(d, s + j)));
      StoreF<S>(d, hn::Add(vc, vs), out + j * kB);
    });
#endif
  }
}

// Rotates the rows of `run`: row i uses the cos/sin rows c/s + i * cs_step
// floats (cs_step 0: one cos/sin row for all, e.g. the heads of one token).
// Dims past the rotary part (tail_bytes) are copied when out of place. The
// prefetch runs on into `next` (rope_rows.h). One out-of-line call per run
// of rows; the row body is inlined into this loop.
template <Store S, RopePairs P, bool kHF>
HWY_NOINLINE void RotateRows(const float* HWY_RESTRICT c, const float* HWY_RESTRICT s,
                             std::int64_t cs_step, const RopeRowRun& run, const RopeRowRun& next,
                             std::int64_t half, std::int64_t tail_bytes) {
  const std::int64_t rot_bytes = 2 * half * kStoreBytes<S>;
  const std::int64_t row_bytes = rot_bytes + tail_bytes;
  const std::int64_t ahead = RopePrefetchRows(row_bytes);
  for (std::int64_t i = 0; i < run.n; ++i) {
    const float* ci = c + i * cs_step;
    const float* si = s + i * cs_step;
    const char* pi = run.in + i * run.in_step;
    char* po = run.out + i * run.out_step;
    PrefetchRopeRow(run, next, i, ahead, row_bytes);
    if constexpr (kHF) {
      RotateRowHF<S, P>(ci, si, pi, po, half);
    } else {
      RotateRow<S, P>(ci, si, pi, po, half);
    }
    if (tail_bytes > 0 && pi != po) std::memcpy(po + rot_bytes, pi + rot_bytes, tail_bytes);
  }
}

// How one apply call is cut into tasks: token tiles (per batch row unless
// every row shares the positions) times head groups, serial for small calls.
struct ApplyTasks {
  bool serial = true, shared = true, token_major = false;
  std::int64_t tile_len = 1, tiles = 1, token_tasks = 1, groups = 1, total_heads = 0;
};

ApplyTasks SplitApplyTasks(const RopeApplySpec& spec, const RopeTensor* tensors, int num_tensors,
                           const Context& ctx) {
  ApplyTasks t;
  const std::int64_t batch = spec.batch, seq = spec.seq;
  t.shared = spec.positions.ids == nullptr || spec.positions.count == seq;
  for (int i = 0; i < num_tensors; ++i) t.total_heads += tensors[i].heads;
  t.serial =
      ctx.num_threads() == 1 || batch * seq * t.total_heads * spec.half * 2 < kSerialElements;
  const std::int64_t want = t.serial ? 1 : 4 * static_cast<std::int64_t>(ctx.num_threads());
  // The longest tile that still gives `want` token tasks (never below
  // kMinTokenTile: head groups split the work further instead).
  const std::int64_t rows_per_token_pass = t.shared ? 1 : batch;
  t.tile_len = kMaxTokenTile;
  while (t.tile_len > kMinTokenTile &&
         rows_per_token_pass * ((seq + t.tile_len - 1) / t.tile_len) < want) {
    t.tile_len /= 2;
  }
  t.tile_len = std::min(t.tile_len, seq);
  t.tiles = (seq + t.tile_len - 1) / t.tile_len;
  t.token_tasks = rows_per_token_pass * t.tiles;
  if (!t.serial && t.token_tasks < want) {
    t.groups = std::min(t.total_heads, (want + t.token_tasks - 1) / t.token_tasks);
  }
  // Token-major order when heads of one token are closer than tokens (bshd).
  t.token_major = tensors[0].in_stride_head < tensors[0].in_stride_seq;
  return t;
}

// What an apply call builds and may reuse: the column tables and one
// cos/sin scratch block per worker. It lives in the calling thread
// (kernels::ThreadBuffers) and keeps its capacity from call to call, so a call in
// the steady state (the same shapes every token and layer) allocates nothing
// (c.h, "Memory"). One apply call runs at a time per calling thread: its
// tasks never start another apply call on that thread.
// A worker's cos/sin block: C++17 aligned new (HWY_ALIGNMENT), so the
// module needs none of libhwy's run-time functions (the wasm build has none).
struct AlignedFloatsDelete {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t{HWY_ALIGNMENT}); }
};
using AlignedFloats = std::unique_ptr<float[], AlignedFloatsDelete>;

inline AlignedFloats AllocateAlignedFloats(std::size_t n) {
  return AlignedFloats(
      static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t{HWY_ALIGNMENT})));
}

struct ApplyStore {
  Tables tables;
  HfCols hf;
  std::vector<AlignedFloats> scratch;
  std::vector<std::size_t> scratch_floats;
};

// One apply call of storage S, pairing P and numerics kHF: the cos/sin
// source (tables, HF columns or a cache), the task split, and the two steps
// of a task — the cos/sin rows of its token tile, then the rotation of its
// heads' rows of that tile.
template <Store S, RopePairs P, bool kHF>
class ApplyRun {
 public:
  ApplyRun(const RopeApplySpec& spec, const RopeTensor* tensors, int num_tensors,
           const Context& ctx)
      : spec_(spec),
        tensors_(tensors),
        num_tensors_(num_tensors),
        from_cache_(spec.cache.data != nullptr),
        pad_(PadCols(spec.pairs == RopePairs::kInterleaved ? 2 * spec.half : spec.half)),
        tail_bytes_((spec.head_dim - 2 * spec.half) * kStoreBytes<S>),
        tasks_(SplitApplyTasks(spec, tensors, num_tensors, ctx)),
        store_(lease_.get()),
        tables_(store_.tables),
        hf_(store_.hf) {
    // Every worker's cos/sin block, sized here before any task runs: tasks
    // are handed out dynamically, and a worker that got none in one call
    // must not allocate in the next.
    const auto workers = static_cast<std::size_t>(tasks_.serial ? 1 : ctx.num_threads());
    if (store_.scratch.size() < workers) {
      store_.scratch.resize(workers);
      store_.scratch_floats.resize(workers, 0);
    }
    const auto need = static_cast<std::size_t>(2 * tasks_.tile_len * pad_);
    for (std::size_t w = 0; w < workers; ++w) {
      if (!store_.scratch[w] || store_.scratch_floats[w] < need) {
        store_.scratch[w] = AllocateAlignedFloats(need);
        store_.scratch_floats[w] = need;
      }
    }
    if (kHF) {
      MakeHfColumns(spec, hf_);
    } else if (!from_cache_) {
      MakeApplyColumns(spec, tables_);
    }
    // bfloat16 on an AVX3 CPU with AVX512-BF16: the hardware rounding
    // (rope_bf16_avx512.h, bit-identical) instead of the portable one.
#if HWY_TARGET == HWY_AVX3
    hw_bf16_ = S == Store::kBF16 && !kHF && RopeBf16HardwareAvailable();
#endif
  }

  std::int64_t num_tasks() const { return tasks_.token_tasks * tasks_.groups; }
  bool serial() const { return tasks_.serial; }

  void RunTask(std::int64_t task, int worker) {
    float* c = store_.scratch[static_cast<std::size_t>(worker)].get();  // sized by the constructor
    float* s = c + tasks_.tile_len * pad_;
    const std::int64_t token_task = task / tasks_.groups, group = task % tasks_.groups;
    const std::int64_t tile = tasks_.shared ? token_task : token_task % tasks_.tiles;
    const std::int64_t b_first = tasks_.shared ? 0 : token_task / tasks_.tiles;
    const std::int64_t b_end = tasks_.shared ? spec_.batch : b_first + 1;
    const std::int64_t s0 = tile * tasks_.tile_len;
    const std::int64_t s1 = std::min(spec_.seq, s0 + tasks_.tile_len);
    FillTileTrig(b_first, s0, s1 - s0, c, s);
    RotateTileHeads(group, b_first, b_end, s0, s1, c, s);
  }

 private:
  // cos/sin rows [n, pad] of tokens s0 .. s0 + n - 1 (positions of batch row b).
  void FillTileTrig(std::int64_t b, std::int64_t s0, std::int64_t n, float* c, float* s) const {
    const Positions& pos = spec_.positions;
    auto pos_of = [&](std::int64_t r) { return pos.At(b, s0 + r, spec_.seq); };
    if constexpr (kHF) {
      FillHfRows<S>(hf_, n, pos_of, c, s);
    } else if (from_cache_) {
      FillCacheRows(spec_, pad_, n, pos_of, c, s);
    } else {
      // Runs of consecutive positions (a whole tile for offsets; the
      // sequences of a packed varlen batch) take the angle-addition path.
      for (std::int64_t r0 = 0; r0 < n;) {
        const std::int64_t p0 = pos_of(r0);
        std::int64_t r1 = r0 + 1;
        while (r1 < n && pos_of(r1) == p0 + (r1 - r0)) ++r1;
        FillTrigRows(
            tables_.cols, r1 - r0, /*consecutive=*/r1 - r0 > 1,
            [&](std::int64_t r) { return pos_of(r0 + r); }, c + r0 * pad_, s + r0 * pad_);
        r0 = r1;
      }
    }
  }

  void Rotate(const float* rc, const float* rs, std::int64_t cs_step, const RopeRowRun& run,
              const RopeRowRun& next) const {
    if (hw_bf16_) {
      RotateRowsBf16Avx512(
          rc, rs, cs_step, run, next, spec_.half, tail_bytes_,
          P == RopePairs::kHalfSplit ? RopeBf16Pairs::kHalfSplit : RopeBf16Pairs::kInterleaved);
    } else {
      RotateRows<S, P, kHF>(rc, rs, cs_step, run, next, spec_.half, tail_bytes_);
    }
  }

  // Rotates the rows of tokens [s0, s1) of batch rows [b_first, b_end) for
  // the heads of this task's group (a range over all tensors' heads). Each
  // run is rotated once the next one is known, so its prefetch runs on into
  // the next run's first rows.
  void RotateTileHeads(std::int64_t group, std::int64_t b_first, std::int64_t b_end,
                       std::int64_t s0, std::int64_t s1, const float* c, const float* s) const {
    constexpr std::int64_t kB = kStoreBytes<S>;
    const std::int64_t h0 = group * tasks_.total_heads / tasks_.groups;
    const std::int64_t h1 = (group + 1) * tasks_.total_heads / tasks_.groups;
    RopeRowRun pending;  // the run waiting for its successor
    const float* pending_c = c;
    const float* pending_s = s;
    std::int64_t pending_step = 0;
    const auto push = [&](const RopeRowRun& run, const float* rc, const float* rs,
                          std::int64_t cs_step) {
      if (pending.n > 0) Rotate(pending_c, pending_s, pending_step, pending, run);
      pending = run;
      pending_c = rc;
      pending_s = rs;
      pending_step = cs_step;
    };
    std::int64_t first = 0;  // global index of tensor ti's head 0
    for (int ti = 0; ti < num_tensors_; first += tensors_[ti].heads, ++ti) {
      const RopeTensor& t = tensors_[ti];
      const std::int64_t ha = std::max<std::int64_t>(h0 - first, 0);
      const std::int64_t hb = std::min<std::int64_t>(h1 - first, t.heads);
      if (ha >= hb) continue;
      for (std::int64_t b = b_first; b < b_end; ++b) {
        const char* in_b = static_cast<const char*>(t.in) + b * t.in_stride_batch * kB;
        char* out_b = static_cast<char*>(t.out) + b * t.out_stride_batch * kB;
        if (tasks_.token_major) {  // per token: its heads, one cos/sin row
          for (std::int64_t si = s0; si < s1; ++si) {
            const std::int64_t r = si - s0;
            push({in_b + (si * t.in_stride_seq + ha * t.in_stride_head) * kB, t.in_stride_head * kB,
                  out_b + (si * t.out_stride_seq + ha * t.out_stride_head) * kB,
                  t.out_stride_head * kB, hb - ha},
                 c + r * pad_, s + r * pad_, 0);
          }
        } else {  // per head: its rows of the tile, contiguous in bhsd
          for (std::int64_t h = ha; h < hb; ++h) {
            push({in_b + (s0 * t.in_stride_seq + h * t.in_stride_head) * kB, t.in_stride_seq * kB,
                  out_b + (s0 * t.out_stride_seq + h * t.out_stride_head) * kB,
                  t.out_stride_seq * kB, s1 - s0},
                 c, s, pad_);
          }
        }
      }
    }
    push(RopeRowRun{}, c, s, 0);  // rotates the last run
  }

  const RopeApplySpec& spec_;
  const RopeTensor* tensors_;
  int num_tensors_;
  bool from_cache_;
  std::int64_t pad_, tail_bytes_;
  ApplyTasks tasks_;
  kernels::ThreadBuffers<ApplyStore> lease_;  // the calling thread's, for this call
  ApplyStore& store_;
  Tables& tables_;
  HfCols& hf_;
  bool hw_bf16_ = false;
};

template <Store S, RopePairs P, bool kHF>
void ApplyTyped(const RopeApplySpec& spec, const RopeTensor* tensors, int num_tensors,
                const Context& ctx) {
  ApplyRun<S, P, kHF> run(spec, tensors, num_tensors, ctx);
  if (run.serial()) {
    for (std::int64_t task = 0; task < run.num_tasks(); ++task) run.RunTask(task, 0);
  } else {
    ctx.ParallelFor(run.num_tasks(),
                    [&](std::int64_t task, int worker) { run.RunTask(task, worker); });
  }
}

template <Store S>
void ApplyPairs(const RopeApplySpec& spec, const RopeTensor* tensors, int num_tensors,
                const Context& ctx) {
  const bool hf = spec.math == scalar::RopeMath::kHF;
  if (spec.pairs == RopePairs::kHalfSplit) {
    if (hf) {
      ApplyTyped<S, RopePairs::kHalfSplit, true>(spec, tensors, num_tensors, ctx);
    } else {
      ApplyTyped<S, RopePairs::kHalfSplit, false>(spec, tensors, num_tensors, ctx);
    }
  } else if (hf) {
    ApplyTyped<S, RopePairs::kInterleaved, true>(spec, tensors, num_tensors, ctx);
  } else {
    ApplyTyped<S, RopePairs::kInterleaved, false>(spec, tensors, num_tensors, ctx);
  }
}

// Applies to tensors of one dtype at a time (q and k may differ in dtype:
// then each dtype gets its own pass over its tensors).
void ApplyOneDType(const RopeApplySpec& spec, const RopeTensor* tensors, int num_tensors,
                   const Context& ctx) {
  switch (tensors[0].dtype) {
    case DType::kFloat32:
      ApplyPairs<Store::kF32>(spec, tensors, num_tensors, ctx);
      break;
    case DType::kBFloat16:
      ApplyPairs<Store::kBF16>(spec, tensors, num_tensors, ctx);
      break;
    case DType::kFloat16:
      ApplyPairs<Store::kF16>(spec, tensors, num_tensors, ctx);
      break;
    case DType::kFloat64:
      break;  // not a fast dtype: RopeApplySupported is false
  }
}

// Writes the double vector v's first `cols` lanes (all when cols >= lanes)
// to out in storage kind S.
template <Store S, class DD>
HWY_INLINE void StoreTableChunk(DD dd, hn::Vec<DD> v, char* out, std::int64_t cols) {
  const hn::Rebind<float, DD> dfh;
  const auto vf = hn::DemoteTo(dfh, v);
  const std::int64_t nl = static_cast<std::int64_t>(hn::Lanes(dd));
  if (cols >= nl) {
    StoreF<S>(dfh, vf, out);
    return;
  }
  alignas(64) char tmp[kPadLanes * 4];
  StoreF<S>(dfh, vf, tmp);
  std::memcpy(out, tmp, static_cast<std::size_t>(cols * kStoreBytes<S>));
}

template <Store S0, Store S1>
void CosSinTyped(const RopeTableSpec& spec, const RopeTableOut& cos, const RopeTableOut& sin,
                 const Context& ctx) {
  // Columns in HF's layout: cat(f, f) (half split) or f0 f0 f1 f1 ...
  const bool inter = spec.pairs == RopePairs::kInterleaved;
  const std::int64_t ncols = 2 * spec.half, pad = PadCols(ncols);
  Tables t;
  for (auto* v : {&t.freq, &t.wc0, &t.ws0, &t.wc1, &t.ws1}) v->assign(pad, 0.0);
  for (std::int64_t col = 0; col < ncols; ++col) {
    t.freq[col] = spec.inv_freq[inter ? col / 2 : col % spec.half];
    t.wc0[col] = spec.attention_factor;
    t.ws1[col] = spec.attention_factor;
  }
  t.cols = TrigCols{t.freq.data(), t.wc0.data(), t.ws0.data(), t.wc1.data(), t.ws1.data(),
                    ncols,         pad,          nullptr,      nullptr};
  AttachSmallTable(t.cols, t.small_cos, t.small_sin);
  const TrigCols& cols = t.cols;

  constexpr std::int64_t kTile = 64;
  const std::int64_t tiles = (spec.count + kTile - 1) / kTile;
  const hn::ScalableTag<double> dd;
  ctx.ParallelFor(tiles, [&](std::int64_t tile, int) {
    const std::int64_t r0 = tile * kTile, n = std::min(spec.count, r0 + kTile) - r0;
    auto pos_of = [&](std::int64_t r) { return spec.positions.At(0, r0 + r, spec.count); };
    bool consecutive = true;  // consecutive ids: the same path as an offset
    for (std::int64_t r = 1; r < n && consecutive; ++r) consecutive = pos_of(r) == pos_of(0) + r;
    TrigRows<true>(cols, n, consecutive, pos_of,
                   [&](std::int64_t r, std::int64_t col, hn::Vec<decltype(dd)> v0,
                       hn::Vec<decltype(dd)> v1) HWY_ATTR {
                     if (col >= ncols) return;
                     char* oc = static_cast<char*>(cos.data) +
                                ((r0 + r) * cos.row_stride + col) * kStoreBytes<S0>;
                     char* os = static_cast<char*>(sin.data) +
                                ((r0 + r) * sin.row_stride + col) * kStoreBytes<S1>;
                     StoreTableChunk<S0>(dd, v0, oc, ncols - col);
                     StoreTableChunk<S1>(dd, v1, os, ncols - col);
                   });
  });
}

template <Store S0>
void CosSinSecond(const RopeTableSpec& spec, const RopeTableOut& cos, const RopeTableOut& sin,
                  const Context& ctx) {
  switch (sin.dtype) {
    case DType::kFloat32:
      CosSinTyped<S0, Store::kF32>(spec, cos, sin, ctx);
      break;
    case DType::kBFloat16:
      CosSinTyped<S0, Store::kBF16>(spec, cos, sin, ctx);
      break;
    case DType::kFloat16:
      CosSinTyped<S0, Store::kF16>(spec, cos, sin, ctx);
      break;
    case DType::kFloat64:
      break;  // not supported: RopeCosSinSupported is false
  }
}

}  // namespace rope_detail

void RopeApplyImpl(const RopeApplySpec& spec, const RopeTensor* tensors, int num_tensors,
                   const Context& ctx) {
  if (num_tensors == 2 && tensors[0].dtype != tensors[1].dtype) {
    rope_detail::ApplyOneDType(spec, tensors, 1, ctx);
    rope_detail::ApplyOneDType(spec, tensors + 1, 1, ctx);
    return;
  }
  rope_detail::ApplyOneDType(spec, tensors, num_tensors, ctx);
}

void RopeCosSinImpl(const RopeTableSpec& spec, const RopeTableOut& cos, const RopeTableOut& sin,
                    const Context& ctx) {
  using rope_detail::CosSinSecond;
  switch (cos.dtype) {
    case DType::kFloat32:
      CosSinSecond<Store::kF32>(spec, cos, sin, ctx);
      break;
    case DType::kBFloat16:
      CosSinSecond<Store::kBF16>(spec, cos, sin, ctx);
      break;
    case DType::kFloat16:
      CosSinSecond<Store::kF16>(spec, cos, sin, ctx);
      break;
    case DType::kFloat64:
      break;  // not supported: RopeCosSinSupported is false
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::kernels::simd
HWY_AFTER_NAMESPACE();

#endif  // POSENC_KERNELS_SIMD_ROPE_INL_H_ toggle
