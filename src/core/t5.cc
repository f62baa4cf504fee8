// T5 relative position buckets and the learned bias table.
// Formula, paper, conventions: include/posenc/t5.h.
// Matches HF T5Attention._relative_position_bucket bit for bit (the log
// branch in float32, truncated), tests/golden/t5_buckets.json.
// Routing: Backend::kScalar runs the loops below (the reference); kAuto /
// kSimd run kernels/simd/bias.h (identical buckets and values, threaded
// FillBias) when the output's columns are contiguous.
#include "posenc/t5.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "kernels/simd/bias.h"
#include "posenc/dtype.h"
#include "posenc/error.h"

namespace posenc {

std::string_view T5DirectionName(T5Direction d) {
  switch (d) {
    case T5Direction::kBidirectional:
      return "bidirectional";
    case T5Direction::kCausal:
      return "causal";
  }
  return "?";
}

T5Direction ParseT5Direction(std::string_view text, std::string_view arg) {
  if (text == "bidirectional") return T5Direction::kBidirectional;
  if (text == "causal") return T5Direction::kCausal;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "one of bidirectional, causal"));
}

void ValidateT5BucketParams(const T5BucketParams& params) {
  const bool bidir = params.direction == T5Direction::kBidirectional;
  const std::int64_t min_buckets = bidir ? 4 : 2;
  if (!(params.num_buckets >= min_buckets && params.num_buckets <= (std::int64_t{1} << 20))) {
    FailArgument("num_buckets", params.num_buckets,
                 std::string("a count in [") + std::to_string(min_buckets) + ", 2^20] for " +
                     std::string(T5DirectionName(params.direction)) +
                     " attention (the exact range num_buckets" + (bidir ? "/2/2" : "/2") +
                     " must hold at least one bucket, and the log range at least one)");
  }
  const std::int64_t nb = bidir ? params.num_buckets / 2 : params.num_buckets;
  const std::int64_t max_exact = nb / 2;
  if (!(params.max_distance > max_exact && params.max_distance <= kMaxPosition + 1)) {
    FailArgument("max_distance", params.max_distance,
                 "a distance above the exact range max_exact = " + std::to_string(max_exact) +
                     " (num_buckets=" + std::to_string(params.num_buckets) + ", " +
                     std::string(T5DirectionName(params.direction)) + ") and <= 2^24");
  }
}

T5Bucketer::T5Bucketer(const T5BucketParams& params) : params_(params) {
  ValidateT5BucketParams(params);
  nb_ =
      params.direction == T5Direction::kBidirectional ? params.num_buckets / 2 : params.num_buckets;
  max_exact_ = nb_ / 2;
  // HF: math.log(max_distance / max_exact) is a Python float that torch
  // rounds to float32 when dividing the float32 tensor.
  log_denominator_ = static_cast<float>(
      std::log(static_cast<double>(params.max_distance) / static_cast<double>(max_exact_)));
  // LogBucket is non-decreasing in n (each float32 step is monotone) and
  // capped at nb - 1: bisect for the first n that reaches the cap. It does
  // by n = 2 * max_distance at the latest (its log ratio is past 1).
  std::int64_t lo = max_exact_, hi = 2 * params.max_distance;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (LogBucket(mid) >= nb_ - 1) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  saturate_ = lo;
  if (saturate_ - max_exact_ <= 1024) {
    for (std::int64_t n = max_exact_; n < saturate_; ++n) {
      log_bucket_.push_back(static_cast<std::int32_t>(LogBucket(n)));
    }
  }
}

std::int64_t T5Bucketer::LogBucket(std::int64_t n) const noexcept {
  // float32 arithmetic in HF's order: log(n.float() / max_exact) / denom * (nb - max_exact).
  const float ratio = static_cast<float>(n) / static_cast<float>(max_exact_);
  const float scaled = std::log(ratio) / log_denominator_ * static_cast<float>(nb_ - max_exact_);
  std::int64_t large = max_exact_ + static_cast<std::int64_t>(scaled);  // trunc, scaled >= 0
  if (large > nb_ - 1) large = nb_ - 1;
  return large;
}

