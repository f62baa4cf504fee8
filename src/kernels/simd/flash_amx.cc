// AMX bfloat16 logits of the fused attention (kernels/simd/flash.h,
// FlashTileLogitsAmx) with TDPBF16PS (Intel SDM, "Intel AMX"): a 16 x 32
// bfloat16 A tile times a 16 x (16 x 2) bfloat16 B tile in VNNI pair layout,
// added into a 16 x 16 float32 C tile. Hand-written intrinsics (Highway 1.0.3
// has no AMX); compiled for amx-tile + amx-bf16 and called only when
// AmxAvailable() (kernels/simd/x86_features.h: CPUID and the Linux
// permission request). Tile layouts and blocking: above AmxRows16.
// Numerics: products of bfloat16 values are exact; TDPBF16PS accumulates in
// float32 (round to nearest even, denormal inputs and outputs flushed to
// zero), so results equal the float32 kernel's within the float32 rounding
// of reordered sums, like VDPBF16PS.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/simd/amx_tiles.h"
#include "kernels/simd/flash.h"
#include "kernels/thread_scratch.h"

namespace posenc::kernels::simd {

#if defined(__x86_64__)
namespace {

// Zero-padded 16-row copies of the tail rows of q and of their logits.
struct AmxTail {
  std::vector<std::uint32_t> q;
  std::vector<float> s;
};

// 16 query rows (q rows at stride ldq pairs) against ld keys, dim = 32 * k.
// Each TDPBF16PS does 8192 multiply-adds. The packed operands of the
// AVX512_BF16 kernel already have AMX's layouts: q_pairs rows are A rows
// (16 pairs = 64 bytes per tile row, row stride ldq * 4 bytes) and kt_pairs
// [dim / 2, ld, 2] rows are B rows (16 keys x 2 = 64 bytes, stride ld * 4
// bytes), so no repacking is needed. Blocking: 32 keys at a time in two C
// tiles (tmm0, tmm1) sharing one A tile (tmm4) per 16 pairs, B tiles tmm6 /
// tmm7.
__attribute__((target("amx-tile,amx-bf16"))) void AmxRows16(const std::uint32_t* q,
                                                            std::int64_t ldq,
                                                            const std::uint16_t* kt,
                                                            std::int64_t pairs, std::int64_t ld,
                                                            float* s) {
  const long a_stride = static_cast<long>(ldq * 4), b_stride = static_cast<long>(ld * 4);
  const long c_stride = static_cast<long>(ld * 4);
  std::int64_t j = 0;
  for (; j + 32 <= ld; j += 32) {
    _tile_zero(0);
    _tile_zero(1);
    for (std::int64_t p = 0; p < pairs; p += 16) {
      _tile_loadd(4, q + p, a_stride);
      _tile_loadd(6, kt + (p * ld + j) * 2, b_stride);
      _tile_loadd(7, kt + (p * ld + j + 16) * 2, b_stride);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
    }
    _tile_stored(0, s + j, c_stride);
    _tile_stored(1, s + j + 16, c_stride);
  }
  for (; j < ld; j += 16) {
    _tile_zero(0);
    for (std::int64_t p = 0; p < pairs; p += 16) {
      _tile_loadd(4, q + p, a_stride);
      _tile_loadd(6, kt + (p * ld + j) * 2, b_stride);
      _tile_dpbf16ps(0, 4, 6);
    }
    _tile_stored(0, s + j, c_stride);
  }
}

__attribute__((target("amx-tile"))) void ReleaseTiles() { _tile_release(); }

}  // namespace

// AmxRows16 per 16 query rows; a tail of fewer than 16 query rows goes
// through a zero-padded 16-row copy (AmxTail).
void FlashTileLogitsAmx(const std::uint32_t* q_pairs, std::int64_t ldq,
                        const std::uint16_t* kt_pairs, std::int64_t nq, std::int64_t dim,
                        std::int64_t ld, float* s) {
  const std::int64_t pairs = dim / 2;
  LoadAmxTileConfig();
  std::int64_t i = 0;
  for (; i + 16 <= nq; i += 16) AmxRows16(q_pairs + i * ldq, ldq, kt_pairs, pairs, ld, s + i * ld);
  if (i < nq) {  // tail rows through zero-padded 16-row copies
    ThreadBuffers<AmxTail> lease;
    std::vector<std::uint32_t>& qt = lease.get().q;
    std::vector<float>& st = lease.get().s;
    qt.assign(static_cast<std::size_t>(16 * pairs), 0u);
    st.resize(static_cast<std::size_t>(16 * ld));
    for (std::int64_t r = 0; r < nq - i; ++r) {
      std::memcpy(qt.data() + r * pairs, q_pairs + (i + r) * ldq,
                  static_cast<std::size_t>(pairs) * 4);
    }
    AmxRows16(qt.data(), pairs, kt_pairs, pairs, ld, st.data());
    std::memcpy(s + i * ld, st.data(), static_cast<std::size_t>((nq - i) * ld) * 4);
  }
  ReleaseTiles();
}
#else
void FlashTileLogitsAmx(const std::uint32_t*, std::int64_t, const std::uint16_t*, std::int64_t,
                        std::int64_t, std::int64_t, float*) {}
#endif

}  // namespace posenc::kernels::simd
