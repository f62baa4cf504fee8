// Shared by the libFuzzer targets in fuzz/ (docs/RELIABILITY.md).
//  - FUZZ_CHECK(cond, msg): a property violation is a crash the fuzzer
//    records (message on stderr, then abort), like a sanitizer report;
//  - GuardedArena: a fixed buffer with PROT_NONE pages on both sides, so a
//    kernel that reads or writes past either end faults at once (ASan
//    reports the SEGV with a stack), not only within a heap redzone;
//  - ByteSnapshot: detects writes outside the elements of an output view.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "posenc/dtype.h"
#include "posenc/tensor.h"

#define FUZZ_CHECK(cond, msg)                                                                  \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   msg);                                                                       \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)

namespace posenc::fuzz {

class GuardedArena {
 public:
  // `bytes` usable bytes (a multiple of 64) between two guard regions of
  // `guard` bytes each; the usable part ends exactly at the second guard.
  explicit GuardedArena(std::size_t bytes, std::size_t guard = std::size_t{16} << 20)
      : bytes_(bytes), guard_(guard) {
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t body = (bytes + page - 1) / page * page;
    total_ = guard_ + body + guard_;
    void* p =
        ::mmap(nullptr, total_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    FUZZ_CHECK(p != MAP_FAILED, "mmap of the arena");
    base_ = static_cast<std::byte*>(p);
    FUZZ_CHECK(::mprotect(base_ + guard_, body, PROT_READ | PROT_WRITE) == 0, "mprotect");
    data_ = base_ + guard_ + body - bytes_;
  }
  ~GuardedArena() { ::munmap(base_, total_); }
  GuardedArena(const GuardedArena&) = delete;
  GuardedArena& operator=(const GuardedArena&) = delete;

  std::byte* data() const { return data_; }
  std::size_t size() const { return bytes_; }

 private:
  std::size_t bytes_, guard_, total_ = 0;
  std::byte* base_ = nullptr;
  std::byte* data_ = nullptr;
};

// Element offsets of a view are [0, last]; true when every byte of every
// element lies in [lo, hi) of the arena (exact 128-bit arithmetic, so a view
// whose offsets overflow int64 is simply "outside").
inline bool ViewInside(const TensorView& v, const std::byte* lo, const std::byte* hi) {
  if (v.rank < 1 || v.rank > kMaxRank || v.data == nullptr) return false;
  __int128 last = 0;
  for (int d = 0; d < v.rank; ++d) {
    if (v.shape[d] < 1 || v.strides[d] < 0) return false;
    const __int128 term = static_cast<__int128>(v.shape[d] - 1) * v.strides[d];  // < 2^126
    if (term > (static_cast<__int128>(1) << 62)) return false;  // far beyond any arena
    last += term;
  }
  const auto* p = static_cast<const std::byte*>(v.data);
  if (p < lo || p > hi) return false;
  const __int128 end = (last + 1) * static_cast<__int128>(DTypeSize(v.dtype));
  return end <= static_cast<__int128>(hi - p);
}

// Number of elements, saturated at 2^62 (so that a product of two counts
// still fits in __int128).
inline __int128 ElementCount(const TensorView& v) {
  constexpr __int128 kCap = static_cast<__int128>(1) << 62;
  __int128 n = 1;
  for (int d = 0; d < v.rank && d < kMaxRank; ++d) {
    n *= v.shape[d] < 1 ? 1 : v.shape[d];  // <= 2^62 * 2^63
    if (n > kCap) return kCap;
  }
  return n;
}

// Marks the bytes of every element of `v` (which lies inside the arena).
inline void MarkElements(const TensorView& v, const std::byte* arena,
                         std::vector<std::uint8_t>& mark) {
  const std::size_t es = DTypeSize(v.dtype);
  std::int64_t idx[kMaxRank] = {};
  const auto* base = static_cast<const std::byte*>(v.data);
  for (;;) {
    std::int64_t off = 0;
    for (int d = 0; d < v.rank; ++d) off += idx[d] * v.strides[d];
    const std::size_t at =
        static_cast<std::size_t>(base - arena) + static_cast<std::size_t>(off) * es;
    for (std::size_t b = 0; b < es; ++b) mark[at + b] = 1;
    int d = v.rank - 1;
    while (d >= 0 && ++idx[d] == v.shape[d]) idx[d--] = 0;
    if (d < 0) return;
  }
}

// Copy of the arena before a call; Check() fails if a byte outside the
// marked output elements changed.
class ByteSnapshot {
 public:
  explicit ByteSnapshot(const GuardedArena& arena)
      : arena_(arena),
        before_(arena.data(), arena.data() + arena.size()),
        writable_(arena.size(), 0) {}
  void AllowWrites(const TensorView& out) { MarkElements(out, arena_.data(), writable_); }
  void Check(const char* what) const {
    if (std::memcmp(arena_.data(), before_.data(), before_.size()) == 0) return;
    for (std::size_t i = 0; i < before_.size(); ++i) {
      if (writable_[i] == 0 && arena_.data()[i] != before_[i]) {
        std::fprintf(stderr, "%s wrote byte %zu of the arena, outside every output element\n", what,
                     i);
        std::abort();
      }
    }
  }

 private:
  const GuardedArena& arena_;
  std::vector<std::byte> before_;
  std::vector<std::uint8_t> writable_;
};

}  // namespace posenc::fuzz
