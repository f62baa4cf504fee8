// FIRE (posenc/fire.h, src/attention/schemes/fire.cc), the scheme added by
// following docs/ARCHITECTURE.md "Adding a positional scheme":
//  - the bias against the paper's formula written out here (float64), its
//    progressive-interpolation properties (x in [0, 1], distance-only below
//    |L|, not past it);
//  - the reference attention against a plain float64 attention with the
//    bias materialised, and its gradients (q, k, v and all six tensors)
//    against central finite differences;
//  - the fused forward (2x rule vs a plain float32 attention) and backward
//    against the reference on odd sizes, GQA, windows, bhsd, explicit and
//    long positions (up to 2^24 - 1), both threshold regimes (table of
//    distances and per-pair rows), every compiled SIMD target and the
//    scalar backend;
//  - bad input: one test per rejected argument.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "flash_test_util.h"
#include "posenc/fire.h"
#include "posenc/scheme.h"
#include "simd_target_fixture.h"

namespace posenc {
namespace {

using flash_test::Canonical;
using flash_test::ExpectInvalid;
using flash_test::MaxAbs;
using flash_test::MaxErr;
using flash_test::RandomFloats;
using Index = std::int64_t;

std::size_t Z(Index i) { return static_cast<std::size_t>(i); }

// The paper's formula, written out independently of the library.
double PaperBias(const FireWeights& w, Index h, Index p, Index r, double eps = 1e-6) {
  const Index hidden = static_cast<Index>(w.w1.size());
  const double psi_d = std::log(std::abs(w.c * static_cast<double>(p - r)) + 1.0);
  const double m = std::max(static_cast<double>(p), std::abs(w.threshold));
  const double x = psi_d / (std::log(std::abs(w.c * m) + 1.0) + eps);
  double b = w.b2[Z(h)];
  for (Index u = 0; u < hidden; ++u) {
    b += w.w2[Z(h * hidden + u)] * std::max(0.0, w.w1[Z(u)] * x + w.b1[Z(u)]);
  }
  return b;
}

TEST(FireBias, MatchesThePaperFormula) {
  FireWeights w = FireInit(3, 16, 7);
  for (double threshold : {512.0, 6.0, -9.5}) {
    w.threshold = threshold;
    const Index sq = 12, sk = 40;
    std::vector<double> out(Z(3 * sq * sk));
    FireBiasMatrix(w.View(), {}, 3, 20, sq, sk,
                   TensorView::Contiguous(out.data(), DType::kFloat64, {3, sq, sk}));
    for (Index h = 0; h < 3; ++h)
      for (Index i = 0; i < sq; ++i)
        for (Index j = 0; j < sk; ++j) {
          EXPECT_NEAR(out[Z((h * sq + i) * sk + j)], PaperBias(w, h, 20 + i, j), 1e-13)
              << "L " << threshold << " h " << h << " i " << i << " j " << j;
        }
  }
}

TEST(FireBias, ProgressiveInterpolation) {
  // x = psi(d) / psi(max(p, |L|)) lies in [0, 1] for 0 <= d <= p, so the
  // bias of a key at distance d depends only on d while p <= |L| and is
  // re-normalised past |L| (distance p maps to x ~ 1 at every length).
  FireWeights w = FireInit(1, 8, 3);
  w.w1.assign(8, 1.0);  // make b an increasing function of x (relu(x + b1))
  w.w2.assign(8, 1.0);
  w.threshold = 32.0;
  const Index n = 200;
  std::vector<double> out(Z(n * n));
  FireBiasMatrix(w.View(), {}, 1, 0, n, n,
                 TensorView::Contiguous(out.data(), DType::kFloat64, {1, n, n}));
  auto b = [&](Index p, Index r) { return out[Z(p * n + r)]; };
  for (Index d = 0; d <= 20; ++d) EXPECT_NEAR(b(20, 20 - d), b(31, 31 - d), 1e-15) << d;
  EXPECT_GT(std::abs(b(100, 90) - b(150, 140)), 1e-3);  // past |L|: depends on p
  // The farthest key of every row past |L| sees the same normalised distance.
  EXPECT_NEAR(b(100, 0), b(199, 0), 0.05 * std::abs(b(100, 0)) + 1e-2);
}

// ---- attention cases ----

struct FireCase {
  Index B = 2, H = 4, Hkv = 2, Sq = 37, Sk = 37, D = 12, Dv = 12, hidden = 8;
  double threshold = 512.0;
  AttentionLayout layout = AttentionLayout::kBSHD;
  std::optional<Index> window;
  Index position_offset = -1;  // >= 0: explicit positions offset + i (queries) / + j (keys)
  FlashAttentionOptions options{};
  Backend backend = Backend::kAuto;
};

struct FireFixture {
  FireCase c;
  FireWeights w;
  std::vector<float> q, k, v;
  std::vector<Index> qpos, kpos;
  AttentionParams params;

