// Validation and helpers of posenc/tensor.h and posenc/dtype.h.
#include "posenc/tensor.h"

#include <algorithm>
#include <sstream>
#include <string>

#include "posenc/error.h"

namespace posenc {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat16:
      return "float16";
  }
  return "?";
}

DType ParseDType(std::string_view text, std::string_view arg) {
  if (text == "float32" || text == "f32" || text == "fp32") return DType::kFloat32;
  if (text == "float64" || text == "f64" || text == "fp64") return DType::kFloat64;
  if (text == "bfloat16" || text == "bf16") return DType::kBFloat16;
  if (text == "float16" || text == "f16" || text == "fp16") return DType::kFloat16;
  throw InvalidArgument(
      ArgMessage(arg, std::string(text), "one of float32, float64, bfloat16, float16"));
}

namespace {
TensorView Make(void* data, DType dtype, std::initializer_list<std::int64_t> shape) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  Require(shape.size() >= 1 && shape.size() <= static_cast<std::size_t>(kMaxRank), "rank",
          shape.size(), "a rank in [1, 6]");
  v.rank = static_cast<int>(shape.size());
  std::copy(shape.begin(), shape.end(), v.shape.begin());
  return v;
}
}  // namespace

TensorView TensorView::Contiguous(void* data, DType dtype,
                                  std::initializer_list<std::int64_t> shape) {
  TensorView v = Make(data, dtype, shape);
  std::int64_t stride = 1;
  for (int d = v.rank - 1; d >= 0; --d) {
    v.strides[d] = stride;
    stride *= v.shape[d];
  }
  return v;
}

TensorView TensorView::Strided(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                               std::initializer_list<std::int64_t> strides) {
  if (shape.size() != strides.size()) {
    FailArgument("strides", strides.size(),
                 "as many strides as dimensions (" + std::to_string(shape.size()) + ")");
  }
  TensorView v = Make(data, dtype, shape);
  std::copy(strides.begin(), strides.end(), v.strides.begin());
  return v;
}

std::int64_t TensorView::NumElements() const {
  std::int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[d];
  return n;
}

bool TensorView::IsContiguous() const {
  std::int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != stride) return false;
    stride *= shape[d];
  }
  return true;
}

std::pair<std::uintptr_t, std::uintptr_t> TensorView::ByteSpan() const {
  std::int64_t last = 0;
  for (int d = 0; d < rank; ++d) last += (shape[d] - 1) * strides[d];
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  return {first, first + static_cast<std::uintptr_t>((last + 1) * DTypeSize(dtype))};
}

std::string TensorView::Describe() const {
  std::ostringstream os;
  os << '[';
  for (int d = 0; d < rank; ++d) os << (d ? ", " : "") << shape[d];
  os << "] " << DTypeName(dtype);
  return os.str();
}

namespace {

// An argument name that prefixes field names, building the string only when a message is built.
struct ArgName {
  std::string_view arg;
  std::string operator+(const char* field) const { return std::string(arg) + field; }
  std::string operator+(const std::string& field) const { return std::string(arg) + field; }
  operator std::string() const { return std::string(arg); }  // NOLINT: implicit on purpose
};

// Checks every dimension of view: size >= 1, stride >= 0 and below 2^48 bytes.
void CheckDims(const TensorView& view, const ArgName& a) {
  const std::int64_t max_stride = kMaxViewBytes / static_cast<std::int64_t>(DTypeSize(view.dtype));
  for (int d = 0; d < view.rank; ++d) {
    // The messages are built only on failure (every public call validates
    // its views).
    if (view.shape[d] < 1) {
      FailArgument(a + ".shape[" + std::to_string(d) + "]", view.shape[d],
                   "a size >= 1 (empty tensors are not accepted)");
    }
    if (view.strides[d] < 0) {
      FailArgument(a + ".strides[" + std::to_string(d) + "]", view.strides[d],
                   "a non-negative stride in elements");
    }
    // Also for size-1 dimensions, whose stride addresses nothing: kernels
    // still scale every stride to bytes (fuzz_rope_views found
    // stride * 2 overflowing int64 on a size-1 dimension).
    if (view.strides[d] >= max_stride) {
      FailArgument(a + ".strides[" + std::to_string(d) + "]", view.strides[d],
                   "a stride below 2^48 bytes (" + std::to_string(max_stride) + " elements of " +
                       std::string(DTypeName(view.dtype)) + "), size-1 dimensions included");
    }
  }
}

// Checks that view's element count and byte span are within kMaxViewBytes, computed without
// overflow: past that no memory can back the view and the index arithmetic of every kernel
// (int64) could overflow.
void CheckSpan(const TensorView& view, std::string_view arg) {
  std::int64_t count = 1, last = 0;
  bool fits = true;
  for (int d = 0; d < view.rank && fits; ++d) {
    std::int64_t term = 0;
    fits = !__builtin_mul_overflow(count, view.shape[d], &count) && count <= kMaxViewBytes &&
           !__builtin_mul_overflow(view.shape[d] - 1, view.strides[d], &term) &&
           !__builtin_add_overflow(last, term, &last) && last < kMaxViewBytes;
  }
  fits = fits && (last + 1) <= kMaxViewBytes / static_cast<std::int64_t>(DTypeSize(view.dtype));
  if (!fits) {
    std::string dims;
    for (int d = 0; d < view.rank; ++d) {
      dims +=
          (d ? ", " : "") + std::to_string(view.shape[d]) + "@" + std::to_string(view.strides[d]);
    }
    throw InvalidArgument(std::string(arg) + ": got sizes@strides [" + dims + "] " +
                          std::string(DTypeName(view.dtype)) +
                          ", expected at most 2^48 elements spanning at most 2^48 bytes");
  }
}

// Checks that two distinct indices of view never alias: with dimensions sorted by stride, each
// stride must exceed the span of all smaller-stride dimensions.
void CheckNoAlias(const TensorView& view, const ArgName& a) {
  std::array<int, kMaxRank> order{};
  for (int d = 0; d < view.rank; ++d) order[d] = d;
  for (int i = 1; i < view.rank; ++i) {  // insertion sort by stride (rank <= 6)
    for (int j = i; j > 0 && view.strides[order[j]] < view.strides[order[j - 1]]; --j) {
      std::swap(order[j], order[j - 1]);
    }
  }
  std::int64_t span = 0;  // max offset reachable with the dims so far
  for (int i = 0; i < view.rank; ++i) {
    const int d = order[i];
    if (view.shape[d] == 1) continue;
    if (view.strides[d] <= span) {
      FailArgument(a + ".strides[" + std::to_string(d) + "]", view.strides[d],
                   "strides that give every element its own address (output views may not alias)");
    }
    span += (view.shape[d] - 1) * view.strides[d];
  }
}

}  // namespace

