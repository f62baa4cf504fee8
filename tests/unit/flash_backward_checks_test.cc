// Backward of the fused attention, further checks: central finite
// differences of the float64 reference forward on tiny float64 cases (dq,
// dk, dv, T5 table, Shaw tables, every scheme, causal and bidirectional),
// the forward's row log-sum-exp (FlashAttentionWithLse) against float64,
// one test per bad input of FlashAttentionBackward / FlashAttentionWithLse,
// and the backward's peak extra memory at S = 8192 (release builds only, as
// in flash_memory_test.cc: an [S, S] float32 matrix would be 256 MiB per
// head; the backward must stay under 32 MiB beyond its inputs and outputs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "flash_backward_fixture.h"
#include "flash_test_util.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"

namespace posenc::flash_test {
namespace {

// ---- Central finite differences of the float64 reference forward ----

// L = sum(out * dout) with out from AttentionReference (float64).
double Loss(Fixture& f) {
  const Case& c = f.c;
  Tensor out(DType::kFloat64, c.layout, c.B, c.Sq, c.H, c.Dv, std::nullopt);
  AttentionReference(f.params, f.q.view, f.k.view, f.v.view, out.view);
  const std::vector<double> o = Canonical(out.view, c.layout), g = Canonical(f.dout.view, c.layout);
  double l = 0.0;
  for (std::size_t i = 0; i < o.size(); ++i) l += o[i] * g[i];
  return l;
}

// Central difference of Loss w.r.t. every element of `values` (step h,
// storage element type T), against `grad` (same order).
template <typename T>
void ExpectFiniteDifferences(Fixture& f, T* values, std::size_t n, double h,
                             const std::vector<double>& grad, const char* what) {
  ASSERT_EQ(grad.size(), n) << what;
  for (std::size_t i = 0; i < n; ++i) {
    const T x = values[i];
    values[i] = static_cast<T>(x + h);
    const double up = Loss(f), h_up = static_cast<double>(values[i]) - static_cast<double>(x);
    values[i] = static_cast<T>(x - h);
    const double down = Loss(f), h_down = static_cast<double>(x) - static_cast<double>(values[i]);
    values[i] = x;
    const double fd = (up - down) / (h_up + h_down);
    EXPECT_NEAR(grad[i], fd, 2e-5 * std::max(1.0, std::abs(fd))) << what << "[" << i << "]";
  }
}

void CheckFiniteDifferences(const Case& c) {
  SCOPED_TRACE(c.name);
  Fixture f(c);
  const Index rows = f.TableRows();
  std::vector<float> out(Z(c.B * c.Sq * c.H * c.Dv)), lse(Z(c.B * c.H * c.Sq));
  const TensorView out_view =
      TensorView::Contiguous(out.data(), DType::kFloat32, {c.B, c.Sq, c.H, c.Dv});
  const TensorView lse_view = TensorView::Contiguous(lse.data(), DType::kFloat32, {c.B, c.H, c.Sq});
  FlashAttentionWithLse(f.params, f.q.view, f.k.view, f.v.view, out_view, lse_view);
  GradOutputs g(f, DType::kFloat64);
  FlashAttentionBackward(f.params, f.q.view, f.k.view, f.v.view, out_view, f.dout.view, lse_view,
                         g.grads);
  // The views are contiguous bshd: storage order is the view's order.
  ASSERT_EQ(c.layout, AttentionLayout::kBSHD);
  const double h = 1e-5;
  ExpectFiniteDifferences(f, f.q.storage.data(), f.q.storage.size(), h, g.dq.storage, "dq");
  ExpectFiniteDifferences(f, f.k.storage.data(), f.k.storage.size(), h, g.dk.storage, "dk");
  ExpectFiniteDifferences(f, f.v.storage.data(), f.v.storage.size(), h, g.dv.storage, "dv");
  const double hf = std::ldexp(1.0, -12);  // exact in float32 for |x| < 2^11
  if (c.kind == Kind::kT5)
    ExpectFiniteDifferences(f, f.t5()->data(), Z(rows * c.H), hf, g.t5, "t5 table");
  if (c.kind == Kind::kShaw) {
    std::vector<float>& ak = f.tables.a_key;
    std::vector<float>& av = f.tables.a_value;
    ExpectFiniteDifferences(f, ak.data(), ak.size(), hf, g.a_key, "shaw a_key");
    ExpectFiniteDifferences(f, av.data(), av.size(), hf, g.a_value, "shaw a_value");
  }
}

TEST(FlashBackwardFiniteDifferences, EveryScheme) {
  for (Kind kind : {Kind::kNone, Kind::kRope, Kind::kAlibi, Kind::kT5, Kind::kShaw}) {
    for (AttentionMask mask : {kCausal, kBidir}) {
      Case c = Make(std::string("fd ") + std::string(KindName(kind)) + " " +
                        std::string(AttentionMaskName(mask)),
                    kind, mask);
      c.dtype = DType::kFloat64;
      c.H = 2;
      c.Hkv = 1;
      c.Sq = 3;
      c.Sk = 5;
      c.D = c.Dv = 4;
      c.query_tile = 2;
      c.key_tile = 3;
      CheckFiniteDifferences(c);
    }
  }
}

// ---- The forward's log-sum-exp ----

TEST(FlashAttentionWithLse, MatchesFloat64LogSumExpAndMarksEmptyRows) {
  const Case c = WithExplicitPositions(Make("lse", Kind::kT5, kCausal), 31);
  Fixture f(c);
  std::vector<float> out(Z(c.B * c.Sq * c.H * c.Dv)), lse(Z(c.B * c.H * c.Sq), NAN);
  FlashAttentionWithLse(f.params, f.q.view, f.k.view, f.v.view,
                        TensorView::Contiguous(out.data(), DType::kFloat32, {c.B, c.Sq, c.H, c.Dv}),
                        TensorView::Contiguous(lse.data(), DType::kFloat32, {c.B, c.H, c.Sq}));
  const std::vector<double> q = Canonical(f.q.view, c.layout), k = Canonical(f.k.view, c.layout);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
  bool any_empty = false;
  for (Index b = 0; b < c.B; ++b)
    for (Index h = 0; h < c.H; ++h)
      for (Index i = 0; i < c.Sq; ++i) {
        const Index p = f.qids[Z(b * c.Sq + i)];
        std::vector<double> logits;
        for (Index j = 0; j < c.Sk; ++j) {
          const Index r = f.kids[Z(b * c.Sk + j)];
          if (!f.Visible(p, r)) continue;
          double dot = 0.0;
          for (Index x = 0; x < c.D; ++x) {
            dot += q[Z(((b * c.H + h) * c.Sq + i) * c.D + x)] *
                   k[Z(((b * c.Hkv + h) * c.Sk + j) * c.D + x)];
          }
          logits.push_back(scale * dot + f.t5()->Bias(h, p, r));
        }
        const float got = lse[Z((b * c.H + h) * c.Sq + i)];
        if (logits.empty()) {
          any_empty = true;
          EXPECT_EQ(got, -INFINITY);
          continue;
        }
        const double mx = *std::max_element(logits.begin(), logits.end());
        double sum = 0.0;
        for (double x : logits) sum += std::exp(x - mx);
        EXPECT_NEAR(got, mx + std::log(sum), 1e-5 * std::max(1.0, std::abs(mx)));
      }
  EXPECT_TRUE(any_empty);
}

// ---- Bad inputs: one test each ----

struct BadFixture {
  std::vector<float> q = std::vector<float>(64, 0.5f), k = q, v = q, out = q, dout = q;
  std::vector<float> dq = q, dk = q, dv = q, lse = std::vector<float>(8, 1.0f);
  TensorView View(std::vector<float>& data, std::int64_t d = 8) {
    return TensorView::Contiguous(data.data(), DType::kFloat32, {1, 4, 2, d});
  }
  TensorView Lse() { return TensorView::Contiguous(lse.data(), DType::kFloat32, {1, 2, 4}); }
  AttentionGrads Grads() { return MakeGrads(View(dq), View(dk), View(dv)); }
  void Backward(const AttentionParams& p, const AttentionGrads& g, const TensorView& lse_view,
                const FlashAttentionOptions& o = {}) {
    FlashAttentionBackward(p, View(q), View(k), View(v), View(out), View(dout), lse_view, g, o);
  }
};

TEST(FlashBackwardBadInput, DoutShape) {
  BadFixture f;
  ExpectInvalid(
      [&] {
        FlashAttentionBackward({}, f.View(f.q), f.View(f.k), f.View(f.v), f.View(f.out),
                               f.View(f.dout, 4), f.Lse(), f.Grads());
      },
      "dout");
}

TEST(FlashBackwardBadInput, OutShape) {
  BadFixture f;
  ExpectInvalid(
      [&] {
        FlashAttentionBackward({}, f.View(f.q), f.View(f.k), f.View(f.v), f.View(f.out, 4),
                               f.View(f.dout), f.Lse(), f.Grads());
      },
      "out");
}

TEST(FlashBackwardBadInput, LseShape) {
  BadFixture f;
  ExpectInvalid(
      [&] {
        f.Backward({}, f.Grads(), TensorView::Contiguous(f.lse.data(), DType::kFloat32, {1, 4, 2}));
      },
      "lse");
}

TEST(FlashBackwardBadInput, LseDtype) {
  BadFixture f;
  ExpectInvalid(
      [&] {
        f.Backward({}, f.Grads(), TensorView::Contiguous(f.lse.data(), DType::kFloat16, {1, 2, 4}));
      },
      "lse.dtype");
}

TEST(FlashBackwardBadInput, LseNaN) {
  BadFixture f;
  f.lse[5] = NAN;
  ExpectInvalid([&] { f.Backward({}, f.Grads(), f.Lse()); }, "lse[0, 1, 1]");
}

TEST(FlashBackwardBadInput, DqShape) {
  BadFixture f;
  AttentionGrads g = f.Grads();
  g.dq = f.View(f.dq, 4);
  ExpectInvalid([&] { f.Backward({}, g, f.Lse()); }, "grads.dq");
}

TEST(FlashBackwardBadInput, DkShape) {
  BadFixture f;
  AttentionGrads g = f.Grads();
  g.dk = TensorView::Contiguous(f.dk.data(), DType::kFloat32, {1, 4, 1, 8});
  ExpectInvalid([&] { f.Backward({}, g, f.Lse()); }, "grads.dk");
}

TEST(FlashBackwardBadInput, DvMissing) {
  BadFixture f;
  AttentionGrads g = f.Grads();
  g.dv = TensorView{};
  ExpectInvalid([&] { f.Backward({}, g, f.Lse()); }, "grads.dv");
}

TEST(FlashBackwardBadInput, DqOverlapsQ) {
  BadFixture f;
  AttentionGrads g = f.Grads();
  g.dq = f.View(f.q);
  ExpectInvalid([&] { f.Backward({}, g, f.Lse()); }, "grads.dq");
}

TEST(FlashBackwardBadInput, DkOverlapsDq) {
  BadFixture f;
  AttentionGrads g = f.Grads();
  g.dk = f.View(f.dq);
  ExpectInvalid([&] { f.Backward({}, g, f.Lse()); }, "grads.dk");
}

TEST(FlashBackwardBadInput, DvOverlapsDout) {
  BadFixture f;
  AttentionGrads g = f.Grads();
  g.dv = f.View(f.dout);
  ExpectInvalid([&] { f.Backward({}, g, f.Lse()); }, "grads.dv");
}

TEST(FlashBackwardBadInput, T5TableGradShape) {
  BadFixture f;
  T5BiasTable table(T5BucketParams{}, 2);
  AttentionParams p;
  p.scheme = T5Scheme(table);
  std::vector<float> grad(64);
  AttentionGrads g = f.Grads();
  g.scheme.Set("table", TensorView::Contiguous(grad.data(), DType::kFloat32, {32, 1}));
  ExpectInvalid([&] { f.Backward(p, g, f.Lse()); }, "grads.scheme.table");
}

TEST(FlashBackwardBadInput, ShawKeyGradShape) {
  BadFixture f;
  ShawParams sp;
  sp.clip = 2;
  sp.head_dim = 8;
  std::vector<float> ak(40), av(40), grad(40);
  AttentionParams p;
  p.scheme = ShawScheme(sp, TensorView::Contiguous(ak.data(), DType::kFloat32, {5, 8}),
                        TensorView::Contiguous(av.data(), DType::kFloat32, {5, 8}));
  AttentionGrads g = f.Grads();
  g.scheme.Set("a_key", TensorView::Contiguous(grad.data(), DType::kFloat32, {4, 8}));
  ExpectInvalid([&] { f.Backward(p, g, f.Lse()); }, "grads.scheme.a_key");
}

TEST(FlashBackwardBadInput, ShawValueGradOverlapsTable) {
  BadFixture f;
  ShawParams sp;
  sp.clip = 2;
  sp.head_dim = 8;
  std::vector<float> ak(40), av(40);
  AttentionParams p;
  const TensorView av_view = TensorView::Contiguous(av.data(), DType::kFloat32, {5, 8});
  p.scheme = ShawScheme(sp, TensorView::Contiguous(ak.data(), DType::kFloat32, {5, 8}), av_view);
  AttentionGrads g = f.Grads();
  g.scheme.Set("a_value", av_view);
  ExpectInvalid([&] { f.Backward(p, g, f.Lse()); }, "grads.scheme.a_value");
}

TEST(FlashBackwardBadInput, UnsupportedScheme) {
  BadFixture f;
  AttentionParams p;
  p.scheme = PositionScheme::Registered("deberta");
  ExpectInvalid([&] { f.Backward(p, f.Grads(), f.Lse()); }, "scheme.name");
}

TEST(FlashBackwardBadInput, KeyTileZero) {
  BadFixture f;
  FlashAttentionOptions o;
  o.key_tile = 0;
  ExpectInvalid([&] { f.Backward({}, f.Grads(), f.Lse(), o); }, "key_tile");
}

TEST(FlashAttentionWithLseBadInput, LseShape) {
  BadFixture f;
  ExpectInvalid(
      [&] {
        FlashAttentionWithLse({}, f.View(f.q), f.View(f.k), f.View(f.v), f.View(f.out),
                              TensorView::Contiguous(f.lse.data(), DType::kFloat32, {2, 4}));
      },
      "lse");
}

TEST(FlashAttentionWithLseBadInput, LseOverlapsOut) {
  BadFixture f;
  ExpectInvalid(
      [&] {
        FlashAttentionWithLse({}, f.View(f.q), f.View(f.k), f.View(f.v), f.View(f.out),
                              TensorView::Contiguous(f.out.data(), DType::kFloat32, {1, 2, 4}));
      },
      "lse");
}

// ---- Peak extra memory ----

// Runs in a forked child: the peak extra KiB of one backward (lse
// recomputed, so pass 0 is included), or -1 for a non-finite gradient.
long MeasureBackward(Index seq, Index heads) {
  const Index d = 64;
  const auto n = Z(seq * heads * d);
  std::vector<float> q(n), k(n), v(n), out(n), dout(n), dq(n), dk(n), dv(n);
  for (std::size_t i = 0; i < n; ++i) {  // pre-faults every page
    q[i] = std::sin(0.001f * static_cast<float>(i));
    k[i] = std::cos(0.002f * static_cast<float>(i));
    v[i] = std::sin(0.003f * static_cast<float>(i) + 1.0f);
    dout[i] = std::cos(0.005f * static_cast<float>(i));
    dq[i] = dk[i] = dv[i] = 0.0f;
  }
  AttentionParams params;
  params.scheme = AlibiScheme(AlibiSlopes(heads));
  const Context ctx(2);
  auto view = [&](std::vector<float>& x) {
    return TensorView::Contiguous(x.data(), DType::kFloat32, {1, seq, heads, d});
  };
  // out only enters D_i = dO_i . out_i: any finite values measure the same
  // memory (no forward here, so its scratch does not mask the high-water mark).
  for (std::size_t i = 0; i < n; ++i) out[i] = std::sin(0.007f * static_cast<float>(i));
  const long before = MaxRssKiB();
  FlashAttentionBackward(params, view(q), view(k), view(v), view(out), view(dout), TensorView{},
                         MakeGrads(view(dq), view(dk), view(dv)), FlashAttentionOptions{}, ctx);
  const long after = MaxRssKiB();
  for (const auto* g : {&dq, &dk, &dv}) {
    for (float x : *g) {
      if (!std::isfinite(x)) return -1;
    }
  }
  return after - before;
}

TEST(FlashBackwardMemory, S8192AlibiPeakExtraUnder32MiB) {
  ExpectPeakExtraMemoryBelow([] { return MeasureBackward(8192, 2); }, 32 * 1024,
                             "S = 8192 x 2 heads", "-1: non-finite gradient");
}

}  // namespace
}  // namespace posenc::flash_test
