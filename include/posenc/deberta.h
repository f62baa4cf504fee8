// posenc/deberta.h: DeBERTa log-bucket relative positions and disentangled
// attention terms.
//
// He, Liu, Gao, Chen 2021, "DeBERTa: Decoding-enhanced BERT with
// Disentangled Attention", https://arxiv.org/abs/2006.03654, eq. (4)-(5);
// reference: HF transformers models/deberta_v2/modeling_deberta_v2.py
// (make_log_bucket_position, build_relative_position,
// DisentangledSelfAttention.disentangled_attention_bias).
//
// Relative positions: rel = q_pos - k_pos (query minus key). With
// position_buckets > 0 they are log-bucketed (DeBERTa-v3):
//   mid = bucket_size / 2
//   abs = (-mid < rel < mid) ? mid - 1 : |rel|
//   log_pos = ceil(ln(abs / mid) / ln((max_position - 1) / mid) * (mid - 1)) + mid
//   bucket = (abs <= mid) ? rel : log_pos * sign(rel)
// (bucket_size = position_buckets, max_position = max_relative_positions;
// not clamped: |bucket| may exceed mid, the gather clamps). The bucketing is
// odd: bucket(-r) = -bucket(r).
//
// Scores of one head, att_span = position_buckets > 0 ? position_buckets :
// max_relative_positions, Kr / Qr the projected relative embeddings
// [2 * att_span, D] (HF pos_key_layer / pos_query_layer):
//   c2p[i, j] = q_i . Kr[clamp(bucket(p_i - p_j) + att_span, 0, 2 att_span - 1)]
//   p2c[i, j] = k_j . Qr[clamp(-bucket(p_j - p_i) + att_span, 0, 2 att_span - 1)]
//   score     = (q_i . k_j + c2p + p2c) / sqrt(D * (1 + [c2p] + [p2c]))
// p2c follows HF/the original code: r_pos is the relative position computed
// from the key side (key j relative to query i), negated, i.e. the same
// index as c2p since the bucketing is odd. (The paper's eq. 4 writes
// Q^r_{delta(j, i)}; the released code and every checkpoint use the index
// above, so posenc does too.)
// Pitfall (survey d.11): when query_len != key_len HF's build_rpos is called
// with max_relative_positions and position_buckets in swapped order, so the
// p2c positions are bucketed with bucket_size = max_relative_positions and
// max_position = position_buckets (and built from key positions only).
// posenc follows the paper: p2c uses the true query/key positions and the
// same bucketing as c2p for every length; tests/unit/deberta_test.cc pins it.
//
// Numerics: bucketing in float32 exactly as torch runs it (ln, ceil) reproduces HF
// on tests/golden/deberta_buckets.json bit for bit; scores in float64 (matrix
// helpers) or the row type. Valid: |rel| <= kMaxPosition.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/relative.h"
#include "posenc/scheme.h"
#include "posenc/tensor.h"

namespace posenc {

// HF `pos_att_type` ("c2p|p2c" in configs).
enum class DebertaPosAttType : std::uint8_t { kNone = 0, kC2P = 1, kP2C = 2, kC2PAndP2C = 3 };
std::string_view DebertaPosAttTypeName(DebertaPosAttType t);  // "none", "c2p", "p2c", "c2p|p2c"
// Accepts the names above and "p2c|c2p" (case-sensitive).
DebertaPosAttType ParseDebertaPosAttType(std::string_view text,
                                         std::string_view arg = "pos_att_type");

struct DebertaBucketParams {
  // Bucketing is on when both are > 0 (HF build_relative_position); then
  // bucket_size >= 2 and max_position >= bucket_size / 2 + 2 (so that
  // ln((max_position - 1) / mid) > 0). Both <= 2^24.
  std::int64_t bucket_size = -1;
  std::int64_t max_position = -1;
  bool Enabled() const { return bucket_size > 0 && max_position > 0; }
};

// Throws InvalidArgument naming bucket_size or max_position.
void ValidateDebertaBucketParams(const DebertaBucketParams& params);

// HF make_log_bucket_position for one relative position (validates; the
// params must be enabled). |relative| <= kMaxPosition.
std::int64_t MakeLogBucketPosition(std::int64_t relative, std::int64_t bucket_size,
                                   std::int64_t max_position);

// Validated once; Bucket() is then cheap and noexcept. Disabled params give
// the identity.
class DebertaBucketer {
 public:
  explicit DebertaBucketer(const DebertaBucketParams& params);
  std::int64_t Bucket(std::int64_t relative) const noexcept;
  const DebertaBucketParams& params() const { return params_; }

