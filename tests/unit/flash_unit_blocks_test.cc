// ForEachUnitInBlocks (attention/flash_internal.h), the engines' one task
// per unit schedule: every unit exactly once on any thread count and worker
// kind; a worker runs its own contiguous block in order; a worker held up
// inside a unit has the rest of its block taken from the back by the others.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "attention/flash_internal.h"
#include "posenc/context.h"

namespace posenc::flash_internal {
namespace {

using Index = std::int64_t;

struct Taken {
  std::vector<std::vector<Index>> by_worker;  // units in the order each worker took them
  std::vector<int> count;                     // per unit
};

Taken RunUnits(Index n, const Context& ctx) {
  Taken t;
  t.by_worker.resize(static_cast<std::size_t>(ctx.num_threads()));
  t.count.assign(static_cast<std::size_t>(n), 0);
  std::mutex mu;
  ForEachUnitInBlocks(n, ctx, [&](Index unit, int worker) {
    const std::lock_guard<std::mutex> lock(mu);
    t.by_worker.at(static_cast<std::size_t>(worker)).push_back(unit);
    ++t.count.at(static_cast<std::size_t>(unit));
  });
  return t;
}

void ExpectEveryUnitOnce(const Context& ctx) {
  for (const Index n : {0, 1, 2, 3, 7, 128, 1001}) {
    const Taken t = RunUnits(n, ctx);
    for (Index u = 0; u < n; ++u) {
      EXPECT_EQ(t.count[Z(u)], 1) << "unit " << u << " of " << n << ", threads "
                                  << ctx.num_threads();
    }
  }
}

TEST(FlashUnitBlocks, EveryUnitOnceOnThePool) {
  for (const int threads : {1, 2, 3, 4}) ExpectEveryUnitOnce(Context(threads));
}

TEST(FlashUnitBlocks, EveryUnitOnceOnOpenMPWorkers) {
  if (!OpenMPAvailable()) GTEST_SKIP() << "built without OpenMP";
  for (const int threads : {1, 2, 3}) {
    ExpectEveryUnitOnce(Context(threads, Backend::kAuto, Workers::kOpenMP));
  }
}

// One thread: its block is every unit, in order.
TEST(FlashUnitBlocks, OneThreadRunsTheUnitsInOrder) {
  const Taken t = RunUnits(37, Context(1));
  ASSERT_EQ(t.by_worker[0].size(), 37u);
  for (Index u = 0; u < 37; ++u) EXPECT_EQ(t.by_worker[0][Z(u)], u);
}

// Whatever a worker takes from its own block (units [n w / T, n (w + 1) /
// T)) comes in increasing order: the owner takes from the front.
TEST(FlashUnitBlocks, OwnersRunTheirBlocksInOrder) {
  for (const int threads : {2, 3}) {
    const Index n = 300;
    const Taken t = RunUnits(n, Context(threads));
    for (int w = 0; w < threads; ++w) {
      const Index lo = n * w / threads, hi = n * (w + 1) / threads;
      Index last = -1;
      for (const Index u : t.by_worker[Z(w)]) {
        if (u < lo || u >= hi) continue;
        EXPECT_GT(u, last) << "worker " << w;
        last = u;
      }
    }
  }
}

// A worker stuck in a unit (a descheduled thread) does not hold up the rest
// of its block: the other worker takes those units from the back, in
// decreasing order, and the stuck one finds nothing left when it returns.
TEST(FlashUnitBlocks, TheOthersTakeALateWorkersUnitsFromTheBack) {
  const Context ctx(2);
  const Index n = 40;  // blocks [0, 20) and [20, 40)
  std::atomic<Index> done{0};
  std::atomic<bool> timed_out{false};
  std::mutex mu;
  std::vector<std::vector<Index>> by_worker(2);
  ForEachUnitInBlocks(n, ctx, [&](Index unit, int worker) {
    {
      const std::lock_guard<std::mutex> lock(mu);
      by_worker[Z(worker)].push_back(unit);
    }
    if (unit == 0 && worker == 0) {  // block 0's owner waits until every other unit is done
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (done.load() < n - 1) {
        if (std::chrono::steady_clock::now() > deadline) {
          timed_out = true;
          break;
        }
        std::this_thread::yield();
      }
    }
    done.fetch_add(1);
  });
  ASSERT_FALSE(timed_out) << "the other worker did not take block 0's units";
  EXPECT_EQ(done.load(), n);
  // Worker 0 (the calling thread) took unit 0 and nothing else; worker 1
  // every other unit: its own block in order, then block 0's rest from the
  // back.
  if (by_worker[0].empty()) GTEST_SKIP() << "worker 0 started after every unit was taken";
  ASSERT_EQ(by_worker[0], std::vector<Index>{0});
  const std::vector<Index>& other = by_worker[1];
  ASSERT_EQ(other.size(), static_cast<std::size_t>(n - 1));
  std::vector<Index> expected;
  for (Index u = 20; u < 40; ++u) expected.push_back(u);
  for (Index u = 19; u >= 1; --u) expected.push_back(u);
  EXPECT_EQ(other, expected);
}

}  // namespace
}  // namespace posenc::flash_internal
