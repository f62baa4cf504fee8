// posenc::ReleaseThreadScratch (include/posenc/context.h): runs the release
// hooks of the per-thread scratch (kernels/thread_scratch.h) on the calling
// thread and on each thread of the context.
#include "kernels/thread_scratch.h"
#include "posenc/context.h"

namespace posenc {

void ReleaseThreadScratch(const Context& ctx) {
  kernels::ReleaseScratchOfThisThread();
  ctx.RunOnEachThread([](int worker) {
    if (worker != 0) kernels::ReleaseScratchOfThisThread();  // worker 0: the caller, done
  });
}

}  // namespace posenc
