// DeBERTa log-bucket relative positions and disentangled attention terms.
// Formula, paper, conventions and the build_rpos pitfall:
// include/posenc/deberta.h. Matches HF deberta_v2 make_log_bucket_position
// (float32 arithmetic, as torch runs it) and build_relative_position:
// tests/golden/deberta_buckets.json.
#include "posenc/deberta.h"

#include <cmath>
#include <string>

#include "posenc/dtype.h"
#include "posenc/error.h"
#include "posenc/positions.h"

namespace posenc {

std::string_view DebertaPosAttTypeName(DebertaPosAttType t) {
  switch (t) {
    case DebertaPosAttType::kNone:
      return "none";
    case DebertaPosAttType::kC2P:
      return "c2p";
    case DebertaPosAttType::kP2C:
      return "p2c";
    case DebertaPosAttType::kC2PAndP2C:
      return "c2p|p2c";
  }
  return "?";
}

DebertaPosAttType ParseDebertaPosAttType(std::string_view text, std::string_view arg) {
  if (text == "none") return DebertaPosAttType::kNone;
  if (text == "c2p") return DebertaPosAttType::kC2P;
  if (text == "p2c") return DebertaPosAttType::kP2C;
  if (text == "c2p|p2c" || text == "p2c|c2p") return DebertaPosAttType::kC2PAndP2C;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "one of none, c2p, p2c, c2p|p2c"));
}

namespace {
constexpr std::int64_t kMaxBucketArg = std::int64_t{1} << 24;
bool HasC2P(DebertaPosAttType t) { return (static_cast<int>(t) & 1) != 0; }
bool HasP2C(DebertaPosAttType t) { return (static_cast<int>(t) & 2) != 0; }
}  // namespace

void ValidateDebertaBucketParams(const DebertaBucketParams& params) {
  if (!params.Enabled()) return;  // identity (HF: bucket_size or max_position <= 0)
  Require(params.bucket_size >= 2 && params.bucket_size <= kMaxBucketArg, "bucket_size",
          params.bucket_size, "a bucket count in [2, 2^24] (or <= 0 for no bucketing)");
  const std::int64_t mid = params.bucket_size / 2;
  if (!(params.max_position >= mid + 2 && params.max_position <= kMaxBucketArg)) {
    FailArgument("max_position", params.max_position,
                 "a maximum position in [bucket_size/2 + 2, 2^24] = [" + std::to_string(mid + 2) +
                     ", 2^24] so that ln((max_position - 1) / (bucket_size/2)) > 0 (or <= 0 for no "
                     "bucketing)");
  }
}

DebertaBucketer::DebertaBucketer(const DebertaBucketParams& params) : params_(params) {
  ValidateDebertaBucketParams(params);
  if (params.Enabled()) {
    mid_ = params.bucket_size / 2;
    // HF: torch.log(torch.tensor((max_position - 1) / mid)), a float32 tensor.
    const float ratio = static_cast<float>(static_cast<double>(params.max_position - 1) /
                                           static_cast<double>(mid_));
    log_denominator_ = static_cast<double>(std::log(ratio));
  }
}

std::int64_t DebertaBucketer::Bucket(std::int64_t relative) const noexcept {
  if (!params_.Enabled()) return relative;
  const std::int64_t abs = relative < 0 ? -relative : relative;
  if (abs <= mid_) return relative;
  // float32 as torch: abs_pos / mid, log, / log(...), * (mid - 1), ceil.
  const float num = std::log(static_cast<float>(abs) / static_cast<float>(mid_));
  const float scaled = num / static_cast<float>(log_denominator_) * static_cast<float>(mid_ - 1);
  const std::int64_t log_pos = static_cast<std::int64_t>(std::ceil(scaled)) + mid_;
  return relative < 0 ? -log_pos : log_pos;
}

std::int64_t MakeLogBucketPosition(std::int64_t relative, std::int64_t bucket_size,
                                   std::int64_t max_position) {
  const DebertaBucketParams params{bucket_size, max_position};
  if (!(params.Enabled())) {
    FailArgument("bucket_size/max_position",
                 std::to_string(bucket_size) + "/" + std::to_string(max_position),
                 "both > 0 (make_log_bucket_position always buckets)");
  }
  Require(relative >= -kMaxPosition && relative <= kMaxPosition, "relative", relative,
          "a relative position in [-(2^24-1), 2^24-1]");
  return DebertaBucketer(params).Bucket(relative);
}

