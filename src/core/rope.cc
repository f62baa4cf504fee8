// Rotary position embedding (RoPE) core: cos/sin tables and the q/k rotation,
// routed to the kernels (parameter validation and the default frequencies:
// rope_params.cc).
//
// Formula, paper, pairings and numerics: include/posenc/rope.h. Reference
// implementations matched (tests/golden/rope_init.json, rope_apply.json):
//  - kHF: HF transformers LlamaRotaryEmbedding.compute_default_rope_parameters,
//    its forward (float32 cos/sin times attention_scaling) and
//    apply_rotary_pos_emb / rotate_half (kHalfSplit, GPT-NeoX partial rotary
//    included); GPT-J create_sinusoidal_positions + rotate_every_two
//    (kInterleaved). cos/sin within 1 ulp of torch for the same inv_freq.
//  - kAccurate: the same rotations with float64 angles (error vs float64
//    truth <= 3e-9 before the final rounding to the storage dtype).
// Valid positions: [0, 2^24) forward, [-(2^24 - 1), 2^24) inverse. Work
// split: above RunApply.
#include "posenc/rope.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/scalar/rope.h"
#include "kernels/simd/rope.h"
#include "kernels/thread_scratch.h"
#include "posenc/error.h"

namespace posenc {

namespace {

using kernels::scalar::RopeMath;
using kernels::scalar::RopePairs;

// The frequency table of a call without a heap allocation in the steady
// state (c.h, "Memory"): explicit float64 frequencies are used where the
// caller keeps them (params outlive the call); the default table and the
// float32-rounded kHF copy come from a per-thread cache of the last few
// tables, built once. A cached table is shared (shared_ptr), so a plan keeps
// its table even when another plan on the same thread evicts the entry.
class FrequencyCache {
 public:
  std::shared_ptr<const std::vector<double>> Get(const RopeParams& params) {
    const std::vector<double>& given = params.frequencies.inv_freq;
    const std::int64_t rd = params.EffectiveRotaryDim();
    for (Entry& e : entries_) {
      if (e.table != nullptr && e.rotary_dim == rd && e.numerics == params.numerics &&
          (given.empty() ? e.given.empty() && e.theta == params.theta : e.given == given)) {
        return e.table;
      }
    }
    Entry& e = entries_[next_];
    next_ = (next_ + 1) % entries_.size();
    e.rotary_dim = rd;
    e.theta = params.theta;
    e.numerics = params.numerics;
    e.given = given;
    auto table = std::make_shared<std::vector<double>>();
    if (given.empty()) {
      *table = RopeDefaultFrequencies(rd, params.theta, params.numerics).inv_freq;
    } else {
      *table = given;
      for (double& v : *table) v = static_cast<float>(v);  // kHF: torch's float32 inv_freq
    }
    e.table = std::move(table);
    return e.table;
  }

 private:
  struct Entry {
    std::int64_t rotary_dim = 0;
    double theta = 0.0;
    RopeNumerics numerics = RopeNumerics::kAccurate;
    std::vector<double> given;
    std::shared_ptr<const std::vector<double>> table;
  };
  std::array<Entry, 4> entries_;
  std::size_t next_ = 0;
};

FrequencyCache& ThreadFrequencyCache() {
  thread_local FrequencyCache cache;
  return cache;
}
void ReleaseFrequencyCache() { ThreadFrequencyCache() = FrequencyCache{}; }
const kernels::ScratchHook kFrequencyCacheHook(&ReleaseFrequencyCache);

// Everything a call needs after validation. Not copyable: trig points into
// the table.
struct RopePlan {
  explicit RopePlan(const RopeParams& params) {
    ValidateRopeParams(params);
    const std::vector<double>& given = params.frequencies.inv_freq;
    if (!given.empty() && params.numerics == RopeNumerics::kAccurate) {
      inv_freq = given.data();
    } else {
      table = ThreadFrequencyCache().Get(params);
      inv_freq = table->data();
    }
    attention_factor = params.frequencies.attention_factor;
    rotary_dim = params.EffectiveRotaryDim();
    half = rotary_dim / 2;
    head_dim = params.head_dim;
    pairs =
        params.pairing == RopePairing::kHalfSplit ? RopePairs::kHalfSplit : RopePairs::kInterleaved;
    trig.inv_freq = inv_freq;
    trig.half = half;
    trig.attention_factor = attention_factor;
    trig.math = params.numerics == RopeNumerics::kHF ? RopeMath::kHF : RopeMath::kAccurate;
    trig.round_to = DType::kFloat32;
  }
  RopePlan(const RopePlan&) = delete;
  RopePlan& operator=(const RopePlan&) = delete;