void ValidateView(const TensorView& view, std::string_view arg, int expected_rank, bool writable) {
  // Every message is built only on failure: a valid call allocates nothing.
  const ArgName a{arg};
  if (view.data == nullptr) FailArgument(a + ".data", "null", "a non-null pointer");
  if (view.rank < 1 || view.rank > kMaxRank) {
    FailArgument(a + ".rank", view.rank, "a rank in [1, 6]");
  }
  if (expected_rank >= 0 && view.rank != expected_rank) {
    FailArgument(a + ".rank", view.rank, "rank " + std::to_string(expected_rank));
  }
  CheckDims(view, a);
  CheckSpan(view, arg);
  if (writable) CheckNoAlias(view, a);
}

bool Overlaps(const TensorView& a, const TensorView& b) {
  const auto sa = a.ByteSpan();
  const auto sb = b.ByteSpan();
  return sa.first < sb.second && sb.first < sa.second;
}

void RequireNoOverlap(const TensorView& out, std::string_view out_arg, const TensorView& in,
                      std::string_view in_arg, bool inplace_allowed) {
  if (!Overlaps(out, in)) return;
  const bool same = out.data == in.data && out.dtype == in.dtype && out.rank == in.rank &&
                    out.shape == in.shape && out.strides == in.strides;
  if (same && inplace_allowed) return;
  throw InvalidArgument(std::string(out_arg) + ": overlaps " + std::string(in_arg) +
                        (same ? " (the same memory); pass inplace to work in place"
                              : ", expected disjoint memory or exactly the same view in place"));
}

std::string_view LayoutName(AttentionLayout layout) {
  return layout == AttentionLayout::kBSHD ? "bshd" : "bhsd";
}

AttentionLayout ParseLayout(std::string_view text, std::string_view arg) {
  if (text == "bshd") return AttentionLayout::kBSHD;
  if (text == "bhsd") return AttentionLayout::kBHSD;
  throw InvalidArgument(
      ArgMessage(arg, std::string(text),
                 "bshd ([batch, seq, heads, head_dim]) or bhsd ([batch, heads, seq, head_dim])"));
}

AttentionDims GetAttentionDims(const TensorView& view, AttentionLayout layout,
                               std::string_view arg) {
  ValidateView(view, arg, 4);
  AttentionDims d{};
  const int seq_axis = layout == AttentionLayout::kBSHD ? 1 : 2;
  const int head_axis = layout == AttentionLayout::kBSHD ? 2 : 1;
  d.batch = view.shape[0];
  d.seq = view.shape[seq_axis];
  d.heads = view.shape[head_axis];
  d.head_dim = view.shape[3];
  d.stride_batch = view.strides[0];
  d.stride_seq = view.strides[seq_axis];
  d.stride_head = view.strides[head_axis];
  d.stride_dim = view.strides[3];
  return d;
}

}  // namespace posenc
