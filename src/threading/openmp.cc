// Workers::kOpenMP (threading/openmp.h). Written with plain `omp parallel`
// and one atomic task counter rather than `omp for schedule(dynamic)`: the
// same hand-out as the pool (thread_pool.cc), so tasks run in the same
// order of claims and exceptions are caught per task (none may leave a
// parallel region).
#include "threading/openmp.h"

#include <atomic>
#include <exception>
#include <mutex>
#include <string>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "posenc/error.h"

namespace posenc::openmp {

#ifdef _OPENMP

bool Built() { return true; }

void Run(int num_threads, std::int64_t num_tasks,
         const std::function<void(std::int64_t, int)>& fn) {
  if (omp_in_parallel() != 0) {  // nested: the host's region or a posenc task
    for (std::int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  std::atomic<std::int64_t> next{0};
  std::mutex mu;
  std::exception_ptr error;
#pragma omp parallel num_threads(num_threads)
  {
    const int worker = omp_get_thread_num();
    for (;;) {
      const std::int64_t task = next.fetch_add(1, std::memory_order_relaxed);
      if (task >= num_tasks) break;
      try {
        fn(task, worker);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

void RunOnEachThread(int num_threads, const std::function<void(int)>& fn) {
  if (omp_in_parallel() != 0) {
    fn(0);
    return;
  }
  std::mutex mu;
  std::exception_ptr error;
#pragma omp parallel num_threads(num_threads)
  {
    try {
      fn(omp_get_thread_num());
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

#else  // no OpenMP: Context refuses Workers::kOpenMP before these are reached

bool Built() { return false; }

void Run(int, std::int64_t, const std::function<void(std::int64_t, int)>&) { RequireBuilt(); }

void RunOnEachThread(int, const std::function<void(int)>&) { RequireBuilt(); }

#endif

void RequireBuilt() {
  if (!Built()) {
    throw InvalidArgument(ArgMessage("workers", std::string("openmp"),
                                     "'pool' (this build of posenc has no OpenMP)"));
  }
}

}  // namespace posenc::openmp