std::vector<std::int64_t> BuildRelativePosition(std::int64_t query_size, std::int64_t key_size,
                                                const DebertaBucketParams& params) {
  Require(query_size >= 1 && query_size <= 65536, "query_size", query_size,
          "a length in [1, 65536]");
  Require(key_size >= 1 && key_size <= 65536, "key_size", key_size, "a length in [1, 65536]");
  // Materialised as int64: 65536 x 65536 would be 32 GiB.
  if (query_size * key_size > (std::int64_t{1} << 28)) {
    FailArgument("query_size * key_size",
                 std::to_string(query_size) + " * " + std::to_string(key_size),
                 "at most 2^28 cells (a 2 GiB int64 matrix)");
  }
  const DebertaBucketer bucketer(params);
  std::vector<std::int64_t> m(static_cast<std::size_t>(query_size * key_size));
  for (std::int64_t i = 0; i < query_size; ++i)
    for (std::int64_t j = 0; j < key_size; ++j)
      m[static_cast<std::size_t>(i * key_size + j)] = bucketer.Bucket(i - j);
  return m;
}

void ValidateDebertaParams(const DebertaParams& params) {
  Require(params.max_relative_positions >= 1 && params.max_relative_positions <= kMaxBucketArg,
          "max_relative_positions", params.max_relative_positions,
          "a span in [1, 2^24] (HF uses max_position_embeddings when the config value is < 1)");
  Require(params.position_buckets <= kMaxBucketArg, "position_buckets", params.position_buckets,
          "a bucket count <= 2^24 (or <= 0 for no bucketing)");
  Require(params.head_dim >= 1 && params.head_dim <= 65536, "head_dim", params.head_dim,
          "a dimension in [1, 65536]");
  const auto t = static_cast<int>(params.pos_att_type);
  Require(t >= 0 && t <= 3, "pos_att_type", t, "one of none, c2p, p2c, c2p|p2c");
  if (params.position_buckets > 0) {
    // Named as the config fields, then checked as the bucket arguments.
    const std::int64_t mid = params.position_buckets / 2;
    Require(params.position_buckets >= 2, "position_buckets", params.position_buckets,
            "a bucket count >= 2 (or <= 0 for no bucketing)");
    if (params.max_relative_positions < mid + 2) {
      FailArgument("max_relative_positions", params.max_relative_positions,
                   "at least position_buckets/2 + 2 = " + std::to_string(mid + 2) +
                       " when bucketing (the log range must be positive)");
    }
    ValidateDebertaBucketParams(params.Buckets());
  }
}

double DebertaScale(const DebertaParams& params) {
  ValidateDebertaParams(params);
  const int extra = (HasC2P(params.pos_att_type) ? 1 : 0) + (HasP2C(params.pos_att_type) ? 1 : 0);
  return 1.0 / std::sqrt(static_cast<double>(params.head_dim) * (1.0 + extra));
}

DebertaRelative::DebertaRelative(const DebertaParams& params)
    : params_(params),
      bucketer_((ValidateDebertaParams(params), params.Buckets())),
      span_(params.AttSpan()),
      scale_(DebertaScale(params)) {}

namespace {
std::int64_t Clamp(std::int64_t x, std::int64_t lo, std::int64_t hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}
}  // namespace

std::int64_t DebertaRelative::C2PIndex(std::int64_t query_pos,
                                       std::int64_t key_pos) const noexcept {
  return Clamp(bucketer_.Bucket(query_pos - key_pos) + span_, 0, 2 * span_ - 1);
}

std::int64_t DebertaRelative::P2CIndex(std::int64_t query_pos,
                                       std::int64_t key_pos) const noexcept {
  // HF: p2c_pos = clamp(-r_pos + att_span), r_pos the bucketed position of
  // the key relative to the query. (HF builds r_pos with swapped bucket
  // arguments when query_len != key_len; see the header. We do not.)
  return Clamp(-bucketer_.Bucket(key_pos - query_pos) + span_, 0, 2 * span_ - 1);
}

namespace {

template <typename T>
void TermsRow(const DebertaRelative& rel, const T* q, std::int64_t qp, const T* k,
              std::int64_t ld_k, const std::int64_t* kp, std::int64_t nk, const T* pos_key,
              const T* pos_query, T* out) {
  const std::int64_t d = rel.params().head_dim;
  const T scale = static_cast<T>(rel.scale());
  const bool c2p = HasC2P(rel.params().pos_att_type) && pos_key != nullptr;
  const bool p2c = HasP2C(rel.params().pos_att_type) && pos_query != nullptr;
  for (std::int64_t c = 0; c < nk; ++c) {
    T term = 0;
    if (c2p) {
      const T* r = pos_key + rel.C2PIndex(qp, kp[c]) * d;
      for (std::int64_t e = 0; e < d; ++e) term += q[e] * r[e];
    }
    if (p2c) {
      const T* r = pos_query + rel.P2CIndex(qp, kp[c]) * d;
      const T* kc = k + c * ld_k;
      for (std::int64_t e = 0; e < d; ++e) term += kc[e] * r[e];
    }
    out[c] += scale * term;
  }
}

double At(const TensorView& v, std::int64_t r, std::int64_t c) {
  return LoadAsDouble(v.data, v.dtype, r * v.strides[0] + c * v.strides[1]);
}

}  // namespace

