// Workers::kOpenMP (include/posenc/context.h, src/threading/openmp.cc): a
// Context whose tasks run on the calling thread's OpenMP team keeps every
// guarantee of the pool (threading_test.cc): each task once with a worker in
// range, nested calls inline, concurrent callers (RunOnEachThread once per
// thread and the first exception rethrown after the others:
// threading_test.cc, for both kinds of workers); and a fused attention
// forward and backward give the same bits as on the pool. Builds without
// OpenMP (the tsan preset, whose ThreadSanitizer does not see libgomp's
// synchronisation) refuse the option with an InvalidArgument naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/attention.h"
#include "posenc/context.h"
#include "posenc/dtype.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"

namespace posenc {
namespace {

#define POSENC_REQUIRE_OPENMP() \
  if (!OpenMPAvailable()) GTEST_SKIP() << "this build has no OpenMP"

TEST(OpenMPWorkers, NamesAndBadValues) {
  EXPECT_EQ(WorkersName(Workers::kPool), "pool");
  EXPECT_EQ(WorkersName(Workers::kOpenMP), "openmp");
  EXPECT_EQ(ParseWorkers("pool"), Workers::kPool);
  EXPECT_EQ(ParseWorkers("openmp"), Workers::kOpenMP);
  try {
    ParseWorkers("omp");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("workers"), std::string::npos) << what;
    EXPECT_NE(what.find("omp"), std::string::npos) << what;
    EXPECT_NE(what.find("pool, openmp"), std::string::npos) << what;
  }
  EXPECT_THROW(Context(2, Backend::kAuto, static_cast<Workers>(7)), InvalidArgument);
  EXPECT_EQ(Context(2).workers(), Workers::kPool);
}

TEST(OpenMPWorkers, RefusedWithoutOpenMP) {
  if (OpenMPAvailable()) {
    EXPECT_EQ(Context(2, Backend::kAuto, Workers::kOpenMP).workers(), Workers::kOpenMP);
    return;
  }
  try {
    const Context ctx(2, Backend::kAuto, Workers::kOpenMP);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("workers"), std::string::npos) << what;
    EXPECT_NE(what.find("no OpenMP"), std::string::npos) << what;
  }
}

TEST(OpenMPWorkers, EveryTaskOnceWithWorkerInRange) {
  POSENC_REQUIRE_OPENMP();
  for (const int threads : {1, 2, 4}) {
    const Context ctx(threads, Backend::kAuto, Workers::kOpenMP);
    for (const std::int64_t tasks : {1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(tasks));
      std::atomic<bool> bad_worker{false};
      std::mutex mu;
      std::set<std::thread::id> seen;
      ctx.ParallelFor(tasks, [&](std::int64_t t, int w) {
        hits[static_cast<std::size_t>(t)].fetch_add(1);
        if (w < 0 || w >= threads) bad_worker = true;
        const std::lock_guard<std::mutex> lock(mu);
        seen.insert(std::this_thread::get_id());
      });
      for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
      EXPECT_FALSE(bad_worker.load());
      EXPECT_LE(seen.size(), static_cast<std::size_t>(threads));
    }
  }
}

