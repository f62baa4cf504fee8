// The fused forward and backward keep their packing and worker buffers on
// the calling thread from call to call (flash_internal::ThreadBuffers): a
// call after calls of other shapes, dtypes, schemes and thread counts must
// give the same bits as the first call and as a brand-new thread (fresh
// buffers). The call in between puts large and infinite values into the
// buffers, so a read of anything the next call did not write would show
// (0 * inf = NaN, or a changed sum).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <thread>
#include <vector>

#include "flash_test_util.h"
#include "posenc/alibi.h"
#include "posenc/flash_attention.h"
#include "posenc/t5.h"

namespace posenc::flash_test {
namespace {

// out, lse, dq, dk, dv of one forward + backward, all float32.
struct Result {
  std::vector<float> out, lse, dq, dk, dv;
};

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool SameBits(const Result& a, const Result& b) {
  return SameBits(a.out, b.out) && SameBits(a.lse, b.lse) && SameBits(a.dq, b.dq) &&
         SameBits(a.dk, b.dk) && SameBits(a.dv, b.dv);
}

// Forward (FlashAttentionWithLse) then backward, bshd.
Result ForwardBackward(const AttentionParams& params, const Tensor& q, const Tensor& k,
                       const Tensor& v, const Tensor& dout, const Context& ctx) {
  const Index B = q.view.shape[0], Sq = q.view.shape[1], H = q.view.shape[2];
  const Index D = q.view.shape[3], Sk = k.view.shape[1], Hkv = k.view.shape[2];
  const Index Dv = v.view.shape[3];
  Result r;
  r.out.resize(Z(B * Sq * H * Dv));
  r.lse.resize(Z(B * H * Sq));
  r.dq.resize(Z(B * Sq * H * D));
  r.dk.resize(Z(B * Sk * Hkv * D));
  r.dv.resize(Z(B * Sk * Hkv * Dv));
  const auto view = [](std::vector<float>& x, std::initializer_list<std::int64_t> shape) {
    return TensorView::Contiguous(x.data(), DType::kFloat32, shape);
  };
  const TensorView out = view(r.out, {B, Sq, H, Dv});
  const TensorView lse = view(r.lse, {B, H, Sq});
  FlashAttentionWithLse(params, q.view, k.view, v.view, out, lse, {}, ctx);
  AttentionGrads g;
  g.dq = view(r.dq, {B, Sq, H, D});
  g.dk = view(r.dk, {B, Sk, Hkv, D});
  g.dv = view(r.dv, {B, Sk, Hkv, Dv});
  FlashAttentionBackward(params, q.view, k.view, v.view, out, dout.view, lse, g, {}, ctx);
  return r;
}

TEST(FlashBuffers, ReusedAcrossShapesGiveTheSameBits) {
  constexpr auto kBshd = AttentionLayout::kBSHD;
  // Call A: bfloat16, causal ALiBi, GQA 4/2, odd lengths.
  Tensor q(DType::kBFloat16, kBshd, 3, 77, 4, 32, 1), k(DType::kBFloat16, kBshd, 3, 77, 2, 32, 2);
  Tensor v(DType::kBFloat16, kBshd, 3, 77, 2, 32, 3),
      dout(DType::kBFloat16, kBshd, 3, 77, 4, 32, 4);
  AttentionParams alibi;
  alibi.scheme = AlibiScheme(AlibiSlopes(4));
  // Call B: float32, bidirectional T5, one kv head, D 48, longer, with huge
  // and infinite values in v and dout (its own outputs may be inf / NaN).
  Tensor q2(DType::kFloat32, kBshd, 2, 300, 2, 48, 5), k2(DType::kFloat32, kBshd, 2, 300, 1, 48, 6);
  Tensor v2(DType::kFloat32, kBshd, 2, 300, 1, 48, 7);
  Tensor dout2(DType::kFloat32, kBshd, 2, 300, 2, 48, 8);
  for (Index i = 0; i < v2.view.NumElements(); i += 7) {
    StoreFromDouble(v2.view.data, DType::kFloat32, i, i % 2 ? 1e30 : INFINITY);
  }
  for (Index i = 0; i < dout2.view.NumElements(); i += 5) {
    StoreFromDouble(dout2.view.data, DType::kFloat32, i, -1e30);
  }
  T5BucketParams tp;
  tp.direction = T5Direction::kBidirectional;
  T5BiasTable t5(tp, 2);
  t5.InitNormal(3, 1.0);
  AttentionParams t5_params;
  t5_params.scheme = T5Scheme(t5);
  t5_params.mask = AttentionMask::kBidirectional;

  const Context two(2), three(3);
  const Result first = ForwardBackward(alibi, q, k, v, dout, two);
  for (float x : first.dq) ASSERT_TRUE(std::isfinite(x));
  const Result other = ForwardBackward(t5_params, q2, k2, v2, dout2, three);
  EXPECT_TRUE(SameBits(first, ForwardBackward(alibi, q, k, v, dout, two)));
  Result fresh, fresh_other;
  std::thread([&] {
    fresh = ForwardBackward(alibi, q, k, v, dout, two);
    fresh_other = ForwardBackward(t5_params, q2, k2, v2, dout2, three);
  }).join();
  EXPECT_TRUE(SameBits(first, fresh));
  EXPECT_TRUE(SameBits(other, fresh_other));
}

}  // namespace
}  // namespace posenc::flash_test