  explicit FireFixture(const FireCase& fc) : c(fc), w(FireInit(fc.H, fc.hidden, 11)) {
    w.threshold = c.threshold;
    q = RandomFloats(Z(c.B * c.Sq * c.H * c.D), 1);
    k = RandomFloats(Z(c.B * c.Sk * c.Hkv * c.D), 2);
    v = RandomFloats(Z(c.B * c.Sk * c.Hkv * c.Dv), 3);
    params.layout = c.layout;
    params.sliding_window = c.window;
    params.scheme = FireScheme(w.View());
    if (c.position_offset >= 0) {
      for (Index i = 0; i < c.Sq; ++i) qpos.push_back(c.position_offset + c.Sk - c.Sq + i);
      for (Index j = 0; j < c.Sk; ++j) kpos.push_back(c.position_offset + j);
      params.query_positions = Positions::Ids(qpos.data(), c.Sq);
      params.key_positions = Positions::Ids(kpos.data(), c.Sk);
    }
  }
  TensorView View(std::vector<float>& x, Index s, Index h, Index d) {
    return flash_test::AttentionView(x.data(), DType::kFloat32, c.layout, c.B, s, h, d);
  }
  TensorView Q() { return View(q, c.Sq, c.H, c.D); }
  TensorView K() { return View(k, c.Sk, c.Hkv, c.D); }
  TensorView V() { return View(v, c.Sk, c.Hkv, c.Dv); }
  Index QPos(Index i) const { return c.position_offset >= 0 ? qpos[Z(i)] : c.Sk - c.Sq + i; }
  Index KPos(Index j) const { return c.position_offset >= 0 ? kpos[Z(j)] : j; }
  bool Visible(Index p, Index r) const {
    return r <= p && (!c.window.has_value() || p - r < *c.window);
  }
};

// Plain attention with the bias materialised (T = float: the naive float32
// computation of the 2x rule; T = double: an independent oracle), [B, H, Sq, Dv].
template <typename T>
std::vector<double> Plain(const FireFixture& f) {
  const FireCase& c = f.c;
  std::vector<double> out;
  const Index g = c.H / c.Hkv;
  auto at = [&](const std::vector<float>& x, Index b, Index s, Index h, Index S, Index Hh, Index d,
                Index x_i) {
    return c.layout == AttentionLayout::kBSHD ? x[Z(((b * S + s) * Hh + h) * d + x_i)]
                                              : x[Z(((b * Hh + h) * S + s) * d + x_i)];
  };
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(c.D)));
  for (Index b = 0; b < c.B; ++b)
    for (Index h = 0; h < c.H; ++h)
      for (Index i = 0; i < c.Sq; ++i) {
        std::vector<T> s(Z(c.Sk), -INFINITY);
        T mx = -INFINITY;
        for (Index j = 0; j < c.Sk; ++j) {
          if (!f.Visible(f.QPos(i), f.KPos(j))) continue;
          T dot = 0;
          for (Index x = 0; x < c.D; ++x) {
            dot += static_cast<T>(at(f.q, b, i, h, c.Sq, c.H, c.D, x)) *
                   static_cast<T>(at(f.k, b, j, h / g, c.Sk, c.Hkv, c.D, x));
          }
          s[Z(j)] = dot * scale + static_cast<T>(PaperBias(f.w, h, f.QPos(i), f.KPos(j)));
          mx = std::max(mx, s[Z(j)]);
        }
        T sum = 0;
        for (T& e : s) sum += (e = std::isinf(e) ? T(0) : std::exp(e - mx));
        for (Index x = 0; x < c.Dv; ++x) {
          T acc = 0;
          for (Index j = 0; j < c.Sk; ++j) {
            acc += s[Z(j)] * static_cast<T>(at(f.v, b, j, h / g, c.Sk, c.Hkv, c.Dv, x));
          }
          out.push_back(static_cast<double>(acc / sum));
        }
      }
  return out;
}