 private:
  DebertaBucketParams params_;
  std::int64_t mid_ = 0;
  double log_denominator_ = 1.0;  // ln((max_position - 1) / mid)
};

// HF build_relative_position: row-major [query_size, key_size],
// m[i * key_size + j] = bucket(i - j). Sizes in [1, 2^16].
// query_size * key_size at most 2^28 (InvalidArgument before allocating).
std::vector<std::int64_t> BuildRelativePosition(std::int64_t query_size, std::int64_t key_size,
                                                const DebertaBucketParams& params);

struct DebertaParams {
  std::int64_t position_buckets = 256;        // <= 0: no bucketing
  std::int64_t max_relative_positions = 512;  // >= 1 (HF: config value, or
                                              // max_position_embeddings if < 1)
  DebertaPosAttType pos_att_type = DebertaPosAttType::kC2PAndP2C;
  std::int64_t head_dim = 64;  // D in [1, 65536]

  std::int64_t AttSpan() const {
    return position_buckets > 0 ? position_buckets : max_relative_positions;
  }
  DebertaBucketParams Buckets() const {
    return position_buckets > 0 ? DebertaBucketParams{position_buckets, max_relative_positions}
                                : DebertaBucketParams{};
  }
};

// Throws InvalidArgument naming the field.
void ValidateDebertaParams(const DebertaParams& params);

// 1 / sqrt(D * (1 + [c2p] + [p2c])): the factor of every score term.
double DebertaScale(const DebertaParams& params);

// Validated once at construction; the index and row functions are then
// unchecked and noexcept (attention loops).
class DebertaRelative {
 public:
  explicit DebertaRelative(const DebertaParams& params);

  const DebertaParams& params() const { return params_; }
  std::int64_t att_span() const { return span_; }
  double scale() const { return scale_; }
  // Rows of Kr / Qr used for (query at p_q, key at p_k), in [0, 2 att_span).
  std::int64_t C2PIndex(std::int64_t query_pos, std::int64_t key_pos) const noexcept;
  std::int64_t P2CIndex(std::int64_t query_pos, std::int64_t key_pos) const noexcept;

  // out[c] += scale * ([c2p] q . pos_key[C2PIndex(p_q, p_k[c])] +
  //                    [p2c] k_c . pos_query[P2CIndex(p_q, p_k[c])])
  // k: nk rows at row stride ld_k; pos_key / pos_query: contiguous
  // [2 att_span, D] (pass null for a term that is off). The content term
  // scale * q . k_c is the caller's.
  void AddPositionTermsRow(const float* q, std::int64_t query_pos, const float* k,
                           std::int64_t ld_k, const std::int64_t* key_pos, std::int64_t nk,
                           const float* pos_key, const float* pos_query, float* out) const noexcept;
  void AddPositionTermsRow(const double* q, std::int64_t query_pos, const double* k,
                           std::int64_t ld_k, const std::int64_t* key_pos, std::int64_t nk,
                           const double* pos_key, const double* pos_query,
                           double* out) const noexcept;

  // Whole-matrix helper (validated, float64): queries at 0..Sq-1, keys at
  // 0..Sk-1 (HF). q [Sq, D], k [Sk, D], pos_key / pos_query [2 att_span, D]
  // (a term that is off may pass an empty view: data null), out [Sq, Sk]
  // (=|+=) the full score including the content term.
  void Scores(const TensorView& q, const TensorView& k, const TensorView& pos_key,
              const TensorView& pos_query, const TensorView& out, BiasWrite write) const;

 private:
  DebertaParams params_;
  DebertaBucketer bucketer_;
  std::int64_t span_;
  double scale_;
};

// The attention scheme "deberta": q_i . Kr[c2p] + k_j . Qr[p2c], scaled;
// its default scale is DebertaScale(params). pos_key (Kr) and pos_query
// (Qr) are [2 att_span, H, D] views the caller keeps alive, data null when
// their term is off; params.head_dim must equal D.
PositionScheme DebertaScheme(const DebertaParams& params, const TensorView& pos_key,
                             const TensorView& pos_query);

}  // namespace posenc
