// Shapes of one attention call, shared by the reference and the fused
// attention: sizes, mask window and token positions validated once
// (ValidateCallShape), the check of an output/gradient tensor, and float64
// copies of small tables. Internal to src/attention; the public contract is
// in include/posenc/attention.h.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>
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
CallShape ValidateCallShape(const AttentionParams& params, const TensorView& q, const TensorView& k,
                            const TensorView& v);

// Validates a rank-4 attention tensor (an output, dout or a gradient) of
// exactly [batch, seq, heads, dim] in `layout`; InvalidArgument names `arg`.
AttentionDims CheckAttentionTensor(const TensorView& view, AttentionLayout layout,
                                   std::string_view arg, std::int64_t batch, std::int64_t seq,
                                   std::int64_t heads, std::int64_t dim, bool writable);

// Copies a rank-`rank` view of any float dtype into a row-major float64
// vector after checking its shape (names `arg`).
std::vector<double> CopyTable(const TensorView& view, std::string_view arg,
                              std::span<const std::int64_t> shape);
inline std::vector<double> CopyTable(const TensorView& view, std::string_view arg,
                                     std::initializer_list<std::int64_t> shape) {
  return CopyTable(view, arg, std::span<const std::int64_t>(shape.begin(), shape.size()));
}

// Stores a row-major float64 buffer into a view of the same shape (validated
// as writable with that shape, named `arg`).
void StoreTable(const std::vector<double>& values, const TensorView& view, std::string_view arg,
                std::span<const std::int64_t> shape);
inline void StoreTable(const std::vector<double>& values, const TensorView& view,
                       std::string_view arg, std::initializer_list<std::int64_t> shape) {
  StoreTable(values, view, arg, std::span<const std::int64_t>(shape.begin(), shape.size()));
}

}  // namespace posenc::attention_internal