  std::shared_ptr<const std::vector<double>> table;  // null: inv_freq is the caller's
  const double* inv_freq = nullptr;                  // half entries
  double attention_factor = 1.0;
  std::int64_t rotary_dim = 0, half = 0, head_dim = 0;
  RopePairs pairs = RopePairs::kHalfSplit;
  kernels::scalar::RopeTrigSpec trig;
};

char* ElemPtr(const TensorView& v, std::int64_t offset) {
  return static_cast<char*>(v.data) + offset * static_cast<std::int64_t>(DTypeSize(v.dtype));
}

// Rows of a cos/sin table per task.
constexpr std::int64_t kTableTile = 64;
// Tokens per apply task (their cos/sin are computed once, reused by all heads).
constexpr std::int64_t kTokenTile = 16;

void CheckTableView(const TensorView& t, const char* arg, std::int64_t count,
                    std::int64_t rotary_dim) {
  ValidateView(t, arg, 2, /*writable=*/true);
  if (t.shape[0] != count) {
    FailArgument(std::string(arg) + ".shape[0]", t.shape[0],
                 "count (" + std::to_string(count) + " positions)");
  }
  if (t.shape[1] != rotary_dim) {
    FailArgument(std::string(arg) + ".shape[1]", t.shape[1],
                 "rotary_dim (" + std::to_string(rotary_dim) + ")");
  }
}

// One tensor to rotate: input view, output view (== input in place), dims.
struct Target {
  TensorView in, out;
  AttentionDims din{}, dout{};
  kernels::scalar::RopeRowSpec row;
};

// The tensors of one call (x, or q and k): a fixed array, no allocation.
class Targets {
 public:
  void push_back(const Target& t) {
    assert(size_ < items_.size());
    items_[size_++] = t;
  }
  const Target& front() const { return items_[0]; }
  const Target& operator[](std::size_t i) const { return items_[i]; }
  const Target* begin() const { return items_.data(); }
  const Target* end() const { return items_.data() + size_; }
  std::size_t size() const { return size_; }

