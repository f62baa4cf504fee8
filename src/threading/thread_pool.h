// Internal: a small fixed-size thread pool behind posenc::Context.
//
// Written by hand because Debian's Highway 1.0.3 has no
// hwy/contrib/thread_pool and the rest of the stack (fmt, CLI11, json) has
// none either; it is ~100 lines: workers sleep on a condition variable, a
// job is a task range handed out through one atomic counter.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace posenc {

class ThreadPool {
 public:
  // Starts num_threads - 1 workers; the caller of Run is worker 0.
  explicit ThreadPool(int num_threads);
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
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  int busy_ = 0;
  const std::function<void(std::int64_t, int)>* fn_ = nullptr;
  std::int64_t num_tasks_ = 0;
  std::atomic<std::int64_t> next_{0};
  std::exception_ptr error_;
};

}  // namespace posenc