void DebertaRelative::AddPositionTermsRow(const float* q, std::int64_t query_pos, const float* k,
                                          std::int64_t ld_k, const std::int64_t* key_pos,
                                          std::int64_t nk, const float* pos_key,
                                          const float* pos_query, float* out) const noexcept {
  TermsRow(*this, q, query_pos, k, ld_k, key_pos, nk, pos_key, pos_query, out);
}
void DebertaRelative::AddPositionTermsRow(const double* q, std::int64_t query_pos, const double* k,
                                          std::int64_t ld_k, const std::int64_t* key_pos,
                                          std::int64_t nk, const double* pos_key,
                                          const double* pos_query, double* out) const noexcept {
  TermsRow(*this, q, query_pos, k, ld_k, key_pos, nk, pos_key, pos_query, out);
}

void DebertaRelative::Scores(const TensorView& q, const TensorView& k, const TensorView& pos_key,
                             const TensorView& pos_query, const TensorView& out,
                             BiasWrite write) const {
  const std::int64_t d = params_.head_dim;
  const std::string dim_text = "head_dim D = " + std::to_string(d);
  const std::string rows_text = "2 * att_span = " + std::to_string(2 * span_) + " rows";
  ValidateView(q, "q", 2);
  ValidateView(k, "k", 2);
  Require(q.shape[1] == d, "q.shape[1]", q.shape[1], dim_text);
  Require(k.shape[1] == d, "k.shape[1]", k.shape[1], dim_text);
  const std::int64_t sq = q.shape[0], sk = k.shape[0];
  Require(sq <= 65536, "q.shape[0]", sq, "a query length in [1, 65536]");
  Require(sk <= 65536, "k.shape[0]", sk, "a key length in [1, 65536]");
  const bool c2p = HasC2P(params_.pos_att_type), p2c = HasP2C(params_.pos_att_type);
  auto check_table = [&](const TensorView& t, const char* name) {
    ValidateView(t, name, 2);
    if (t.shape[0] != 2 * span_) {
      FailArgument(std::string(name) + ".shape[0]", t.shape[0], rows_text);
    }
    if (t.shape[1] != d) {
      FailArgument(std::string(name) + ".shape[1]", t.shape[1], dim_text);
    }
  };
  if (c2p) check_table(pos_key, "pos_key");
  if (p2c) check_table(pos_query, "pos_query");
  ValidateView(out, "out", 2, /*writable=*/true);
  if (!(out.shape[0] == sq && out.shape[1] == sk)) {
    FailArgument("out.shape", out.Describe(),
                 "[query_len, key_len] = [" + std::to_string(sq) + ", " + std::to_string(sk) + "]");
  }
  RequireNoOverlap(out, "out", q, "q", false);
  RequireNoOverlap(out, "out", k, "k", false);
  if (c2p) RequireNoOverlap(out, "out", pos_key, "pos_key", false);
  if (p2c) RequireNoOverlap(out, "out", pos_query, "pos_query", false);
  for (std::int64_t i = 0; i < sq; ++i) {
    for (std::int64_t j = 0; j < sk; ++j) {
      double s = 0.0;
      for (std::int64_t e = 0; e < d; ++e) s += At(q, i, e) * At(k, j, e);
      if (c2p) {
        const std::int64_t r = C2PIndex(i, j);
        for (std::int64_t e = 0; e < d; ++e) s += At(q, i, e) * At(pos_key, r, e);
      }
      if (p2c) {
        const std::int64_t r = P2CIndex(i, j);
        for (std::int64_t e = 0; e < d; ++e) s += At(k, j, e) * At(pos_query, r, e);
      }
      s *= scale_;
      const std::int64_t off = i * out.strides[0] + j * out.strides[1];
      if (write == BiasWrite::kAdd) s += LoadAsDouble(out.data, out.dtype, off);
      StoreFromDouble(out.data, out.dtype, off, s);
    }
  }
}

}  // namespace posenc