std::int64_t T5Bucketer::Bucket(std::int64_t relative) const noexcept {
  std::int64_t bucket = 0;
  std::int64_t n;
  if (params_.direction == T5Direction::kBidirectional) {
    if (relative > 0) bucket = nb_;
    n = relative < 0 ? -relative : relative;
  } else {
    n = relative < 0 ? -relative : 0;
  }
  if (n < max_exact_) return bucket + n;
  if (n >= saturate_) return bucket + nb_ - 1;
  if (!log_bucket_.empty()) return bucket + log_bucket_[static_cast<std::size_t>(n - max_exact_)];
  return bucket + LogBucket(n);
}

std::vector<std::int64_t> T5Buckets(const T5BucketParams& params, std::int64_t first,
                                    std::int64_t count) {
  const T5Bucketer bucketer(params);
  Require(count >= 1 && count <= (std::int64_t{1} << 24), "count", count, "a count in [1, 2^24]");
  Require(first >= -kMaxPosition && first <= kMaxPosition - (count - 1), "first", first,
          "relative positions first..first+count-1 within [-(2^24-1), 2^24-1]");
  std::vector<std::int64_t> out(static_cast<std::size_t>(count));
  for (std::int64_t r = 0; r < count; ++r)
    out[static_cast<std::size_t>(r)] = bucketer.Bucket(first + r);
  return out;
}

T5BiasTable::T5BiasTable(const T5BucketParams& params, std::int64_t heads)
    : bucketer_(params), heads_(heads) {
  Require(heads >= 1 && heads <= 4096, "heads", heads, "a head count in [1, 4096]");
  table_.assign(static_cast<std::size_t>(params.num_buckets * heads), 0.0f);
}

namespace {

std::uint64_t SplitMix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in (0, 1): 53 random bits, never 0.
double Uniform01(std::uint64_t& state) {
  return (static_cast<double>(SplitMix64(state) >> 11) + 0.5) * 0x1.0p-53;
}

}  // namespace

void T5BiasTable::InitNormal(std::uint64_t seed, double stddev) {
  Require(std::isfinite(stddev) && stddev >= 0.0, "stddev", stddev, "a finite number >= 0");
  std::uint64_t state = seed;
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (std::size_t e = 0; e < table_.size(); e += 2) {
    const double r = std::sqrt(-2.0 * std::log(Uniform01(state)));
    const double t = kTwoPi * Uniform01(state);
    table_[e] = static_cast<float>(stddev * r * std::cos(t));
    if (e + 1 < table_.size()) table_[e + 1] = static_cast<float>(stddev * r * std::sin(t));
  }
}

TensorView T5BiasTable::view() {
  return TensorView::Contiguous(table_.data(), DType::kFloat32, {num_buckets(), heads_});
}

namespace {

template <typename T>
void Tile(const T5Bucketer& b, const float* table, std::int64_t heads, std::int64_t head,
          const std::int64_t* qp, std::int64_t nq, const std::int64_t* kp, std::int64_t nk, T* out,
          std::int64_t ld, BiasWrite write) {
  for (std::int64_t r = 0; r < nq; ++r) {
    T* row = out + r * ld;
    for (std::int64_t c = 0; c < nk; ++c) {
      const T v = static_cast<T>(table[b.BucketOf(qp[r], kp[c]) * heads + head]);
      row[c] = write == BiasWrite::kAdd ? row[c] + v : v;
    }
  }
}

// The reference bucket, called by the SIMD kernel for boundary lanes.
std::int64_t ScalarBucket(const void* bucketer, std::int64_t rel) {
  return static_cast<const T5Bucketer*>(bucketer)->Bucket(rel);
}

kernels::simd::T5TableSpec KernelSpec(const T5Bucketer& b, const float* table, std::int64_t heads) {
  kernels::simd::T5TableSpec spec;
  spec.buckets.sign = b.params().direction == T5Direction::kBidirectional
                          ? kernels::simd::T5Sign::kBidirectional
                          : kernels::simd::T5Sign::kCausal;
  spec.buckets.nb = b.half_buckets();
  spec.buckets.max_exact = b.max_exact();
  spec.buckets.log_denominator = b.log_denominator();
  spec.buckets.scalar_bucket = &ScalarBucket;
  spec.buckets.bucketer = &b;
  spec.table = table;
  spec.num_buckets = b.params().num_buckets;
  spec.heads = heads;
  return spec;
}

kernels::simd::TileWrite KernelWrite(BiasWrite write) {
  return write == BiasWrite::kAdd ? kernels::simd::TileWrite::kAdd
                                  : kernels::simd::TileWrite::kOverwrite;
}

template <typename T>
void Grad(const T5Bucketer& b, std::int64_t heads, std::int64_t head, const std::int64_t* qp,
          std::int64_t nq, const std::int64_t* kp, std::int64_t nk, const T* d_bias,
          std::int64_t ld, T* d_table) {
  for (std::int64_t r = 0; r < nq; ++r) {
    const T* row = d_bias + r * ld;
    for (std::int64_t c = 0; c < nk; ++c)
      d_table[b.BucketOf(qp[r], kp[c]) * heads + head] += row[c];
  }
}

}  // namespace

