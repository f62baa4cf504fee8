// Internal: the scratch the library keeps per thread between calls, so that
// the calls an engine makes per token allocate nothing in the steady state
// (include/posenc/c.h, "Memory"; docs/INTERNALS.md, "Memory per call").
// Every module with such thread_local storage registers a hook that frees
// the calling thread's part; posenc::ReleaseThreadScratch (context.h) runs
// the hooks on the calling thread and on each worker of a Context.
//
// Registration happens during static initialisation, into a fixed array (no
// allocation, no initialisation-order dependence: the array is constant-
// initialised). A hook must leave its storage valid and empty.
#pragma once

namespace posenc::kernels {

using ScratchRelease = void (*)();

// Registers `release` (at namespace scope: `const ScratchHook hook(&F);`).
struct ScratchHook {
  explicit ScratchHook(ScratchRelease release);
};

// Runs every registered hook on the calling thread.
void ReleaseScratchOfThisThread();

int NumScratchHooks();  // registered so far (tests: below MaxScratchHooks)
int MaxScratchHooks();

// The calling thread's buffers of one module (Buffers: a struct of vectors),
// kept from call to call with their capacity: the one mechanism for
// per-thread buffers (flash forward, backward and decode, Shaw's rows, the
// AMX tail tiles). A training loop calls the kernels with the same shapes every step, and fresh
// buffers cost a first touch of every page on each call wherever the allocator hands freed pages
// back to the system (jemalloc preloaded into torch, for one), which at small
// shapes costs more than the attention itself (docs/PERFORMANCE.md, "Buffers
// kept between calls"). The module lends the Buffers for one
// call; a nested call on the same thread (none today) gets fresh ones instead
// of clobbering them. Callers must not keep pointers into them after the call.
// posenc::ReleaseThreadScratch frees a thread's Buffers between calls (kHook).
template <typename Buffers>
class ThreadBuffers {
 public:
  ThreadBuffers() : cached_(!Slot().busy) {
    static_cast<void>(&kHook);  // instantiates the hook of this Buffers type
    if (cached_) Slot().busy = true;
  }
  ~ThreadBuffers() {
    if (cached_) Slot().busy = false;
  }
  ThreadBuffers(const ThreadBuffers&) = delete;
  ThreadBuffers& operator=(const ThreadBuffers&) = delete;
  Buffers& get() { return cached_ ? Slot().buffers : local_; }

 private:
  struct Cached {
    Buffers buffers;
    bool busy = false;
  };
  static Cached& Slot() {
    thread_local Cached cached;
    return cached;
  }
  static void Release() {
    if (!Slot().busy) Slot().buffers = Buffers{};
  }
  inline static const ScratchHook kHook{&Release};
  bool cached_;
  Buffers local_;
};

}  // namespace posenc::kernels