TEST(OpenMPWorkers, NestedCallsRunInlineOnTheCallingThread) {
  POSENC_REQUIRE_OPENMP();
  const Context ctx(2, Backend::kAuto, Workers::kOpenMP);
  std::vector<std::atomic<int>> hits(8 * 16);
  ctx.ParallelFor(8, [&](std::int64_t outer, int) {
    const std::thread::id outer_thread = std::this_thread::get_id();
    ctx.ParallelFor(16, [&](std::int64_t inner, int worker) {
      EXPECT_EQ(worker, 0);
      EXPECT_EQ(std::this_thread::get_id(), outer_thread);
      hits[static_cast<std::size_t>(outer * 16 + inner)].fetch_add(1);
    });
    ctx.RunOnEachThread([&](int worker) {
      EXPECT_EQ(worker, 0);
      EXPECT_EQ(std::this_thread::get_id(), outer_thread);
    });
  });
  for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(OpenMPWorkers, ConcurrentCallersOnOneContext) {
  POSENC_REQUIRE_OPENMP();
  const Context ctx(2, Backend::kAuto, Workers::kOpenMP);
  constexpr int kCallers = 3, kTasks = 97;
  std::vector<std::int64_t> sums(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 20; ++round) {
        std::atomic<std::int64_t> sum{0};
        ctx.ParallelFor(kTasks, [&](std::int64_t t, int) { sum.fetch_add(t + c); });
        sums[static_cast<std::size_t>(c)] += sum.load();
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) {
    EXPECT_EQ(sums[static_cast<std::size_t>(c)], 20 * (kTasks * (kTasks - 1) / 2 + kTasks * c));
  }
}

// The fused attention's results do not depend on whose threads run it: the
// forward and every gradient are bit-identical on the pool, on OpenMP and on
// one thread (causal ALiBi, bfloat16 inputs, both precisions).
TEST(OpenMPWorkers, FlashAttentionBitsMatchThePool) {
  POSENC_REQUIRE_OPENMP();
  constexpr std::int64_t B = 2, S = 150, H = 4, D = 32;
  const std::size_t n = B * S * H * D;
  std::vector<BFloat16> q(n), k(n), v(n), dout(n);
  for (std::size_t i = 0; i < n; ++i) {
    q[i] = FloatToBF16(static_cast<float>(std::sin(0.37 * static_cast<double>(i))));
    k[i] = FloatToBF16(static_cast<float>(std::cos(0.91 * static_cast<double>(i))));
    v[i] = FloatToBF16(static_cast<float>(std::sin(1.13 * static_cast<double>(i) + 0.5)));
    dout[i] = FloatToBF16(static_cast<float>(std::cos(0.29 * static_cast<double>(i) + 1.0)));
  }
  AlibiParams ap;
  ap.num_heads = H;
  AttentionParams p;
  p.scheme = AlibiScheme(AlibiSlopes(ap));
  auto view = [](auto* data) {
    return TensorView::Contiguous(data, DType::kBFloat16, {B, S, H, D});
  };
  using Outputs = std::vector<std::vector<BFloat16>>;
  auto run = [&](const Context& ctx, FlashPrecision precision) {
    Outputs o(4, std::vector<BFloat16>(n));
    std::vector<float> lse(B * H * S);
    FlashAttentionOptions opt;
    opt.precision = precision;
    const TensorView l = TensorView::Contiguous(lse.data(), DType::kFloat32, {B, H, S});
    FlashAttentionWithLse(p, view(q.data()), view(k.data()), view(v.data()), view(o[0].data()), l,
                          opt, ctx);
    const AttentionGrads g{view(o[1].data()), view(o[2].data()), view(o[3].data()), {}};
    FlashAttentionBackward(p, view(q.data()), view(k.data()), view(v.data()), view(o[0].data()),
                           view(dout.data()), l, g, opt, ctx);
    return o;
  };
  auto same_bits = [](const Outputs& a, const Outputs& b) {
    for (std::size_t t = 0; t < a.size(); ++t) {
      for (std::size_t i = 0; i < a[t].size(); ++i) {
        if (a[t][i].bits != b[t][i].bits) return false;
      }
    }
    return true;
  };
  for (const FlashPrecision precision : {FlashPrecision::kFloat32, FlashPrecision::kBFloat16}) {
    const Outputs serial = run(Context(1), precision);
    const Outputs pool = run(Context(3), precision);
    const Outputs openmp = run(Context(3, Backend::kAuto, Workers::kOpenMP), precision);
    EXPECT_TRUE(same_bits(serial, pool));
    EXPECT_TRUE(same_bits(serial, openmp));
  }
}

}  // namespace
}  // namespace posenc
