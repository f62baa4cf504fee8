// posenc/tensor.h: non-owning strided tensor views and attention layouts.
//
// A TensorView is a data pointer, an element type, a shape and strides in
// elements (not bytes), rank 1..kMaxRank. The library never owns the memory
// behind a view. Views are validated at the API boundary (ValidateView):
// non-null data, positive sizes, non-negative strides, and (for outputs) no
// two elements at the same address. Overlap between an output and an input is
// an error unless the function is asked to work in place and the two views
// are the same view.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "posenc/dtype.h"

namespace posenc {

inline constexpr int kMaxRank = 6;

// Largest element count and byte span (last element's offset + 1, times the
// dtype size) of a valid view: 2^48, beyond any address space a process has,
// so that sizes and offsets of validated views never overflow int64. Every
// stride is below 2^48 bytes too, so stride x dtype size never overflows.
inline constexpr std::int64_t kMaxViewBytes = std::int64_t{1} << 48;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  int rank = 0;
  std::array<std::int64_t, kMaxRank> shape{};
  std::array<std::int64_t, kMaxRank> strides{};  // in elements

  // Contiguous row-major view.
  static TensorView Contiguous(void* data, DType dtype, std::initializer_list<std::int64_t> shape);
  static TensorView Contiguous(const void* data, DType dtype,
                               std::initializer_list<std::int64_t> shape) {
    return Contiguous(const_cast<void*>(data), dtype, shape);
  }
  // Strided view; shape and strides must have the same length.
  static TensorView Strided(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                            std::initializer_list<std::int64_t> strides);

  std::int64_t NumElements() const;
  bool IsContiguous() const;
  // Byte range [first, last) spanned by the view (for overlap checks).
  std::pair<std::uintptr_t, std::uintptr_t> ByteSpan() const;
  // "[2, 3, 4] float32"
  std::string Describe() const;

  template <typename T>
  T* As() const {
    return static_cast<T*>(data);
  }
};

// Throws InvalidArgument naming `arg` if the view is malformed: null data,
// rank outside [1, kMaxRank] or != expected_rank (when >= 0), a size < 1, a
// negative stride, a stride of kMaxViewBytes bytes or more (also on a size-1
// dimension), more than kMaxViewBytes elements or bytes spanned, or
// (when `writable`) a zero stride on a dimension of size > 1 (two elements
// at one address).
void ValidateView(const TensorView& view, std::string_view arg, int expected_rank = -1,
                  bool writable = false);

// True when the byte spans of the two views intersect.
bool Overlaps(const TensorView& a, const TensorView& b);

// Throws InvalidArgument unless `out` and `in` are either disjoint or (when
// `inplace_allowed`) exactly the same view.
void RequireNoOverlap(const TensorView& out, std::string_view out_arg, const TensorView& in,
                      std::string_view in_arg, bool inplace_allowed);

// Names of the two attention layouts of a rank-4 q/k/v tensor.
enum class AttentionLayout : std::uint8_t {
  kBSHD,  // [batch, seq, heads, head_dim] (FlashAttention, HF before transpose)
  kBHSD,  // [batch, heads, seq, head_dim] (HF attention modules, PyTorch SDPA)
};

std::string_view LayoutName(AttentionLayout layout);  // "bshd" / "bhsd"
AttentionLayout ParseLayout(std::string_view text, std::string_view arg = "layout");

// Sizes and element strides of a rank-4 attention tensor, whatever its layout.
struct AttentionDims {
  std::int64_t batch, seq, heads, head_dim;
  std::int64_t stride_batch, stride_seq, stride_head, stride_dim;
};

// Validates a rank-4 view in `layout` and returns its dims.
AttentionDims GetAttentionDims(const TensorView& view, AttentionLayout layout,
                               std::string_view arg);

}  // namespace posenc
