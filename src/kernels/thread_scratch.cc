// Internal: the registry of per-thread scratch (thread_scratch.h).
#include "kernels/thread_scratch.h"

#include <algorithm>
#include <array>
#include <atomic>

namespace posenc::kernels {
namespace {

constexpr int kMaxHooks = 32;
std::array<ScratchRelease, kMaxHooks> g_hooks{};  // constant-initialised
std::atomic<int> g_count{0};

}  // namespace

ScratchHook::ScratchHook(ScratchRelease release) {
  const int i = g_count.fetch_add(1);
  // Past the array a hook is dropped (its scratch then lives until thread
  // exit); tests/unit/threading_test.cc fails first (NumScratchHooks).
  if (i < kMaxHooks) g_hooks[static_cast<std::size_t>(i)] = release;
}

int NumScratchHooks() { return g_count.load(); }
int MaxScratchHooks() { return kMaxHooks; }

void ReleaseScratchOfThisThread() {
  const int n = std::min(g_count.load(), kMaxHooks);
  for (int i = 0; i < n; ++i) g_hooks[static_cast<std::size_t>(i)]();
}

}  // namespace posenc::kernels
