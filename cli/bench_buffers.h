// The storage of `posenc bench`'s buffers: std::vector with page-aligned
// (4 KiB) storage. A benchmark must see its buffers as real callers hand them
// over: torch allocates tensors 64-byte aligned, ggml and serving engines
// their KV caches page-aligned. glibc's malloc places a large block 16 bytes
// past a page boundary, so with plain std::vector every 64-byte vector load
// straddled two cache lines, which slows the read ceiling and makes every
// fraction of bandwidth look better than it is (docs/PERFORMANCE.md,
// "Design figures").
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

namespace posenc::cli {

template <typename T>
struct PageAligned {
  using value_type = T;
  static constexpr std::size_t kAlign = 4096;
  PageAligned() = default;
  template <typename U>
  PageAligned(const PageAligned<U>&) {}  // NOLINT: rebinding, as std::allocator
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T) - kAlign) throw std::bad_alloc();
    const std::size_t bytes = (n * sizeof(T) + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, bytes);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }
  template <typename U>
  bool operator==(const PageAligned<U>&) const {
    return true;
  }
};

template <typename T>
using BenchVector = std::vector<T, PageAligned<T>>;

}  // namespace posenc::cli