 private:
  std::array<Target, 2> items_{};
  std::size_t size_ = 0;
};

const char* SeqAxis(AttentionLayout layout) {
  return layout == AttentionLayout::kBSHD ? ".shape[1] (seq)" : ".shape[2] (seq)";
}

// Validates one input (and its optional output) against params.
Target MakeTarget(const RopePlan& plan, RopeMath math, const TensorView& in, const char* in_arg,
                  const TensorView* out, const char* out_arg, AttentionLayout layout) {
  Target t;
  t.in = in;
  t.din = GetAttentionDims(in, layout, in_arg);
  if (t.din.head_dim != plan.head_dim) {
    FailArgument(std::string(in_arg) + ".shape[3] (head_dim)", t.din.head_dim,
                 "params.head_dim (" + std::to_string(plan.head_dim) + ")");
  }
  if (out == nullptr) {
    ValidateView(in, in_arg, 4, /*writable=*/true);
    t.out = in;
  } else {
    ValidateView(*out, out_arg, 4, /*writable=*/true);
    if (out->dtype != in.dtype) {
      FailArgument(std::string(out_arg) + ".dtype", DTypeName(out->dtype),
                   std::string(in_arg) + "'s dtype (" + std::string(DTypeName(in.dtype)) + ")");
    }
    if (out->shape != in.shape) {
      FailArgument(std::string(out_arg) + ".shape", out->Describe(),
                   std::string(in_arg) + "'s shape (" + in.Describe() + ")");
    }
    RequireNoOverlap(*out, out_arg, in, in_arg, /*inplace_allowed=*/true);
    t.out = *out;
  }
  t.dout = GetAttentionDims(t.out, layout, out_arg);
  t.row.half = plan.half;
  t.row.head_dim = plan.head_dim;
  t.row.pairs = plan.pairs;
  t.row.math = math;
  t.row.dtype = in.dtype;
  return t;
}

// Rotates every target. Work split: (position tile [x batch row] x head
// group) tasks; cos/sin are computed once per token of a tile and reused by
// every head of q and k. cache (ApplyRopeWithCache): non-null data replaces
// the frequencies as the source of cos/sin (positions already validated
// against its rows).
void RunApply(const RopePlan& plan, const Targets& targets, const Positions& positions,
              RopeDirection direction, const Context& ctx,
              const kernels::simd::RopeCacheSource& cache = {}) {
  const AttentionDims& d0 = targets.front().din;
  const std::int64_t batch = d0.batch, seq = d0.seq, half = plan.half;
  ValidatePositions(
      positions, batch, seq, "positions",
      direction == RopeDirection::kInverse && cache.data == nullptr ? -kMaxPosition : 0);
  if (ctx.backend() != Backend::kScalar &&
      (plan.trig.math == RopeMath::kAccurate || cache.data == nullptr)) {
    // SIMD fast path (kernels/simd/rope.h); false when it does not cover the call.
    const kernels::simd::RopeApplySpec fast{plan.inv_freq,
                                            half,
                                            plan.head_dim,
                                            plan.attention_factor,
                                            direction == RopeDirection::kInverse ? -1.0 : 1.0,
                                            plan.pairs,
                                            batch,
                                            seq,
                                            positions,
                                            cache,
                                            plan.trig.math};
    std::array<kernels::simd::RopeViews, 2> views{};
    for (std::size_t i = 0; i < targets.size(); ++i) {
      const Target& t = targets[i];
      views[i] = {&t.in, &t.out, &t.din, &t.dout};
    }
    if (kernels::simd::TryRopeApply(fast, views.data(), static_cast<int>(targets.size()), ctx)) {
      return;
    }
  }
  // Positions shared by all batch rows: one task covers a tile of every row.
  const bool shared = positions.ids == nullptr || positions.count == seq;
  const std::int64_t tiles = (seq + kTokenTile - 1) / kTokenTile;
  const std::int64_t token_tasks = shared ? tiles : batch * tiles;
  std::int64_t total_heads = 0;
  for (const Target& t : targets) total_heads += t.din.heads;
  std::int64_t groups = 1;
  const std::int64_t want = 4 * static_cast<std::int64_t>(ctx.num_threads());
  if (ctx.num_threads() > 1 && token_tasks < want) {
    groups = std::min(total_heads, (want + token_tasks - 1) / token_tasks);
  }
  ctx.ParallelFor(token_tasks * groups, [&](std::int64_t task, int) {
    const std::int64_t token_task = task / groups, group = task % groups;
    const std::int64_t tile = shared ? token_task : token_task % tiles;
    const std::int64_t b_first = shared ? 0 : token_task / tiles;
    const std::int64_t b_end = shared ? batch : b_first + 1;
    const std::int64_t s0 = tile * kTokenTile, s1 = std::min(seq, s0 + kTokenTile);
    std::vector<double> cos(static_cast<std::size_t>((s1 - s0) * half));
    std::vector<double> sin(cos.size());
    for (std::int64_t s = s0; s < s1; ++s) {
      double* c = cos.data() + (s - s0) * half;
      double* sn = sin.data() + (s - s0) * half;
      const std::int64_t p = positions.At(b_first, s, seq);
      if (cache.data != nullptr) {
        for (std::int64_t j = 0; j < half; ++j) {
          const std::int64_t at = p * cache.row_stride + j * cache.col_stride;
          c[j] = LoadAsDouble(cache.data, cache.dtype, at);
          sn[j] = LoadAsDouble(cache.data, cache.dtype, at + half * cache.col_stride);
          if (plan.trig.math == RopeMath::kHF) {  // HF's float32 cos/sin
            c[j] = static_cast<float>(c[j]);
            sn[j] = static_cast<float>(sn[j]);
          }
        }
      } else {
        kernels::scalar::RopeTrig(plan.trig, p, c, sn);
      }
      if (direction == RopeDirection::kInverse) {
        for (std::int64_t j = 0; j < half; ++j) sn[j] = -sn[j];
      }
    }
    const std::int64_t h0 = group * total_heads / groups;
    const std::int64_t h1 = (group + 1) * total_heads / groups;
    for (std::int64_t hh = h0; hh < h1; ++hh) {
      std::int64_t h = hh;
      std::size_t ti = 0;
      while (h >= targets[ti].din.heads) h -= targets[ti++].din.heads;
      const Target& t = targets[ti];
      for (std::int64_t b = b_first; b < b_end; ++b) {
        for (std::int64_t s = s0; s < s1; ++s) {
          const char* in =
              ElemPtr(t.in, b * t.din.stride_batch + s * t.din.stride_seq + h * t.din.stride_head);
          char* out = ElemPtr(
              t.out, b * t.dout.stride_batch + s * t.dout.stride_seq + h * t.dout.stride_head);
          kernels::scalar::RopeRotateRow(t.row, cos.data() + (s - s0) * half,
                                         sin.data() + (s - s0) * half, in, t.din.stride_dim, out,
                                         t.dout.stride_dim);
        }
      }
    }
  });
}

RopeMath MathOf(const RopeParams& params) {
  return params.numerics == RopeNumerics::kHF ? RopeMath::kHF : RopeMath::kAccurate;
}

}  // namespace

void RopeCosSin(const RopeParams& params, const Positions& positions, std::int64_t count,
                const TensorView& cos, const TensorView& sin, const Context& ctx) {
  const RopePlan plan(params);
  Require(count >= 1, "count", count, "at least 1 position");
  if (positions.ids != nullptr) {
    if (positions.count != count) {
      FailArgument("positions.count", positions.count,
                   "count (" + std::to_string(count) + ") ids, one per table row");
    }
  }
  ValidatePositions(positions, 1, count, "positions");
  CheckTableView(cos, "cos", count, plan.rotary_dim);
  CheckTableView(sin, "sin", count, plan.rotary_dim);
  RequireNoOverlap(sin, "sin", cos, "cos", /*inplace_allowed=*/false);
  if (ctx.backend() != Backend::kScalar && plan.trig.math == RopeMath::kAccurate) {
    // SIMD fast path (kernels/simd/rope.h); false when it does not cover the call.
    const kernels::simd::RopeTableSpec fast{plan.inv_freq, plan.half, plan.attention_factor,
                                            plan.pairs,    positions, count};
    if (kernels::simd::TryRopeCosSin(fast, cos, sin, ctx)) return;
  }
  const std::int64_t half = plan.half;
  const bool half_split = plan.pairs == RopePairs::kHalfSplit;
  const std::int64_t tiles = (count + kTableTile - 1) / kTableTile;
  ctx.ParallelFor(tiles, [&](std::int64_t tile, int) {
    std::vector<double> c(static_cast<std::size_t>(half)), s(c.size());
    const std::int64_t end = std::min(count, (tile + 1) * kTableTile);
    for (std::int64_t r = tile * kTableTile; r < end; ++r) {
      kernels::scalar::RopeTrig(plan.trig, positions.At(0, r, count), c.data(), s.data());
      for (std::int64_t j = 0; j < half; ++j) {
        const std::int64_t col_a = half_split ? j : 2 * j;
        const std::int64_t col_b = half_split ? j + half : 2 * j + 1;
        for (const std::int64_t col : {col_a, col_b}) {
          StoreFromDouble(cos.data, cos.dtype, r * cos.strides[0] + col * cos.strides[1],
                          c[static_cast<std::size_t>(j)]);
          StoreFromDouble(sin.data, sin.dtype, r * sin.strides[0] + col * sin.strides[1],
                          s[static_cast<std::size_t>(j)]);
        }
      }
    }
  });
}

void ApplyRope(const RopeParams& params, const TensorView& x, AttentionLayout layout,
               const Positions& positions, RopeDirection direction, const TensorView* out,
               const Context& ctx) {
  const RopePlan plan(params);
  Targets targets;
  targets.push_back(MakeTarget(plan, MathOf(params), x, "x", out, "out", layout));
  RunApply(plan, targets, positions, direction, ctx);
}

void ApplyRopeQK(const RopeParams& params, const TensorView& q, const TensorView& k,
                 AttentionLayout layout, const Positions& positions, RopeDirection direction,
                 const Context& ctx) {
  ApplyRopeQK(params, q, k, layout, positions, direction, nullptr, nullptr, ctx);
}

void ApplyRopeQK(const RopeParams& params, const TensorView& q, const TensorView& k,
                 AttentionLayout layout, const Positions& positions, RopeDirection direction,
                 const TensorView* q_out, const TensorView* k_out, const Context& ctx) {
  const RopePlan plan(params);
  Targets targets;
  targets.push_back(MakeTarget(plan, MathOf(params), q, "q", q_out, "q_out", layout));
  targets.push_back(MakeTarget(plan, MathOf(params), k, "k", k_out, "k_out", layout));
  const AttentionDims& dq = targets[0].din;
  const AttentionDims& dk = targets[1].din;
  if (dk.batch != dq.batch) {
    FailArgument("k.shape[0] (batch)", dk.batch, "q's batch (" + std::to_string(dq.batch) + ")");
  }
  if (dk.seq != dq.seq) {
    FailArgument(std::string("k") + SeqAxis(layout), dk.seq,
                 "q's seq (" + std::to_string(dq.seq) + ")");
  }
  // Every output must be disjoint from the other tensor's input and output.
  const TensorView& oq = targets[0].out;
  const TensorView& ok = targets[1].out;
  RequireNoOverlap(oq, q_out ? "q_out" : "q", k, "k", /*inplace_allowed=*/false);
  RequireNoOverlap(ok, k_out ? "k_out" : "k", q, "q", /*inplace_allowed=*/false);
  if (q_out != nullptr || k_out != nullptr) {
    RequireNoOverlap(ok, k_out ? "k_out" : "k", oq, q_out ? "q_out" : "q",
                     /*inplace_allowed=*/false);
  }
  RunApply(plan, targets, positions, direction, ctx);
}

namespace {

// A rank-3 [tokens, heads, head_dim] view as rank-4 [1, tokens, heads, head_dim] (kBSHD).
TensorView AsBSHD(const TensorView& v) {
  TensorView r = v;
  r.rank = 4;
  r.shape = {1, v.shape[0], v.shape[1], v.shape[2], 0, 0};
  r.strides = {v.shape[0] * v.strides[0], v.strides[0], v.strides[1], v.strides[2], 0, 0};
  return r;
}

}  // namespace

void ApplyRopeVarlen(const RopeParams& params, const TensorView& x, const std::int64_t* cu_seqlens,
                     std::int64_t num_seqs, const std::int64_t* seq_offsets,
                     RopeDirection direction, const TensorView* out, const Context& ctx) {
  const RopePlan plan(params);
  ValidateView(x, "x", 3, /*writable=*/out == nullptr);
  if (x.shape[2] != plan.head_dim) {
    FailArgument("x.shape[2] (head_dim)", x.shape[2],
                 "params.head_dim (" + std::to_string(plan.head_dim) + ")");
  }
  if (out != nullptr) {
    ValidateView(*out, "out", 3, /*writable=*/true);
    if (out->dtype != x.dtype) {
      FailArgument("out.dtype", DTypeName(out->dtype),
                   "x's dtype (" + std::string(DTypeName(x.dtype)) + ")");
    }
    if (out->shape != x.shape) {
      FailArgument("out.shape", out->Describe(), "x's shape (" + x.Describe() + ")");
    }
    RequireNoOverlap(*out, "out", x, "x", /*inplace_allowed=*/true);
  }
  const std::int64_t total = x.shape[0];
  Require(num_seqs >= 1, "num_seqs", num_seqs, "at least 1 sequence");
  if (cu_seqlens == nullptr) {
    FailArgument("cu_seqlens", "null", "num_seqs + 1 cumulative sequence lengths");
  }
  Require(cu_seqlens[0] == 0, "cu_seqlens[0]", cu_seqlens[0], "0");
  for (std::int64_t s = 1; s <= num_seqs; ++s) {
    if (cu_seqlens[s] < cu_seqlens[s - 1] || cu_seqlens[s] > total) {
      FailArgument("cu_seqlens[" + std::to_string(s) + "]", cu_seqlens[s],
                   "a value in [cu_seqlens[" + std::to_string(s - 1) +
                       "] = " + std::to_string(cu_seqlens[s - 1]) +
                       ", total_tokens = x.shape[0] = " + std::to_string(total) +
                       "] (non-decreasing)");
    }
  }
  if (cu_seqlens[num_seqs] != total) {
    FailArgument("cu_seqlens[" + std::to_string(num_seqs) + "]", cu_seqlens[num_seqs],
                 "total_tokens = x.shape[0] = " + std::to_string(total) + " (the last entry)");
  }
  const std::int64_t min_pos = direction == RopeDirection::kInverse ? -kMaxPosition : 0;
  std::vector<std::int64_t> ids(static_cast<std::size_t>(total));
  for (std::int64_t s = 0; s < num_seqs; ++s) {
    const std::int64_t len = cu_seqlens[s + 1] - cu_seqlens[s];
    const std::int64_t off = seq_offsets == nullptr ? 0 : seq_offsets[s];
    const std::int64_t max_off = kMaxPosition - std::max<std::int64_t>(len - 1, 0);
    if (off < min_pos || off > max_off) {
      FailArgument("seq_offsets[" + std::to_string(s) + "]", off,
                   "an offset in [" + std::to_string(min_pos) + ", " + std::to_string(max_off) +
                       "] (positions of its " + std::to_string(len) + " tokens within [" +
                       std::to_string(min_pos) + ", 2^24 - 1])");
    }
    for (std::int64_t t = 0; t < len; ++t) {
      ids[static_cast<std::size_t>(cu_seqlens[s] + t)] = off + t;
    }
  }
  // One batch row of total_tokens tokens with per-token ids: runs of
  // consecutive positions still take the SIMD kernel's angle-addition path.
  const TensorView x4 = AsBSHD(x);
  const TensorView out4 = out == nullptr ? x4 : AsBSHD(*out);
  Targets targets;
  targets.push_back(
      MakeTarget(plan, MathOf(params), x4, "x", &out4, "out", AttentionLayout::kBSHD));
  RunApply(plan, targets, Positions::Ids(ids.data(), total), direction, ctx);
}

namespace {

void CheckCacheView(const TensorView& cache, std::int64_t rotary_dim, bool writable) {
  ValidateView(cache, "cos_sin_cache", 2, writable);
  if (cache.shape[1] != rotary_dim) {
    FailArgument("cos_sin_cache.shape[1]", cache.shape[1],
                 "rotary_dim (" + std::to_string(rotary_dim) + "): cos half | sin half");
  }
}

}  // namespace

void ApplyRopeWithCache(const RopeParams& params, const TensorView& x, AttentionLayout layout,
                        const Positions& positions, const TensorView& cos_sin_cache,
                        RopeDirection direction, const TensorView* out, const Context& ctx) {
  const RopePlan plan(params);
  CheckCacheView(cos_sin_cache, plan.rotary_dim, /*writable=*/false);
  Targets targets;
  targets.push_back(MakeTarget(plan, MathOf(params), x, "x", out, "out", layout));
  const AttentionDims& d = targets.front().din;
  ValidatePositions(positions, d.batch, d.seq, "positions");
  const std::int64_t rows = cos_sin_cache.shape[0];
  const std::int64_t n = positions.ids == nullptr ? 0 : positions.count;
  for (std::int64_t i = 0; i < n; ++i) {
    if (positions.ids[i] >= rows) {
      FailArgument(
          "positions.ids[" + std::to_string(i) + "]", positions.ids[i],
          "a position < cos_sin_cache.shape[0] (" + std::to_string(rows) + " cached rows)");
    }
  }
  if (positions.ids == nullptr) {
    if (positions.offset + d.seq > rows) {
      FailArgument("positions.offset", positions.offset,
                   "at most cos_sin_cache.shape[0] - seq = " + std::to_string(rows) + " - " +
                       std::to_string(d.seq) + " (positions < cached rows)");
    }
  }
  const kernels::simd::RopeCacheSource cache{cos_sin_cache.data, cos_sin_cache.dtype,
                                             cos_sin_cache.strides[0], cos_sin_cache.strides[1]};
  RunApply(plan, targets, positions, direction, ctx, cache);
}

void RopeCosSinCache(const RopeParams& params, const TensorView& cos_sin_cache,
                     const Context& ctx) {
  const RopePlan plan(params);
  CheckCacheView(cos_sin_cache, plan.rotary_dim, /*writable=*/true);
  const std::int64_t rows = cos_sin_cache.shape[0], half = plan.half;
  Require(rows <= kMaxPosition + 1, "cos_sin_cache.shape[0]", rows,
          "at most 2^24 rows (positions [0, 2^24))");
  const std::int64_t tiles = (rows + kTableTile - 1) / kTableTile;
  ctx.ParallelFor(tiles, [&](std::int64_t tile, int) {
    std::vector<double> c(static_cast<std::size_t>(half)), s(c.size());
    const std::int64_t end = std::min(rows, (tile + 1) * kTableTile);
    for (std::int64_t r = tile * kTableTile; r < end; ++r) {
      kernels::scalar::RopeTrig(plan.trig, r, c.data(), s.data());
      for (std::int64_t j = 0; j < half; ++j) {
        const std::int64_t at = r * cos_sin_cache.strides[0] + j * cos_sin_cache.strides[1];
        StoreFromDouble(cos_sin_cache.data, cos_sin_cache.dtype, at,
                        c[static_cast<std::size_t>(j)]);
        StoreFromDouble(cos_sin_cache.data, cos_sin_cache.dtype,
                        at + half * cos_sin_cache.strides[1], s[static_cast<std::size_t>(j)]);
      }
    }
  });
}

}  // namespace posenc
