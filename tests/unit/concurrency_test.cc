// The kernels called from several std::threads at once (include/posenc/
// context.h, "Thread safety"): RoPE (ApplyRope, float32 and bfloat16), ALiBi
// and T5 bias matrices (the bias tile kernels), flash attention forward
// (with lse) and backward, decode, and the reference attention; once with every
// thread sharing ONE Context, once with a Context per thread. Every result
// must be bit-identical to the same call made serially. The tsan preset runs
// this test under ThreadSanitizer, which also reports any data race inside
// the kernels or the pool.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/attention.h"
#include "posenc/context.h"
#include "posenc/flash_attention.h"
#include "posenc/rope.h"
#include "posenc/t5.h"

namespace posenc {
namespace {

using Bytes = std::vector<unsigned char>;

std::vector<float> Random(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

template <typename T>
Bytes AsBytes(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// One kernel call: fresh inputs and outputs, returns the outputs' bytes.
struct Job {
  std::string name;
  std::function<Bytes(const Context&)> run;
};

constexpr std::int64_t kB = 1, kS = 48, kH = 4, kD = 32;

std::vector<double> Slopes() {
  AlibiParams p;
  p.num_heads = kH;
  return AlibiSlopes(p);
}

std::vector<Job> Jobs() {
  std::vector<Job> jobs;
  jobs.push_back(
      {"rope_f32", [](const Context& ctx) {
         RopeParams p;
         p.head_dim = kD;
         p.theta = 500000.0;
         const std::vector<float> x = Random(kB * kS * kH * kD, 1);
         std::vector<float> out(x.size());
         const TensorView xv = TensorView::Contiguous(x.data(), DType::kFloat32, {kB, kS, kH, kD});
         const TensorView ov =
             TensorView::Contiguous(out.data(), DType::kFloat32, {kB, kS, kH, kD});
         ApplyRope(p, xv, AttentionLayout::kBSHD, Positions::Offset(7), RopeDirection::kForward,
                   &ov, ctx);
         return AsBytes(out);
       }});
  jobs.push_back({"rope_bf16_hf_inplace", [](const Context& ctx) {
                    RopeParams p;
                    p.head_dim = kD;
                    p.rotary_dim = 16;
                    p.numerics = RopeNumerics::kHF;
                    const std::vector<float> x = Random(kB * kS * kH * kD, 2);
                    std::vector<std::uint16_t> xb(x.size());
                    for (std::size_t i = 0; i < x.size(); ++i) xb[i] = FloatToBF16(x[i]).bits;
                    const TensorView xv =
                        TensorView::Contiguous(xb.data(), DType::kBFloat16, {kB, kH, kS, kD});
                    ApplyRope(p, xv, AttentionLayout::kBHSD, Positions::Offset(0),
                              RopeDirection::kForward, nullptr, ctx);
                    return AsBytes(xb);
                  }});
  jobs.push_back({"alibi_matrix", [](const Context& ctx) {
                    const std::vector<double> slopes = Slopes();
                    std::vector<float> out(kH * kS * kS);
                    AlibiBiasMatrix(
                        slopes, AlibiGeometry{kS, kS, AlibiForm::kSymmetric},
                        TensorView::Contiguous(out.data(), DType::kFloat32, {kH, kS, kS}), ctx);
                    return AsBytes(out);
                  }});
  jobs.push_back({"t5_fill_bias", [](const Context& ctx) {
                    T5BiasTable table(T5BucketParams{32, 128, T5Direction::kBidirectional}, kH);
                    table.InitNormal(5, 1.0);
                    std::vector<float> out(kH * kS * kS);
                    table.FillBias(
                        Positions::Offset(3), kS, kS,
                        TensorView::Contiguous(out.data(), DType::kFloat32, {kH, kS, kS}), ctx);
                    return AsBytes(out);
                  }});
  const auto attention_inputs = [] {
    return std::vector<std::vector<float>>{
        Random(kB * kS * kH * kD, 11), Random(kB * kS * 2 * kD, 12), Random(kB * kS * 2 * kD, 13),
        Random(kB * kS * kH * kD, 14)};
  };
  const auto view = [](const std::vector<float>& v, std::int64_t heads) {
    return TensorView::Contiguous(v.data(), DType::kFloat32, {kB, kS, heads, kD});
  };
  const auto rope_params = [] {
    AttentionParams a;
    RopeParams r;
    r.head_dim = kD;
    a.scheme = RopeScheme(r);
    return a;
  };
  jobs.push_back({"flash_forward_lse", [=](const Context& ctx) {
                    const auto in = attention_inputs();
                    std::vector<float> out(kB * kS * kH * kD), lse(kB * kH * kS);
                    FlashAttentionOptions o;
                    o.query_tile = 16;
                    o.key_tile = 16;
                    FlashAttentionWithLse(
                        rope_params(), view(in[0], kH), view(in[1], 2), view(in[2], 2),
                        view(out, kH),
                        TensorView::Contiguous(lse.data(), DType::kFloat32, {kB, kH, kS}), o, ctx);
                    Bytes b = AsBytes(out);
                    const Bytes l = AsBytes(lse);
                    b.insert(b.end(), l.begin(), l.end());
                    return b;
                  }});
  jobs.push_back(
      {"flash_backward", [=](const Context& ctx) {
         const auto in = attention_inputs();
         std::vector<float> out(kB * kS * kH * kD), lse(kB * kH * kS);
         FlashAttentionOptions o;
         o.query_tile = 16;
         o.key_tile = 16;
         const AttentionParams a = rope_params();
         const TensorView lv = TensorView::Contiguous(lse.data(), DType::kFloat32, {kB, kH, kS});
         FlashAttentionWithLse(a, view(in[0], kH), view(in[1], 2), view(in[2], 2), view(out, kH),
                               lv, o, ctx);
         std::vector<float> dq(in[0].size()), dk(in[1].size()), dv(in[2].size());
         AttentionGrads g;
         g.dq = view(dq, kH);
         g.dk = view(dk, 2);
         g.dv = view(dv, 2);
         FlashAttentionBackward(a, view(in[0], kH), view(in[1], 2), view(in[2], 2), view(out, kH),
                                view(in[3], kH), lv, g, o, ctx);
         Bytes b = AsBytes(dq);
         for (const auto* v : {&dk, &dv}) {
           const Bytes part = AsBytes(*v);
           b.insert(b.end(), part.begin(), part.end());
         }
         return b;
       }});
  jobs.push_back({"flash_decode_alibi", [](const Context& ctx) {
                    // 3 queries against 600 keys: 2 chunks, thread-local buffers.
                    constexpr std::int64_t kSq = 3, kSk = 600;
                    const std::vector<float> q = Random(kB * kSq * kH * kD, 15),
                                             k = Random(kB * kSk * 2 * kD, 16),
                                             v = Random(kB * kSk * 2 * kD, 17);
                    std::vector<float> out(q.size());
                    AttentionParams a;
                    a.scheme = AlibiScheme(Slopes());
                    a.query_positions = Positions::Offset(kSk - kSq);
                    const auto at = [](const std::vector<float>& x, std::int64_t s,
                                       std::int64_t h) {
                      return TensorView::Contiguous(x.data(), DType::kFloat32, {kB, s, h, kD});
                    };
                    FlashAttentionDecode(a, at(q, kSq, kH), at(k, kSk, 2), at(v, kSk, 2),
                                         at(out, kSq, kH), TensorView{}, {}, ctx);
                    return AsBytes(out);
                  }});
  jobs.push_back({"reference_alibi", [=](const Context& ctx) {
                    const auto in = attention_inputs();
                    std::vector<float> out(kB * kS * kH * kD);
                    AttentionParams a;
                    a.mask = AttentionMask::kBidirectional;
                    a.scheme = AlibiScheme(Slopes());
                    AttentionReference(a, view(in[0], kH), view(in[1], 2), view(in[2], 2),
                                       view(out, kH), nullptr, ctx);
                    return AsBytes(out);
                  }});
  return jobs;
}

enum class Sharing { kOneContext, kContextPerThread };

void RunConcurrently(Sharing sharing) {
  constexpr int kThreads = 4, kRounds = 2, kPoolThreads = 2;
  const std::vector<Job> jobs = Jobs();
  std::vector<Bytes> serial;
  {
    const Context ctx(kPoolThreads);
    for (const Job& j : jobs) serial.push_back(j.run(ctx));
  }
  const Context shared(kPoolThreads);
  // results[thread][round * jobs + job]
  std::vector<std::vector<Bytes>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Context own(kPoolThreads);
      const Context& ctx = sharing == Sharing::kOneContext ? shared : own;
      for (int r = 0; r < kRounds; ++r) {
        // Each thread starts at another job so that different kernels overlap.
        for (std::size_t i = 0; i < jobs.size(); ++i) {
          const std::size_t j = (i + static_cast<std::size_t>(t)) % jobs.size();
          results[static_cast<std::size_t>(t)].push_back(jobs[j].run(ctx));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    for (int r = 0; r < kRounds; ++r) {
      for (std::size_t i = 0; i < jobs.size(); ++i) {
        const std::size_t j = (i + static_cast<std::size_t>(t)) % jobs.size();
        EXPECT_EQ(
            results[static_cast<std::size_t>(t)][static_cast<std::size_t>(r) * jobs.size() + i],
            serial[j])
            << jobs[j].name << " from thread " << t << ", round " << r;
      }
    }
  }
}

TEST(Concurrency, KernelsShareOneContext) { RunConcurrently(Sharing::kOneContext); }

TEST(Concurrency, KernelsWithAContextPerThread) { RunConcurrently(Sharing::kContextPerThread); }

TEST(Concurrency, SerialResultsDoNotDependOnThreadCount) {
  // The serial baseline itself: one worker and three give the same bytes.
  for (const Job& j : Jobs()) {
    EXPECT_EQ(j.run(Context(1)), j.run(Context(3))) << j.name;
  }
}

}  // namespace
}  // namespace posenc
