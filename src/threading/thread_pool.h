// Internal: a small fixed-size thread pool behind posenc::Context.
//
// Written by hand because Debian's Highway 1.0.3 has no
// hwy/contrib/thread_pool and the rest of the stack (fmt, CLI11, json) has
// none either: a job is a task range handed out through one atomic counter.
// Waiting: a thread woken from a condition variable runs only after a
// scheduler delay (long on a VM), paid twice per job (the workers' wake,
// then the caller's). So workers poll for the next job, and Run's caller
// for the workers to finish, for up to `spin` before they block: as long
// as a wake costs, which at most doubles an idle wait (the ski-rental
// bound). Polls pause, yield the core every 16 and end after `spin`, so
// an idle pool costs each worker at most `spin` of CPU per job (libgomp's
// default spins far longer). docs/PERFORMANCE.md, "posenc's pool: a
// bounded spin before sleeping".
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace posenc {

// Context's default `spin` (POSENC_POOL_SPIN_US overrides it, context.h).
inline constexpr std::chrono::microseconds kDefaultPoolSpin{50};

class ThreadPool {
 public:
  // Starts num_threads - 1 workers; the caller of Run is worker 0. spin: how
  // long a worker polls for the next job, and a caller of Run for the
  // workers to finish, before blocking (0: block at once).
  ThreadPool(int num_threads, std::chrono::microseconds spin);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs every task once. Concurrent callers are serialised (run_mu_); a
  // call from inside one of this pool's tasks runs inline on that worker.
  void Run(std::int64_t num_tasks, const std::function<void(std::int64_t, int)>& fn);
  // Runs fn(worker) once on every thread of the pool (the caller as worker
  // 0): one task per thread, held until all have started. From inside one
  // of this pool's tasks (its other threads are busy): the caller only.
  void RunOnEachThread(const std::function<void(int)>& fn);

 private:
  void WorkerLoop(int worker);
  void Drain(int worker);

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::mutex run_mu_;  // one Run at a time
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::chrono::microseconds spin_;
  // Written under mu_ (the sleepers' predicates), read by the pollers too.
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> busy_{0};
  const std::function<void(std::int64_t, int)>* fn_ = nullptr;
  std::int64_t num_tasks_ = 0;
  std::atomic<std::int64_t> next_{0};
  std::exception_ptr error_;
};

}  // namespace posenc
