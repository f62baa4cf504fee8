// The thread pool behind posenc::Context (src/threading/thread_pool.cc) and
// the guarantees of include/posenc/context.h: every task runs exactly once
// with a worker index in range; the first exception is rethrown after the
// others finish; several threads may call ParallelFor on one Context at
// once; a ParallelFor from inside a task of the same Context runs inline
// instead of deadlocking. Run under ThreadSanitizer by the tsan preset.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kernels/thread_scratch.h"
#include "posenc/context.h"
#include "posenc/error.h"
#include "posenc/rope.h"
#include "threading/thread_pool.h"

namespace posenc {
namespace {

TEST(ThreadPool, EveryTaskOnceWithWorkerInRange) {
  for (const int threads : {1, 2, 4}) {
    const Context ctx(threads);
    std::vector<std::atomic<int>> hits(1000);
    std::atomic<bool> bad_worker{false};
    ctx.ParallelFor(1000, [&](std::int64_t t, int w) {
      hits[static_cast<std::size_t>(t)].fetch_add(1);
      if (w < 0 || w >= threads) bad_worker = true;
    });
    for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
    EXPECT_FALSE(bad_worker.load());
  }
}

TEST(ThreadPool, FirstExceptionRethrownAfterAllTasks) {
  // Both kinds of workers (posenc's pool; the OpenMP team where built).
  std::vector<Workers> kinds = {Workers::kPool};
  if (OpenMPAvailable()) kinds.push_back(Workers::kOpenMP);
  for (const Workers kind : kinds) {
    SCOPED_TRACE(WorkersName(kind));
    const Context ctx(3, Backend::kAuto, kind);
    std::atomic<int> ran{0};
    EXPECT_THROW(ctx.ParallelFor(64,
                                 [&](std::int64_t t, int) {
                                   ran.fetch_add(1);
                                   if (t % 16 == 5)
                                     throw InvalidArgument("task " + std::to_string(t));
                                 }),
                 InvalidArgument);
    EXPECT_EQ(ran.load(), 64);
    EXPECT_THROW(ctx.RunOnEachThread([](int worker) {
      if (worker == 1) throw std::runtime_error("worker 1");
    }),
                 std::runtime_error);
    // The workers are usable afterwards.
    std::atomic<int> again{0};
    ctx.ParallelFor(10, [&](std::int64_t, int) { again.fetch_add(1); });
    EXPECT_EQ(again.load(), 10);
  }
}

TEST(ThreadPool, ConcurrentCallersOnOneContext) {
  const Context ctx(3);
  constexpr int kCallers = 4, kRounds = 20, kTasks = 97;
  std::vector<std::int64_t> sums(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int r = 0; r < kRounds; ++r) {
        std::vector<std::int64_t> part(kTasks, 0);  // one slot per task: no race
        ctx.ParallelFor(
            kTasks, [&](std::int64_t t, int) { part[static_cast<std::size_t>(t)] = t * (c + 1); });
        for (const std::int64_t x : part) sums[static_cast<std::size_t>(c)] += x;
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) {
    EXPECT_EQ(sums[static_cast<std::size_t>(c)], kRounds * (c + 1) * (kTasks * (kTasks - 1) / 2));
  }
}

TEST(ThreadPool, NestedParallelForRunsInline) {
  const Context ctx(2);
  std::vector<std::atomic<int>> hits(8 * 16);
  ctx.ParallelFor(8, [&](std::int64_t outer, int) {
    ctx.ParallelFor(16, [&](std::int64_t inner, int worker) {
      EXPECT_EQ(worker, 0);  // inline: worker 0 of the inner call
      hits[static_cast<std::size_t>(outer * 16 + inner)].fetch_add(1);
    });
  });
  for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, BadThreadCountIsInvalidArgument) {
  EXPECT_THROW(Context(-1), InvalidArgument);
  EXPECT_THROW(Context(1025), InvalidArgument);
}

// The pool's two ways of waiting (thread_pool.h): polling for up to `spin`,
// then sleeping. Jobs back to back (found by polling; with spin 0, by
// waking sleepers) and jobs after a pause longer than the spin (the workers
// asleep again) each run every task once and reach every worker, and a
// task's exception is rethrown whichever way the workers waited.
TEST(ThreadPool, EveryJobRunsWhetherWorkersPollOrSleep) {
  using std::chrono::microseconds;
  for (const microseconds spin : {microseconds(0), microseconds(200), microseconds(100000)}) {
    SCOPED_TRACE(spin.count());
    ThreadPool pool(3, spin);
    for (int job = 0; job < 30; ++job) {
      if (job % 10 == 9) std::this_thread::sleep_for(microseconds(2000));
      std::vector<std::atomic<int>> hits(50);
      pool.Run(50, [&](std::int64_t t, int) { hits[static_cast<std::size_t>(t)].fetch_add(1); });
      for (const auto& h : hits) ASSERT_EQ(h.load(), 1);
      std::atomic<int> workers{0};
      pool.RunOnEachThread([&](int w) { workers.fetch_or(1 << w); });
      ASSERT_EQ(workers.load(), 0b111);
    }
    EXPECT_THROW(pool.Run(8,
                          [](std::int64_t t, int) {
                            if (t == 3) throw std::runtime_error("task 3");
                          }),
                 std::runtime_error);
  }
}

// CPU time of the whole process (every thread), in seconds.
double ProcessCpuSeconds() {
  rusage use{};
  getrusage(RUSAGE_SELF, &use);
  return static_cast<double>(use.ru_utime.tv_sec + use.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(use.ru_utime.tv_usec + use.ru_stime.tv_usec);
}

// The polling ends: after a job, an idle pool of 4 threads (the default
// spin, 50 us) costs its process well under the 0.3 s of CPU time that
// three workers polling through a 100 ms pause would.
TEST(ThreadPool, IdleWorkersStopPolling) {
  const Context ctx(4);
  std::atomic<int> ran{0};
  ctx.ParallelFor(64, [&](std::int64_t, int) { ran.fetch_add(1); });
  ASSERT_EQ(ran.load(), 64);
  const double before = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_LT(ProcessCpuSeconds() - before, 0.03);
}

// RunOnEachThread: once on every thread of the pool, and of the OpenMP team
// where the build has OpenMP (the caller as worker 0), the caller only from
// inside a task, and once for a serial context.
TEST(Context, RunOnEachThreadRunsOncePerThread) {
  std::vector<Workers> kinds = {Workers::kPool};
  if (OpenMPAvailable()) kinds.push_back(Workers::kOpenMP);
  for (const Workers kind : kinds)
    for (const int n : {1, 2, 4}) {
      const Context ctx(n, Backend::kAuto, kind);
      for (int round = 0; round < 20; ++round) {
        std::mutex mu;
        std::set<std::thread::id> threads;
        std::vector<int> workers;
        ctx.RunOnEachThread([&](int worker) {
          const std::lock_guard<std::mutex> lock(mu);
          threads.insert(std::this_thread::get_id());
          workers.push_back(worker);
        });
        std::sort(workers.begin(), workers.end());
        std::vector<int> want(static_cast<std::size_t>(n));
        for (int w = 0; w < n; ++w) want[static_cast<std::size_t>(w)] = w;
        EXPECT_EQ(workers, want);
        EXPECT_EQ(threads.size(), static_cast<std::size_t>(n));
        EXPECT_EQ(threads.count(std::this_thread::get_id()), 1u);
      }
    }
  const Context ctx(3);
  std::atomic<int> inner{0};
  ctx.ParallelFor(3, [&](std::int64_t, int) {
    ctx.RunOnEachThread([&](int worker) {
      EXPECT_EQ(worker, 0);
      ++inner;
    });
  });
  EXPECT_EQ(inner.load(), 3);  // one per task: nested calls run on their own thread only
}

// Releasing the kept scratch between calls changes no result, and every
// module's hook fits the registry.
TEST(ThreadScratch, ReleaseKeepsResultsAndHooksFit) {
  // Linked into this test (a static link keeps the objects it uses): the RoPE
  // frequency cache and the SIMD apply store at least.
  EXPECT_GE(kernels::NumScratchHooks(), 2);
  EXPECT_LT(kernels::NumScratchHooks(), kernels::MaxScratchHooks());
  RopeParams p;
  p.head_dim = 64;
  std::vector<float> x(2 * 9 * 3 * 64), y;
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) * 0.01f - 0.4f;
  y = x;
  const Context ctx(2);
  ApplyRope(p, TensorView::Contiguous(x.data(), DType::kFloat32, {2, 9, 3, 64}),
            AttentionLayout::kBSHD, Positions::Offset(5), RopeDirection::kForward, nullptr, ctx);
  ReleaseThreadScratch(ctx);
  ApplyRope(p, TensorView::Contiguous(y.data(), DType::kFloat32, {2, 9, 3, 64}),
            AttentionLayout::kBSHD, Positions::Offset(5), RopeDirection::kForward, nullptr, ctx);
  EXPECT_EQ(x, y);
  ReleaseThreadScratch(Context(1));
}

TEST(ContextBackend, EnvironmentPicksTheBackendOfAutoContexts) {
  ::setenv("POSENC_BACKEND", "scalar", 1);
  EXPECT_EQ(Context().backend(), Backend::kScalar);
  EXPECT_EQ(Context(2).backend(), Backend::kScalar);
  EXPECT_EQ(Context(1, Backend::kSimd).backend(), Backend::kSimd);  // an explicit choice stays
  ::setenv("POSENC_BACKEND", "simd", 1);
  EXPECT_EQ(Context().backend(), Backend::kSimd);
  ::setenv("POSENC_BACKEND", "", 1);
  EXPECT_EQ(Context().backend(), Backend::kAuto);
  ::setenv("POSENC_BACKEND", "fast", 1);
  try {
    Context ctx;
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "POSENC_BACKEND: got fast, expected one of auto, scalar, simd");
  }
  ::unsetenv("POSENC_BACKEND");
  EXPECT_EQ(Context().backend(), Backend::kAuto);
}

// POSENC_POOL_SPIN_US (context.h): a whole number of microseconds in
// [0, 100000] for every Context made while it is set; anything else is an
// InvalidArgument naming the variable, whatever the Context's threads.
TEST(ContextPoolSpin, EnvironmentSetsTheSpinOrNamesItsBadValue) {
  for (const char* good : {"0", "200", "100000", ""}) {
    ::setenv("POSENC_POOL_SPIN_US", good, 1);
    const Context ctx(2);
    std::atomic<int> ran{0};
    ctx.ParallelFor(9, [&](std::int64_t, int) { ran.fetch_add(1); });
    EXPECT_EQ(ran.load(), 9) << good;
  }
  for (const char* bad : {"-1", "100001", "1.5", "fast", " 5", "99999999999999999999"}) {
    ::setenv("POSENC_POOL_SPIN_US", bad, 1);
    for (const int threads : {1, 2}) {
      try {
        const Context ctx(threads);
        ADD_FAILURE() << "expected InvalidArgument for " << bad;
      } catch (const InvalidArgument& e) {
        EXPECT_EQ(std::string(e.what()),
                  std::string("POSENC_POOL_SPIN_US: got ") + bad +
                      ", expected a whole number of microseconds in [0, 100000] (unset: 50)");
      }
    }
  }
  ::unsetenv("POSENC_POOL_SPIN_US");
}

}  // namespace
}  // namespace posenc
