// Positional policies of the reference attention (include/posenc/attention.h):
// one small resolved form per PositionScheme::Kind, holding float64 copies of
// the scheme's tables so that the attention loops read plain arrays.
// Internal to src/attention; the public contract is in attention.h.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "posenc/attention.h"

namespace posenc::attention_internal {

// Sizes of one call (validated).
struct Dims {
  std::int64_t batch, heads, kv_heads, query_len, key_len, head_dim, value_dim;
  std::int64_t Group() const { return heads / kv_heads; }
};

// The shapes, mask window and token positions of one attention call,
// validated once for every attention (reference and fused).
struct CallShape {
  AttentionDims qd, kd, vd;
  Dims dims;
  std::int64_t window = 0;  // 0: no sliding window
  Positions query_positions, key_positions;
};

// Checks q, k, v against each other (batch, head_dim, seq, GQA grouping), the
// sliding window and the positions (default: queries bottom-right aligned);
// throws InvalidArgument naming the argument.
CallShape ValidateCallShape(const AttentionParams& params, const TensorView& q,
                            const TensorView& k, const TensorView& v);

// Validates a rank-4 attention tensor (an output, dout or a gradient) of
// exactly [batch, seq, heads, dim] in `layout`; InvalidArgument names `arg`.
AttentionDims CheckAttentionTensor(const TensorView& view, AttentionLayout layout,
                                   std::string_view arg, std::int64_t batch, std::int64_t seq,
                                   std::int64_t heads, std::int64_t dim, bool writable);

// Gradients of the position terms of one (query, key) pair, accumulated in
// float64 (the table gradients of AttentionReferenceBackward).
struct TableGrads {
  std::vector<double> t5;                  // [num_buckets, H]
  std::vector<double> shaw_key, shaw_value;  // [2 clip + 1, D / Dv]
  std::vector<double> xl_u, xl_v, xl_rw;   // [H, D], [H, D], [R, H, D]
  std::vector<double> deb_key, deb_query;  // [2 span, H, D]
};

// A scheme resolved for one call: tables copied to float64, row-major.
class Policy {
 public:
  // Validates the scheme against the dims (throws InvalidArgument naming
  // "scheme.<field>") and copies its tables.
  Policy(const PositionScheme& scheme, const Dims& dims);

  PositionScheme::Kind kind() const { return kind_; }
  bool has_value_term() const { return kind_ == PositionScheme::Kind::kShaw; }

  // The position terms inside the scaled logit (added to q . k): Shaw,
  // Transformer-XL, DeBERTa. q: D entries (query head h), k: D entries.
  double ContentTerm(std::int64_t h, const double* q, const double* k, std::int64_t qpos,
                     std::int64_t kpos) const;
  // The unscaled bias: ALiBi, T5.
  double BiasTerm(std::int64_t h, std::int64_t qpos, std::int64_t kpos) const;
  // Shaw a^V row for the pair (Dv entries), or null.
  const double* ValueRow(std::int64_t qpos, std::int64_t kpos) const;

  // Backward of one pair: g_content = d logit * scale (for ContentTerm),
  // g_bias = d logit (for BiasTerm), p_dout = P_ij * dO_i (Dv entries, for
  // the value term). Adds to dq (D), dk (D) and the table gradients.
  void Backward(std::int64_t h, const double* q, const double* k, std::int64_t qpos,
                std::int64_t kpos, double g_content, double g_bias, const double* p_dout,
                double* dq, double* dk, TableGrads& grads) const;

  // Throws InvalidArgument if a visible pair falls outside a table that
  // cannot represent it (Transformer-XL: distance >= R).
  void CheckPair(std::int64_t qpos, std::int64_t kpos) const;

  // Allocates zeroed gradient buffers for this scheme's tables.
  TableGrads ZeroGrads() const;

 private:
  PositionScheme::Kind kind_;
  Dims dims_;
  std::vector<double> slopes_;
  const T5BiasTable* t5_ = nullptr;
  std::int64_t shaw_clip_ = 0;
  std::vector<double> a_key_, a_value_;
  std::vector<double> xl_u_, xl_v_, xl_rw_;
  std::int64_t xl_rows_ = 0;
  std::optional<DebertaRelative> deberta_;
  std::vector<double> pos_key_, pos_query_;
};

// Copies a rank-`rank` view of any float dtype into a row-major float64
// vector after checking its shape (names `arg`).
std::vector<double> CopyTable(const TensorView& view, std::string_view arg,
                              std::initializer_list<std::int64_t> shape);

// Stores a row-major float64 buffer into a view of the same shape (validated
// as writable with that shape, named `arg`).
void StoreTable(const std::vector<double>& values, const TensorView& view, std::string_view arg,
                std::initializer_list<std::int64_t> shape);

}  // namespace posenc::attention_internal