void T5BiasTable::BiasTile(std::int64_t head, const std::int64_t* query_pos, std::int64_t nq,
                           const std::int64_t* key_pos, std::int64_t nk, float* out,
                           std::int64_t ld, BiasWrite write, Backend backend) const noexcept {
  if (backend != Backend::kScalar) {
    kernels::simd::T5Tile(KernelSpec(bucketer_, table_.data(), heads_), head, query_pos, nq,
                          key_pos, nk, out, DType::kFloat32, ld, KernelWrite(write));
    return;
  }
  Tile(bucketer_, table_.data(), heads_, head, query_pos, nq, key_pos, nk, out, ld, write);
}
void T5BiasTable::BiasTile(std::int64_t head, const std::int64_t* query_pos, std::int64_t nq,
                           const std::int64_t* key_pos, std::int64_t nk, double* out,
                           std::int64_t ld, BiasWrite write, Backend backend) const noexcept {
  if (backend != Backend::kScalar) {
    kernels::simd::T5Tile(KernelSpec(bucketer_, table_.data(), heads_), head, query_pos, nq,
                          key_pos, nk, out, DType::kFloat64, ld, KernelWrite(write));
    return;
  }
  Tile(bucketer_, table_.data(), heads_, head, query_pos, nq, key_pos, nk, out, ld, write);
}
void T5BiasTable::GradTile(std::int64_t head, const std::int64_t* query_pos, std::int64_t nq,
                           const std::int64_t* key_pos, std::int64_t nk, const float* d_bias,
                           std::int64_t ld, float* d_table) const noexcept {
  Grad(bucketer_, heads_, head, query_pos, nq, key_pos, nk, d_bias, ld, d_table);
}
void T5BiasTable::GradTile(std::int64_t head, const std::int64_t* query_pos, std::int64_t nq,
                           const std::int64_t* key_pos, std::int64_t nk, const double* d_bias,
                           std::int64_t ld, double* d_table) const noexcept {
  Grad(bucketer_, heads_, head, query_pos, nq, key_pos, nk, d_bias, ld, d_table);
}

namespace {

std::int64_t Offset3(const TensorView& v, std::int64_t a, std::int64_t b, std::int64_t c) {
  return a * v.strides[0] + b * v.strides[1] + c * v.strides[2];
}

}  // namespace

