// x86 matrix features and the Linux AMX permission request
// (kernels/simd/x86_features.h).
#include "kernels/simd/x86_features.h"

#include <cerrno>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace posenc::kernels::simd {
namespace {

#if defined(__x86_64__)
constexpr long kArchGetXcompPerm = 0x1022;  // arch/x86/include/uapi/asm/prctl.h
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;  // XFEATURE_XTILEDATA

bool CpuHasAmx() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, a, b, c, d);
  return (d & (1u << 24)) != 0 && (d & (1u << 22)) != 0;  // AMX-TILE, AMX-BF16
}

struct AmxState {
  bool ok = false;
  std::string status;
};

AmxState RequestAmx() {
  AmxState s;
  if (!CpuHasAmx()) {
    s.status = "the CPU has no AMX-TILE/AMX-BF16 (CPUID leaf 7 EDX bits 24, 22)";
    return s;
  }
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    s.status =
        std::string("arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) failed: ") + std::strerror(errno);
    return s;
  }
  unsigned long long mask = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &mask) != 0 ||
      (mask & (1ull << kXfeatureXtiledata)) == 0) {
    s.status = "arch_prctl(ARCH_GET_XCOMP_PERM) does not list XTILEDATA after the request";
    return s;
  }
  s.ok = true;
  s.status = "available";
  return s;
}

const AmxState& Amx() {
  static const AmxState state = RequestAmx();
  return state;
}
#endif

}  // namespace

bool CpuBf16DotSlow() {
#if defined(__x86_64__)
  static const bool slow = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_max(0, nullptr) < 7) return false;
    __cpuid(0, a, b, c, d);
    const bool intel = b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;  // GenuineIntel
    __cpuid_count(7, 0, a, b, c, d);
    return intel && (d & (1u << 23)) != 0;  // AVX512_FP16
  }();
  return slow;
#else
  return false;
#endif
}

bool CpuHasAvx512Bf16() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

bool AmxAvailable() {
#if defined(__x86_64__)
  return Amx().ok;
#else
  return false;
#endif
}

std::string AmxStatus() {
#if defined(__x86_64__)
  return Amx().status;
#else
  return "not an x86-64 build";
#endif
}

}  // namespace posenc::kernels::simd
