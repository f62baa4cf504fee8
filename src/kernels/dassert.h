// POSENC_DASSERT(condition): a kernel's precondition, checked in builds
// without NDEBUG (the Debug presets: asan, tsan) and compiled out of release
// builds. Kernels do not validate their arguments (the public entry points
// do); this catches a caller inside the library breaking a kernel's
// documented rule (a row length that is not a multiple of kFlashPad, a
// stride shorter than a row) before it reads or writes out of bounds. A
// failure prints the condition and its place and aborts: it is a bug in
// posenc, never a user's bad input.
#pragma once

#ifndef NDEBUG
#include <cstdio>
#include <cstdlib>

namespace posenc::kernels {
[[noreturn]] inline void DassertFailed(const char* condition, const char* file, int line) {
  std::fprintf(stderr, "posenc: kernel precondition failed: %s (%s:%d)\n", condition, file, line);
  std::abort();
}
}  // namespace posenc::kernels

#define POSENC_DASSERT(condition)                                                       \
  do {                                                                                  \
    if (!(condition)) ::posenc::kernels::DassertFailed(#condition, __FILE__, __LINE__); \
  } while (0)
#else
#define POSENC_DASSERT(condition) \
  do {                            \
  } while (0)
#endif
