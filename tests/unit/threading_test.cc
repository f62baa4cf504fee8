// The thread pool behind posenc::Context (src/threading/thread_pool.cc) and
// the guarantees of include/posenc/context.h: every task runs exactly once
// with a worker index in range; the first exception is rethrown after the
// others finish; several threads may call ParallelFor on one Context at
// once; a ParallelFor from inside a task of the same Context runs inline
// instead of deadlocking. Run under ThreadSanitizer by the tsan preset.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
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

}  // namespace
}  // namespace posenc