std::vector<double> Forward(FireFixture& f, bool flash) {
  std::vector<float> out(Z(f.c.B * f.c.Sq * f.c.H * f.c.Dv));
  const TensorView o = f.View(out, f.c.Sq, f.c.H, f.c.Dv);
  const Context ctx(2, f.c.backend);
  if (flash) {
    FlashAttention(f.params, f.Q(), f.K(), f.V(), o, f.c.options, ctx);
  } else {
    std::vector<double> o64(out.size());
    const TensorView ov = flash_test::AttentionView(o64.data(), DType::kFloat64, f.c.layout, f.c.B,
                                                    f.c.Sq, f.c.H, f.c.Dv);
    AttentionReference(f.params, f.Q(), f.K(), f.V(), ov, nullptr, ctx);
    return Canonical(ov, f.c.layout);
  }
  return Canonical(o, f.c.layout);
}

// All gradients of one backward: dq, dk, dv, then w1, b1, w2, b2, c, L.
struct Grads {
  std::vector<double> dq, dk, dv;
  std::vector<std::vector<double>> tables;
};

Grads RunBackward(FireFixture& f, bool flash) {
  const FireCase& c = f.c;
  std::vector<double> dq(f.q.size()), dk(f.k.size()), dv(f.v.size());
  const std::vector<float> dout32 = RandomFloats(Z(c.B * c.Sq * c.H * c.Dv), 9);
  std::vector<double> dout(dout32.begin(), dout32.end());
  auto view64 = [&](std::vector<double>& x, Index s, Index h, Index d) {
    return flash_test::AttentionView(x.data(), DType::kFloat64, c.layout, c.B, s, h, d);
  };
  AttentionGrads g;
  g.dq = view64(dq, c.Sq, c.H, c.D);
  g.dk = view64(dk, c.Sk, c.Hkv, c.D);
  g.dv = view64(dv, c.Sk, c.Hkv, c.Dv);
  Grads result;
  result.tables = {std::vector<double>(Z(c.hidden)),
                   std::vector<double>(Z(c.hidden)),
                   std::vector<double>(Z(c.H * c.hidden)),
                   std::vector<double>(Z(c.H)),
                   std::vector<double>(1),
                   std::vector<double>(1)};
  const char* names[] = {"w1", "b1", "w2", "b2", "c", "threshold"};
  const std::vector<std::vector<Index>> shapes = {{c.hidden}, {c.hidden}, {c.H, c.hidden},
                                                  {c.H},      {1},        {1}};
  for (std::size_t t = 0; t < 6; ++t) {
    TensorView v;
    v.data = result.tables[t].data();
    v.dtype = DType::kFloat64;
    v.rank = static_cast<int>(shapes[t].size());
    for (int d = 0; d < v.rank; ++d) v.shape[Z(d)] = shapes[t][Z(d)];
    v.strides[Z(v.rank - 1)] = 1;
    if (v.rank == 2) v.strides[0] = v.shape[1];
    g.scheme.Set(names[t], v);
  }
  const TensorView dov = view64(dout, c.Sq, c.H, c.Dv);
  if (flash) {
    std::vector<float> out(Z(c.B * c.Sq * c.H * c.Dv)), lse(Z(c.B * c.H * c.Sq));
    const TensorView o = f.View(out, c.Sq, c.H, c.Dv);
    const TensorView l = TensorView::Contiguous(lse.data(), DType::kFloat32, {c.B, c.H, c.Sq});
    const Context ctx(2, c.backend);
    FlashAttentionWithLse(f.params, f.Q(), f.K(), f.V(), o, l, c.options, ctx);
    FlashAttentionBackward(f.params, f.Q(), f.K(), f.V(), o, dov, l, g, c.options, ctx);
  } else {
    AttentionReferenceBackward(f.params, f.Q(), f.K(), f.V(), dov, g);
  }
  result.dq = Canonical(g.dq, c.layout);
  result.dk = Canonical(g.dk, c.layout);
  result.dv = Canonical(g.dv, c.layout);
  return result;
}

