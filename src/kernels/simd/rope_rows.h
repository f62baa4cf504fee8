// A run of RoPE rows and the software prefetch of the row loops that rotate
// them (RotateRows in rope-inl.h, RotateRowsBf16Avx512). No vector types.
//
// Why software prefetch, and why it continues into the next run: a task
// rotates one head's rows of its token tile (a contiguous run of 64-128 KiB
// in the bhsd layout), then the next head's. On the machines measured
// (2-core Zen 5 VMs) the hardware prefetcher alone reaches ~0.45-0.75 of
// the read-modify-write bandwidth; prefetching kRopePrefetchBytes ahead within a
// run lifts that to ~0.75-0.88, and prefetching the next run's first rows
// while finishing the current one removes the stall at every run start
// (docs/PERFORMANCE.md, "RoPE in place").
#pragma once

#include <algorithm>
#include <cstdint>

namespace posenc::kernels::simd {

// Row i of the run is read at in + i * in_step and written at
// out + i * out_step (bytes; out == in when in place). n = 0: no run.
struct RopeRowRun {
  const char* in = nullptr;
  std::int64_t in_step = 0;
  char* out = nullptr;
  std::int64_t out_step = 0;
  std::int64_t n = 0;
};

// How far ahead of the row being rotated its loop prefetches, in bytes of
// rows (32 float32 rows of head_dim 128, 64 rows of 16-bit storage).
inline constexpr std::int64_t kRopePrefetchBytes = 8192;

// Rows ahead for rows of row_bytes (at least 2).
inline std::int64_t RopePrefetchRows(std::int64_t row_bytes) {
  return std::max<std::int64_t>(2, kRopePrefetchBytes / row_bytes);
}

// Both helpers are always inlined: as out-of-line functions GCC 12 finds
// them free of side effects (a prefetch has none) and deletes the calls.
#define POSENC_ROPE_PREFETCH_INLINE inline __attribute__((always_inline))

// Prefetches row j of `run` for reading (and, out of place, for writing).
POSENC_ROPE_PREFETCH_INLINE void PrefetchRopeRunRow(const RopeRowRun& run, std::int64_t j,
                                                    std::int64_t row_bytes) {
  const char* src = run.in + j * run.in_step;
  for (std::int64_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(src + off, 0, 3);
  if (run.out != run.in) {
    char* dst = run.out + j * run.out_step;
    for (std::int64_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(dst + off, 1, 3);
  }
}

// Before rotating row i of `run`: prefetches row i + ahead, which is row
// i + ahead - run.n of `next` once past the end of `run` (nothing past the
// end of `next`).
POSENC_ROPE_PREFETCH_INLINE void PrefetchRopeRow(const RopeRowRun& run, const RopeRowRun& next,
                                                 std::int64_t i, std::int64_t ahead,
                                                 std::int64_t row_bytes) {
  const std::int64_t j = i + ahead;
  if (j < run.n) {
    PrefetchRopeRunRow(run, j, row_bytes);
  } else if (j - run.n < next.n) {
    PrefetchRopeRunRow(next, j - run.n, row_bytes);
  }
}

}  // namespace posenc::kernels::simd

#undef POSENC_ROPE_PREFETCH_INLINE
