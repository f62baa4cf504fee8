// posenc/t5.h: T5 relative position buckets and the learned bias table.
//
// Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a
// Unified Text-to-Text Transformer", section 2.1; reference implementation
// HF transformers `T5Attention._relative_position_bucket` / `compute_bias`.
// rel = key_pos - query_pos (HF `memory_position - context_position`).
//  - kBidirectional (encoder): nb = num_buckets / 2, bucket = (rel > 0) * nb,
//    n = |rel|.
//  - kCausal (decoder): nb = num_buckets, bucket = 0, n = max(-rel, 0).
//  max_exact = nb / 2; n < max_exact: bucket += n; otherwise
//  bucket += min(nb - 1, max_exact + trunc(ln(n / max_exact) /
//                ln(max_distance / max_exact) * (nb - max_exact))).
// The score term is bias(h, i, j) = table[bucket(key_pos_j - query_pos_i), h]
// with table [num_buckets, heads] float32 (HF `nn.Embedding(num_buckets,
// n_heads)`); T5 adds it unscaled to q.k (T5 does not scale by 1/sqrt(d)).
//
// Numerics: the log branch is evaluated in float32 exactly as HF does
// (float32 n / max_exact, float32 log, divided by the float32-rounded
// float64 log of max_distance / max_exact, times nb - max_exact, truncated),
// reproducing tests/golden/t5_buckets.json bit for bit. Buckets are exact
// integers. Valid relative positions: |rel| <= kMaxPosition (2^24 - 1).
//
// Validity (ValidateT5BucketParams): with nb as above, max_exact = nb / 2
// must be >= 1 and the log range nb - max_exact >= 1, so num_buckets >= 4
// (bidirectional) or >= 2 (causal); max_distance > max_exact (else the log
// denominator is <= 0).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/context.h"
#include "posenc/positions.h"
#include "posenc/relative.h"
#include "posenc/scheme.h"
#include "posenc/tensor.h"

namespace posenc {

enum class T5Direction : std::uint8_t { kBidirectional, kCausal };

std::string_view T5DirectionName(T5Direction d);  // "bidirectional", "causal"
T5Direction ParseT5Direction(std::string_view text, std::string_view arg = "direction");

struct T5BucketParams {
  std::int64_t num_buckets = 32;    // see the validity rule above; <= 2^20
  std::int64_t max_distance = 128;  // > max_exact; <= 2^24
  T5Direction direction = T5Direction::kBidirectional;
};

// Throws InvalidArgument naming num_buckets or max_distance.
void ValidateT5BucketParams(const T5BucketParams& params);

// Validated once at construction; Bucket() is then a cheap, noexcept call
// for use inside attention loops: distances in the logarithmic range come
// from a table made at construction (when that range spans at most 1024
// distances; else the float32 formula), and distances at or past the first
// one in the last bucket (found by bisection: the bucket never decreases
// with the distance) return it without a log. Same buckets as the formula.
class T5Bucketer {
 public:
  explicit T5Bucketer(const T5BucketParams& params);  // validates
  // Bucket of rel = key_pos - query_pos, in [0, num_buckets).
  std::int64_t Bucket(std::int64_t relative) const noexcept;
  std::int64_t BucketOf(std::int64_t query_pos, std::int64_t key_pos) const noexcept {
    return Bucket(key_pos - query_pos);
  }
  const T5BucketParams& params() const { return params_; }
  std::int64_t max_exact() const { return max_exact_; }
  std::int64_t half_buckets() const { return nb_; }  // nb
  float log_denominator() const { return log_denominator_; }

 private:
  std::int64_t LogBucket(std::int64_t n) const noexcept;  // n >= max_exact: HF's formula

  T5BucketParams params_;
  std::int64_t nb_;
  std::int64_t max_exact_;
  float log_denominator_;                 // float32(ln(max_distance / max_exact))
  std::int64_t saturate_ = 0;             // smallest n with LogBucket(n) = nb - 1
  std::vector<std::int32_t> log_bucket_;  // LogBucket(max_exact + i), n < saturate_ (or empty)
};

// Buckets of rel = first, first + 1, ..., first + count - 1 (validates;
// count in [1, 2^24], |rel| <= kMaxPosition).
std::vector<std::int64_t> T5Buckets(const T5BucketParams& params, std::int64_t first,
                                    std::int64_t count);

// The learned bias table [num_buckets, heads], float32, row-major, owned.
// Query/key positions passed to the tile functions are absolute positions
// (HF: query i at past_len + i, key j at j); they are not checked (hot path).
class T5BiasTable {
 public:
  // Zero-initialised table; heads in [1, 4096]. Validates params.
  T5BiasTable(const T5BucketParams& params, std::int64_t heads);