void ExpectFlashMatches(FireCase c, const std::string& what) {
  FireFixture f(c);
  const std::vector<double> oracle = Plain<double>(f);
  const std::vector<double> reference = Forward(f, false);
  EXPECT_LT(MaxErr(reference, oracle), 1e-12) << what << ": reference vs plain float64";
  flash_test::ExpectWithin2x(Forward(f, true), Plain<float>(f), oracle, 2e-6, 1e-3, what);
  const Grads ref = RunBackward(f, false), fl = RunBackward(f, true);
  auto close = [&](const std::vector<double>& a, const std::vector<double>& b,
                   const std::string& name) {
    EXPECT_LE(MaxErr(a, b), 2e-5 * (1.0 + MaxAbs(b))) << what << " " << name;
  };
  close(fl.dq, ref.dq, "dq");
  close(fl.dk, ref.dk, "dk");
  close(fl.dv, ref.dv, "dv");
  const char* names[] = {"w1", "b1", "w2", "b2", "c", "threshold"};
  for (std::size_t t = 0; t < 6; ++t) close(fl.tables[t], ref.tables[t], names[t]);
}

class FireFlash : public test::PerSimdTarget {};

TEST_P(FireFlash, DistanceTableAndRowPaths) {
  FireCase c;
  ExpectFlashMatches(c, "L above every position (per-distance table)");
  c.threshold = 9.0;  // queries past |L|: per-pair rows
  ExpectFlashMatches(c, "L = 9 (rows past |L|)");
  c.threshold = -9.0;  // |L| is what counts
  ExpectFlashMatches(c, "L = -9");
}

TEST_P(FireFlash, OddShapesWindowsLayouts) {
  FireCase c;
  c.B = 1;
  c.H = 3;
  c.Hkv = 1;
  c.Sq = 5;
  c.Sk = 53;
  c.D = 7;
  c.Dv = 9;
  c.threshold = 30.0;
  c.layout = AttentionLayout::kBHSD;
  c.options.query_tile = 3;
  c.options.key_tile = 11;
  ExpectFlashMatches(c, "decode-like, MQA, bhsd, odd tiles");
  c.window = 13;
  ExpectFlashMatches(c, "sliding window 13");
}

TEST_P(FireFlash, LongPositionsUpTo2Pow24) {
  FireCase c;
  c.Sq = c.Sk = 33;
  c.position_offset = kMaxPosition - 32;  // last key at 2^24 - 1
  c.threshold = 1 << 20;
  ExpectFlashMatches(c, "positions near 2^24, L = 2^20");
  c.threshold = kMaxPosition;
  ExpectFlashMatches(c, "positions near 2^24, L = 2^24 - 1");
}

POSENC_INSTANTIATE_PER_SIMD_TARGET(FireFlash);

TEST(FireFlashScalar, MatchesReference) {
  FireCase c;
  c.backend = Backend::kScalar;
  c.threshold = 20.0;
  ExpectFlashMatches(c, "scalar backend");
}

TEST(FireReference, GradientsMatchFiniteDifferences) {
  FireCase c;
  c.B = 1;
  c.H = 2;
  c.Hkv = 1;
  c.Sq = c.Sk = 9;
  c.D = c.Dv = 4;
  c.hidden = 5;
  c.threshold = 5.5;  // both regimes inside the sequence
  FireFixture f(c);
  const Grads g = RunBackward(f, false);
  const std::vector<float> dout32 = RandomFloats(Z(c.B * c.Sq * c.H * c.Dv), 9);
  auto loss = [&]() {
    const std::vector<double> out = Forward(f, false);  // [B, H, Sq, Dv]; dout in bshd order
    double s = 0.0;
    for (Index h = 0; h < c.H; ++h)
      for (Index i = 0; i < c.Sq; ++i)
        for (Index x = 0; x < c.Dv; ++x)
          s += out[Z((h * c.Sq + i) * c.Dv + x)] * dout32[Z((i * c.H + h) * c.Dv + x)];
    return s;
  };
  auto check = [&](double& param, double analytic, const std::string& name) {
    const double h = 1e-5 * std::max(1.0, std::abs(param)), keep = param;
    param = keep + h;
    f.params.scheme = FireScheme(f.w.View());
    const double up = loss();
    param = keep - h;
    f.params.scheme = FireScheme(f.w.View());
    const double down = loss();
    param = keep;
    f.params.scheme = FireScheme(f.w.View());
    EXPECT_NEAR(analytic, (up - down) / (2 * h), 1e-6 * (1.0 + std::abs(analytic))) << name;
  };
  for (Index u = 0; u < c.hidden; ++u) {
    check(f.w.w1[Z(u)], g.tables[0][Z(u)], "w1");
    check(f.w.b1[Z(u)], g.tables[1][Z(u)], "b1");
  }
  for (Index e = 0; e < c.H * c.hidden; ++e) check(f.w.w2[Z(e)], g.tables[2][Z(e)], "w2");
  check(f.w.c, g.tables[4][0], "c");
  check(f.w.threshold, g.tables[5][0], "threshold");
  // b2 shifts a whole row's logits: its exact gradient is zero.
  for (Index h = 0; h < c.H; ++h) EXPECT_NEAR(g.tables[3][Z(h)], 0.0, 1e-12);
  EXPECT_GT(std::abs(g.tables[5][0]), 1e-8);  // rows with p < |L| feel L
}

