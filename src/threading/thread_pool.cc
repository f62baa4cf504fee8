#include "threading/thread_pool.h"

#include <cstdlib>

#include <string>

#include "posenc/context.h"
#include "posenc/error.h"
#include "threading/openmp.h"

namespace posenc {

namespace {
// The pool whose task the current thread is running (null outside tasks):
// a ParallelFor from inside a task of the same pool runs inline.
thread_local const ThreadPool* t_running_pool = nullptr;

// Polls done() until it holds (true) or `budget` has passed (done()'s last
// value): a pause between polls, a yield of the core every 16.
template <typename Done>
bool SpinUntil(std::chrono::microseconds budget, Done done) {
  if (budget.count() <= 0) return done();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1;; ++i) {
    if (done()) return true;
    if (i % 16 != 0) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    if (std::chrono::steady_clock::now() - start >= budget) return done();
    std::this_thread::yield();
  }
}

class RunningScope {
 public:
  explicit RunningScope(const ThreadPool* pool) : previous_(t_running_pool) {
    t_running_pool = pool;
  }
  ~RunningScope() { t_running_pool = previous_; }
  RunningScope(const RunningScope&) = delete;
  RunningScope& operator=(const RunningScope&) = delete;

 private:
  const ThreadPool* previous_;
};
}  // namespace

