// The thread pool behind posenc::Context (src/threading/thread_pool.cc) and
// the guarantees of include/posenc/context.h: every task runs exactly once
// with a worker index in range; the first exception is rethrown after the
// others finish; several threads may call ParallelFor on one Context at
// once; a ParallelFor from inside a task of the same Context runs inline
// instead of deadlocking. Run under ThreadSanitizer by the tsan preset.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "posenc/context.h"
#include "posenc/error.h"

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
  const Context ctx(3);
  std::atomic<int> ran{0};
  EXPECT_THROW(ctx.ParallelFor(64,
                               [&](std::int64_t t, int) {
                                 ran.fetch_add(1);
                                 if (t % 16 == 5)
                                   throw InvalidArgument("task " + std::to_string(t));
                               }),
               InvalidArgument);
  EXPECT_EQ(ran.load(), 64);
  // The pool is usable afterwards.
  std::atomic<int> again{0};
  ctx.ParallelFor(10, [&](std::int64_t, int) { again.fetch_add(1); });
  EXPECT_EQ(again.load(), 10);
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

}  // namespace
}  // namespace posenc