// ---- bad input ----

struct BadFire {
  FireWeights w = FireInit(2, 4, 1);
  std::vector<float> q = RandomFloats(2 * 3 * 8, 1), out = std::vector<float>(2 * 3 * 8);
  TensorView Q() { return TensorView::Contiguous(q.data(), DType::kFloat32, {1, 3, 2, 8}); }
  TensorView O() { return TensorView::Contiguous(out.data(), DType::kFloat32, {1, 3, 2, 8}); }
  void Call(const PositionScheme& s, AttentionMask mask = AttentionMask::kCausal) {
    AttentionParams p;
    p.mask = mask;
    p.scheme = s;
    FlashAttention(p, Q(), Q(), Q(), O());
  }
};

TEST(FireBadInput, BidirectionalMask) {
  BadFire b;
  ExpectInvalid([&] { b.Call(FireScheme(b.w.View()), AttentionMask::kBidirectional); }, "mask");
}
TEST(FireBadInput, OutputWeightsOfWrongShape) {
  BadFire b;
  FireTensors t = b.w.View();
  t.w2 = TensorView::Contiguous(b.w.w2.data(), DType::kFloat64, {4, 2});
  ExpectInvalid([&] { b.Call(FireScheme(t)); }, "scheme.fire.w2");
}
TEST(FireBadInput, NonFiniteScale) {
  BadFire b;
  b.w.c = std::nan("");
  ExpectInvalid([&] { b.Call(FireScheme(b.w.View())); }, "scheme.fire.c[0]");
}
TEST(FireBadInput, MissingThreshold) {
  BadFire b;
  SchemeArgs a;
  const FireTensors t = b.w.View();
  a.Tensor("w1", t.w1).Tensor("b1", t.b1).Tensor("w2", t.w2).Tensor("b2", t.b2).Tensor("c", t.c);
  ExpectInvalid([&] { b.Call(PositionScheme::Registered("fire", a)); }, "scheme.fire.threshold");
}
TEST(FireBadInput, UnknownArgument) {
  BadFire b;
  PositionScheme s = FireScheme(b.w.View());
  s.args.Number("temperature", 1.0);
  ExpectInvalid([&] { b.Call(s); }, "scheme argument: got temperature");
}
TEST(FireBadInput, ThresholdPastTheLongestPosition) {
  BadFire b;
  b.w.threshold = 1e9;
  ExpectInvalid([&] { b.Call(FireScheme(b.w.View())); }, "scheme.fire.threshold");
}
TEST(FireBadInput, Epsilon) {
  BadFire b;
  ExpectInvalid([&] { b.Call(FireScheme(b.w.View(), FireParams{0.0})); }, "scheme.fire.eps");
}
TEST(FireBadInput, InitSizes) {
  ExpectInvalid([] { FireInit(0, 4, 1); }, "heads");
  ExpectInvalid([] { FireInit(2, kMaxFireHidden + 1, 1); }, "hidden");
}
TEST(FireRegistry, Declared) {
  const SchemeInfo& info = FindScheme("fire");
  EXPECT_TRUE(info.Fused());
  EXPECT_EQ(info.masks, SchemeMasks::kCausalOnly);
  EXPECT_TRUE(info.Has(SchemeTerm::kBias));
  int trainable = 0;
  for (const SchemeArgDecl& a : info.args) trainable += a.grad == SchemeArgGrad::kTrainable;
  EXPECT_EQ(trainable, 6);
  EXPECT_NE(SchemeNames(/*fused_only=*/true).find("fire"), std::string::npos);
}

}  // namespace
}  // namespace posenc