void T5BiasTable::FillBias(const Positions& query_positions, std::int64_t query_len,
                           std::int64_t key_len, const TensorView& out, const Context& ctx) const {
  Require(query_len >= 1, "query_len", query_len,
          "at least 1 (an empty query sequence has no bias)");
  Require(key_len >= 1 && key_len <= kMaxPosition + 1, "key_len", key_len,
          "at least 1 (an empty key sequence has no bias) and <= 2^24");
  ValidatePositions(query_positions, 1, query_len, "query_positions");
  ValidateView(out, "out", 3, /*writable=*/true);
  if (out.shape[0] != heads_) {
    FailArgument("out.shape[0]", out.shape[0], "heads (" + std::to_string(heads_) + ")");
  }
  if (out.shape[1] != query_len) {
    FailArgument("out.shape[1]", out.shape[1], "query_len (" + std::to_string(query_len) + ")");
  }
  if (out.shape[2] != key_len) {
    FailArgument("out.shape[2]", out.shape[2], "key_len (" + std::to_string(key_len) + ")");
  }
  if (ctx.backend() != Backend::kScalar &&
      kernels::simd::BiasSupported(out.dtype, out.strides[2])) {
    kernels::simd::T5FillRows(KernelSpec(bucketer_, table_.data(), heads_), query_positions,
                              query_len, key_len, out.data, out.dtype, out.strides[0],
                              out.strides[1], ctx);  // SIMD fast path
    return;
  }
  ctx.ParallelFor(heads_, [&](std::int64_t h, int) {
    for (std::int64_t i = 0; i < query_len; ++i) {
      const std::int64_t qp = query_positions.At(0, i, query_len);
      for (std::int64_t j = 0; j < key_len; ++j) {
        StoreFromDouble(out.data, out.dtype, Offset3(out, h, i, j), Bias(h, qp, j));
      }
    }
  });
}

void T5BiasTable::AccumulateGrad(const Positions& query_positions, const TensorView& d_bias,
                                 const TensorView& d_table, BiasWrite write) const {
  ValidateView(d_bias, "d_bias", 3);
  if (d_bias.shape[0] != heads_) {
    FailArgument("d_bias.shape[0]", d_bias.shape[0], "heads (" + std::to_string(heads_) + ")");
  }
  const std::int64_t query_len = d_bias.shape[1], key_len = d_bias.shape[2];
  ValidatePositions(query_positions, 1, query_len, "query_positions");
  ValidateView(d_table, "d_table", 2, /*writable=*/true);
  Require(d_table.dtype == DType::kFloat32 || d_table.dtype == DType::kFloat64, "d_table.dtype",
          DTypeName(d_table.dtype), "float32 or float64 (a gradient accumulator)");
  if (!(d_table.shape[0] == num_buckets() && d_table.shape[1] == heads_)) {
    FailArgument("d_table.shape", d_table.Describe(),
                 "[num_buckets, heads] = [" + std::to_string(num_buckets()) + ", " +
                     std::to_string(heads_) + "]");
  }
  RequireNoOverlap(d_table, "d_table", d_bias, "d_bias", /*inplace_allowed=*/false);
  auto at = [&](std::int64_t b, std::int64_t h) {
    return b * d_table.strides[0] + h * d_table.strides[1];
  };
  if (write == BiasWrite::kOverwrite) {
    for (std::int64_t b = 0; b < num_buckets(); ++b)
      for (std::int64_t h = 0; h < heads_; ++h)
        StoreFromDouble(d_table.data, d_table.dtype, at(b, h), 0.0);
  }
  // Accumulate in float64 per bucket, then add once: the sum order is fixed
  // and float32 accumulators lose nothing to long sums.
  std::vector<double> acc(static_cast<std::size_t>(num_buckets() * heads_), 0.0);
  for (std::int64_t h = 0; h < heads_; ++h) {
    for (std::int64_t i = 0; i < query_len; ++i) {
      const std::int64_t qp = query_positions.At(0, i, query_len);
      for (std::int64_t j = 0; j < key_len; ++j) {
        acc[static_cast<std::size_t>(bucketer_.BucketOf(qp, j) * heads_ + h)] +=
            LoadAsDouble(d_bias.data, d_bias.dtype, Offset3(d_bias, h, i, j));
      }
    }
  }
  for (std::int64_t b = 0; b < num_buckets(); ++b) {
    for (std::int64_t h = 0; h < heads_; ++h) {
      const double old = LoadAsDouble(d_table.data, d_table.dtype, at(b, h));
      StoreFromDouble(d_table.data, d_table.dtype, at(b, h),
                      old + acc[static_cast<std::size_t>(b * heads_ + h)]);
    }
  }
}

}  // namespace posenc
