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

}  // namespace posenc::kernels
