// Shapes of one attention call (attention/call_shape.h): validation shared
// by the reference and the fused attention, and float64 table copies.
#include "attention/call_shape.h"

#include <string>

#include "posenc/error.h"

namespace posenc::attention_internal {
namespace {

std::string ShapeText(std::span<const std::int64_t> shape) {
  std::string s = "[";
  bool first = true;
  for (auto n : shape) {
    s += (first ? "" : ", ") + std::to_string(n);
    first = false;
  }
  return s + "]";
}

void CheckShape(const TensorView& view, std::string_view arg, std::span<const std::int64_t> shape,
                bool writable) {
  ValidateView(view, arg, static_cast<int>(shape.size()), writable);
  int d = 0;
  for (auto n : shape) {
    if (view.shape[d] != n) {
      FailArgument(std::string(arg), view.Describe(), "shape " + ShapeText(shape));
    }
    ++d;
  }
}

// Offset in elements of row-major index `flat` of a view.
std::int64_t Offset(const TensorView& view, std::int64_t flat) {
  std::int64_t off = 0;
  for (int d = view.rank - 1; d >= 0; --d) {
    off += (flat % view.shape[d]) * view.strides[d];
    flat /= view.shape[d];
  }
  return off;
}

}  // namespace

std::vector<double> CopyTable(const TensorView& view, std::string_view arg,
                              std::span<const std::int64_t> shape) {
  CheckShape(view, arg, shape, /*writable=*/false);
  std::vector<double> out(static_cast<std::size_t>(view.NumElements()));
  for (std::int64_t i = 0; i < view.NumElements(); ++i) {
    out[static_cast<std::size_t>(i)] = LoadAsDouble(view.data, view.dtype, Offset(view, i));
  }
  return out;
}

void StoreTable(const std::vector<double>& values, const TensorView& view, std::string_view arg,
                std::span<const std::int64_t> shape) {
  CheckShape(view, arg, shape, /*writable=*/true);
  for (std::int64_t i = 0; i < view.NumElements(); ++i) {
    StoreFromDouble(view.data, view.dtype, Offset(view, i), values[static_cast<std::size_t>(i)]);
  }
}

AttentionDims CheckAttentionTensor(const TensorView& view, AttentionLayout layout,
                                   std::string_view arg, std::int64_t batch, std::int64_t seq,
                                   std::int64_t heads, std::int64_t dim, bool writable) {
  ValidateView(view, arg, 4, writable);
  const AttentionDims d = GetAttentionDims(view, layout, arg);
  if (!(d.batch == batch && d.seq == seq && d.heads == heads && d.head_dim == dim)) {
    FailArgument(std::string(arg), view.Describe(),
                 "[batch, seq, heads, dim] = [" + std::to_string(batch) + ", " +
                     std::to_string(seq) + ", " + std::to_string(heads) + ", " +
                     std::to_string(dim) + "] in layout " + std::string(LayoutName(layout)));
  }
  return d;
}

CallShape ValidateCallShape(const AttentionParams& params, const TensorView& q, const TensorView& k,
                            const TensorView& v) {
  CallShape c;
  c.qd = GetAttentionDims(q, params.layout, "q");
  c.kd = GetAttentionDims(k, params.layout, "k");
  c.vd = GetAttentionDims(v, params.layout, "v");
  const auto& qd = c.qd;
  const auto& kd = c.kd;
  const auto& vd = c.vd;
  if (kd.batch != qd.batch) {
    FailArgument("k batch", kd.batch, "q's batch (" + std::to_string(qd.batch) + ")");
  }
  if (vd.batch != qd.batch) {
    FailArgument("v batch", vd.batch, "q's batch (" + std::to_string(qd.batch) + ")");
  }
  if (kd.head_dim != qd.head_dim) {
    FailArgument("k head_dim", kd.head_dim, "q's head_dim (" + std::to_string(qd.head_dim) + ")");
  }
  if (vd.seq != kd.seq) {
    FailArgument("v seq", vd.seq, "k's seq (" + std::to_string(kd.seq) + ")");
  }
  if (vd.heads != kd.heads) {
    FailArgument("v heads", vd.heads, "k's heads (" + std::to_string(kd.heads) + ")");
  }
  if (qd.heads % kd.heads != 0) {
    FailArgument(
        "k heads", kd.heads,
        "a divisor of q's heads (" + std::to_string(qd.heads) + ", grouped-query attention)");
  }
  c.dims = Dims{qd.batch, qd.heads, kd.heads, qd.seq, kd.seq, qd.head_dim, vd.head_dim};
  if (params.sliding_window.has_value()) {
    Require(*params.sliding_window >= 1, "sliding_window", *params.sliding_window,
            "a window of at least 1 key (or no window)");
    c.window = *params.sliding_window;
  }
  if (params.query_positions.has_value()) {
    c.query_positions = *params.query_positions;
  } else {
    if (qd.seq > kd.seq) {
      FailArgument("query_positions", "default (bottom-right: Sk - Sq + i)",
                   "explicit query positions when Sq (" + std::to_string(qd.seq) + ") > Sk (" +
                       std::to_string(kd.seq) + ")");
    }
    c.query_positions = Positions::Offset(kd.seq - qd.seq);
  }
  c.key_positions = params.key_positions.value_or(Positions::Offset(0));
  ValidatePositions(c.query_positions, qd.batch, qd.seq, "query_positions");
  ValidatePositions(c.key_positions, qd.batch, kd.seq, "key_positions");
  return c;
}

}  // namespace posenc::attention_internal