ThreadPool::ThreadPool(int num_threads, std::chrono::microseconds spin) : spin_(spin) {
  for (int w = 1; w < num_threads; ++w) {
    threads_.emplace_back([this, w] { WorkerLoop(w); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::Drain(int worker) {
  const RunningScope scope(this);
  for (;;) {
    const std::int64_t task = next_.fetch_add(1, std::memory_order_relaxed);
    if (task >= num_tasks_) return;
    try {
      (*fn_)(task, worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void ThreadPool::WorkerLoop(int worker) {
  std::uint64_t seen = 0;
  for (;;) {
    // A new generation is published (release, after the job's fields)
    // under mu_; seeing it by polling (acquire) makes the job visible too.
    const auto job_or_stop = [&] {
      return stop_.load(std::memory_order_acquire) ||
             generation_.load(std::memory_order_acquire) != seen;
    };
    if (!SpinUntil(spin_, job_or_stop)) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, job_or_stop);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    Drain(worker);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_.notify_one();
    }
  }
}

void ThreadPool::Run(std::int64_t num_tasks, const std::function<void(std::int64_t, int)>& fn) {
  if (num_tasks <= 0) return;
  if (t_running_pool == this) {
    // Nested: a task of this pool asked it for more work. Its workers are
    // busy with the outer job (waiting for them would deadlock), so the
    // calling worker runs the inner tasks itself, as worker 0 of that call.
    for (std::int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  // Concurrent callers on one pool (threads sharing a Context) take turns:
  // each job gets every worker, one job at a time.
  std::lock_guard<std::mutex> run_lock(run_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    num_tasks_ = num_tasks;
    next_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    busy_.store(static_cast<int>(threads_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  Drain(0);
  SpinUntil(spin_, [&] { return busy_.load(std::memory_order_acquire) == 0; });
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return busy_.load(std::memory_order_relaxed) == 0; });
    error = error_;
    fn_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::RunOnEachThread(const std::function<void(int)>& fn) {
  if (t_running_pool == this) {
    fn(0);
    return;
  }
  const int n = static_cast<int>(threads_.size()) + 1;
  std::atomic<int> started{0};
  Run(n, [&](std::int64_t, int worker) {
    // A thread that holds a task takes no other: with every thread waiting
    // here until all n tasks are taken, each thread runs exactly one.
    started.fetch_add(1, std::memory_order_acq_rel);
    while (started.load(std::memory_order_acquire) < n) std::this_thread::yield();
    fn(worker);
  });
}

// ---- Context ---------------------------------------------------------------

std::string_view BackendName(Backend backend) {
  switch (backend) {
    case Backend::kAuto:
      return "auto";
    case Backend::kScalar:
      return "scalar";
    case Backend::kSimd:
      return "simd";
  }
  return "?";
}

Backend ParseBackend(std::string_view text, std::string_view arg) {
  if (text == "auto") return Backend::kAuto;
  if (text == "scalar") return Backend::kScalar;
  if (text == "simd") return Backend::kSimd;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "one of auto, scalar, simd"));
}

std::string_view WorkersName(Workers workers) {
  return workers == Workers::kOpenMP ? "openmp" : "pool";
}

Workers ParseWorkers(std::string_view text, std::string_view arg) {
  if (text == "pool") return Workers::kPool;
  if (text == "openmp") return Workers::kOpenMP;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "one of pool, openmp"));
}

bool OpenMPAvailable() { return openmp::Built(); }

namespace {
// POSENC_POOL_SPIN_US (context.h): microseconds in [0, 100000], or unset or
// empty for kDefaultPoolSpin.
std::chrono::microseconds PoolSpinFromEnvironment() {
  const char* env = std::getenv("POSENC_POOL_SPIN_US");
  if (env == nullptr || *env == '\0') return kDefaultPoolSpin;
  const std::string text(env);
  const bool digits = text.size() <= 6 && text.find_first_not_of("0123456789") == std::string::npos;
  const long us = digits ? std::stol(text) : -1;
  Require(us >= 0 && us <= 100000, "POSENC_POOL_SPIN_US", text,
          "a whole number of microseconds in [0, 100000] (unset: " +
              std::to_string(kDefaultPoolSpin.count()) + ")");
  return std::chrono::microseconds(us);
}
}  // namespace

Context::Context(int num_threads, Backend backend, Workers workers)
    : backend_(backend), workers_(workers) {
  Require(num_threads >= 0 && num_threads <= 1024, "num_threads", num_threads,
          "0 (one per hardware thread) or a count in [1, 1024]");
  Require(workers == Workers::kPool || workers == Workers::kOpenMP, "workers",
          static_cast<int>(workers), "Workers::kPool or Workers::kOpenMP");
  if (workers == Workers::kOpenMP) openmp::RequireBuilt();
  if (backend_ == Backend::kAuto) {
    // A whole program on one backend without a code change (context.h).
    if (const char* env = std::getenv("POSENC_BACKEND"); env != nullptr && *env != '\0') {
      backend_ = ParseBackend(env, "POSENC_BACKEND");
    }
  }
  if (num_threads == 0) {
    num_threads = static_cast<int>(std::thread::hardware_concurrency());
    if (num_threads < 1) num_threads = 1;
  }
  num_threads_ = num_threads;
  const std::chrono::microseconds spin = PoolSpinFromEnvironment();  // checked for every Context
  if (num_threads_ > 1 && workers_ == Workers::kPool) {
    pool_ = std::make_unique<ThreadPool>(num_threads_, spin);
  }
}

Context::~Context() = default;
Context::Context(Context&&) noexcept = default;
Context& Context::operator=(Context&&) noexcept = default;

void Context::RunOnEachThread(const std::function<void(int worker)>& fn) const {
  if (num_threads_ > 1 && workers_ == Workers::kOpenMP) {
    openmp::RunOnEachThread(num_threads_, fn);
    return;
  }
  if (!pool_) {
    fn(0);
    return;
  }
  pool_->RunOnEachThread(fn);
}

void Context::ParallelFor(std::int64_t num_tasks,
                          const std::function<void(std::int64_t task, int worker)>& fn) const {
  if (num_tasks <= 0) return;
  if (num_threads_ == 1 || num_tasks == 1) {
    for (std::int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  if (workers_ == Workers::kOpenMP) {
    openmp::Run(num_threads_, num_tasks, fn);
    return;
  }
  pool_->Run(num_tasks, fn);
}

}  // namespace posenc
