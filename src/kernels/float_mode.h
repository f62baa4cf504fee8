// Flush-to-zero for the fused attention's tasks (src/attention/flash_*):
// float32 results below 2^-126 become 0 (FTZ) and such inputs are read as 0
// (DAZ) while a ScopedFlushSubnormals lives, on x86-64 through MXCSR bits 15
// and 6 of the calling thread, restored when it ends (nothing changes on
// other targets). Why and the numerics: the class comment below.
#pragma once

#if defined(__x86_64__) || defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace posenc::kernels {

// On Intel CPUs an SSE/AVX operation whose result or input is subnormal
// takes a microcode assist of ~100+ cycles, and attention makes such values
// routinely: P = exp(x - max) of a far key under ALiBi is ~1e-38, so P . V,
// dS = P (dP - D) and dS . K give subnormal products. The causal ALiBi
// backward at S = 4096 (float32 products) ran 4.5x slower on a Xeon here
// than with flushing (docs/PERFORMANCE.md, "Intel Xeon: half-rate VDPBF16PS
// and subnormal assists"); AMD CPUs handle subnormals at full speed, and
// VDPBF16PS flushes by definition, so the float32 and the bfloat16-dot paths
// also get the same semantics. Numerics: each flushed term is below 2^-126,
// far under the float32 rounding of any sum it enters whose largest term is
// normal; the error bounds of include/posenc/flash_attention.h hold.
class ScopedFlushSubnormals {
 public:
  ScopedFlushSubnormals() {
#if defined(__x86_64__) || defined(__SSE__)
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ | kFtz | kDaz);
#endif
  }
  ~ScopedFlushSubnormals() {
#if defined(__x86_64__) || defined(__SSE__)
    _mm_setcsr(saved_);
#endif
  }
  ScopedFlushSubnormals(const ScopedFlushSubnormals&) = delete;
  ScopedFlushSubnormals& operator=(const ScopedFlushSubnormals&) = delete;

 private:
  static constexpr unsigned kFtz = 1u << 15;  // MXCSR flush to zero
  static constexpr unsigned kDaz = 1u << 6;   // MXCSR denormals are zero
  unsigned saved_ = 0;

  friend bool FlushingSubnormalResults();
};

// True when float32 results below 2^-126 become 0 on this thread (MXCSR FTZ,
// as inside a ScopedFlushSubnormals); always false off x86. A kernel that
// must treat a subnormal result specially can skip the check under it.
inline bool FlushingSubnormalResults() {
#if defined(__x86_64__) || defined(__SSE__)
  return (_mm_getcsr() & ScopedFlushSubnormals::kFtz) != 0;
#else
  return false;
#endif
}

}  // namespace posenc::kernels