  // Fills the table with N(0, stddev^2) from a deterministic generator
  // (SplitMix64 + Box-Muller): the same seed gives the same table on every
  // platform. HF initialises with stddev = factor * d_model^-0.5.
  // stddev finite and >= 0.
  void InitNormal(std::uint64_t seed, double stddev);

  std::int64_t heads() const { return heads_; }
  std::int64_t num_buckets() const { return bucketer_.params().num_buckets; }
  const T5Bucketer& bucketer() const { return bucketer_; }
  float* data() { return table_.data(); }
  const float* data() const { return table_.data(); }
  // [num_buckets, heads] float32 view of the storage.
  TensorView view();

  // bias(h, i, j) = table[bucket(key_pos - query_pos), h]. Unchecked.
  float Bias(std::int64_t head, std::int64_t query_pos, std::int64_t key_pos) const noexcept {
    return table_[static_cast<std::size_t>(bucketer_.BucketOf(query_pos, key_pos) * heads_ + head)];
  }

  // Tile form for attention kernels: out[r * ld + c] (=|+=) bias(head,
  // query_pos[r], key_pos[c]) for r < nq, c < nk. Unchecked (head in range,
  // ld >= nk, buffers large enough, positions in [0, 2^24)): callers
  // validate once per call. backend kScalar = the reference loop; kAuto /
  // kSimd = the Highway kernel (kernels/simd/bias.h: identical buckets and
  // values; consecutive keys take the per-distance line, others a vector
  // bucket per element). Runs on the calling thread, allocates nothing.
  void BiasTile(std::int64_t head, const std::int64_t* query_pos, std::int64_t nq,
                const std::int64_t* key_pos, std::int64_t nk, float* out, std::int64_t ld,
                BiasWrite write, Backend backend = Backend::kAuto) const noexcept;
  void BiasTile(std::int64_t head, const std::int64_t* query_pos, std::int64_t nq,
                const std::int64_t* key_pos, std::int64_t nk, double* out, std::int64_t ld,
                BiasWrite write, Backend backend = Backend::kAuto) const noexcept;

  // Backward of the tile: d_table[bucket(key_pos[c] - query_pos[r]), head] +=
  // d_bias[r * ld + c]. d_table is [num_buckets, heads] row-major (float32
  // or float64 accumulator). Unchecked.
  void GradTile(std::int64_t head, const std::int64_t* query_pos, std::int64_t nq,
                const std::int64_t* key_pos, std::int64_t nk, const float* d_bias, std::int64_t ld,
                float* d_table) const noexcept;
  void GradTile(std::int64_t head, const std::int64_t* query_pos, std::int64_t nq,
                const std::int64_t* key_pos, std::int64_t nk, const double* d_bias, std::int64_t ld,
                double* d_table) const noexcept;

  // Whole-matrix helpers (tests, pictures): out is [heads, query_len,
  // key_len] of any dtype (strided allowed); queries at query_positions
  // (ids with count == query_len, or an offset), keys at 0..key_len-1.
  // HF compute_bias(query_length, key_length) is query offset = past length.
  // ctx: backend as BiasTile (the SIMD path needs contiguous columns) and
  // threads (tasks: 64-row tiles x head groups).
  void FillBias(const Positions& query_positions, std::int64_t query_len, std::int64_t key_len,
                const TensorView& out, const Context& ctx = Context{}) const;
  // d_table (+)= scatter of d_bias [heads, query_len, key_len] (any dtype);
  // d_table is [num_buckets, heads] float32 or float64.
  void AccumulateGrad(const Positions& query_positions, const TensorView& d_bias,
                      const TensorView& d_table, BiasWrite write) const;

 private:
  T5Bucketer bucketer_;
  std::int64_t heads_;
  std::vector<float> table_;
};

// The attention scheme "t5": bias table[bucket(r - p), h] (unscaled; T5
// itself uses scale = 1), buckets of T5Bucketer with `max_distance` and
// `direction` (num_buckets: the table's rows). The scheme views the table
// [num_buckets, H] (H = the call's query heads): it must outlive the calls.
PositionScheme T5Scheme(const TensorView& table, std::int64_t max_distance, T5Direction direction);
// The same for a T5BiasTable (its values and bucketing).
PositionScheme T5Scheme(const T5BiasTable& table);

}  // namespace posenc
