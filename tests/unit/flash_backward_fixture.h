// Shared fixture of the flash attention backward tests
// (flash_backward_test.cc, flash_backward_checks_test.cc): the cases, their
// inputs, a plain float32 backward and the 2x-rule check against the float64
// oracle AttentionReferenceBackward.
//
// Tolerance (FlashAttention's test rule): for every gradient, the error
// against the oracle is at most 2x the error of the plain float32 backward
// written here (same inputs, whole rows, float32 sums, D from the same
// forward output) plus 8 float32 roundings (2^-24) of max(1, the oracle's
// largest value): a floor for rows where dS is pure rounding noise (a query
// with one visible key has P = 1 and dS = dP - D = 0 exactly, so both
// float32 results are noise of the size of dP's rounding).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "posenc/flash_attention.h"

namespace posenc::flash_backward_test {

using Kind = PositionScheme::Kind;
using Index = std::int64_t;
constexpr auto kCausal = AttentionMask::kCausal;
constexpr auto kBidir = AttentionMask::kBidirectional;

inline std::size_t Z(Index i) { return static_cast<std::size_t>(i); }

struct Case {
  std::string name;
  Kind kind = Kind::kNone;
  AttentionMask mask = kCausal;
  std::optional<Index> window;
  Index B = 1, H = 2, Hkv = 2, Sq = 37, Sk = 37, D = 64, Dv = 64;
  AttentionLayout layout = AttentionLayout::kBSHD;
  Index query_tile = 16, key_tile = 16;
  FlashRopeKeys rope_keys = FlashRopeKeys::kRotate;
  bool explicit_positions = false;  // shuffled ids per row; Sq may exceed Sk
  DType dtype = DType::kFloat32;    // of q, k, v, dout
  int threads = 1;
  Backend backend = Backend::kAuto;
  bool pass_lse = true;  // false: the backward recomputes lse
};

inline Case Make(std::string name, Kind kind, AttentionMask mask) {
  Case c;
  c.name = std::move(name);
  c.kind = kind;
  c.mask = mask;
  return c;
}

// A tensor of any dtype over 8-byte storage, filled with N(0, 1) values
// rounded to the dtype.
struct Tensor {
  std::vector<double> storage;
  TensorView view;
  Tensor() = default;
  Tensor(DType dtype, AttentionLayout layout, Index b, Index s, Index h, Index d,
         std::optional<std::uint32_t> seed) {
    storage.assign(Z(b * s * h * d), 0.0);
    view = layout == AttentionLayout::kBSHD
               ? TensorView::Contiguous(storage.data(), dtype, {b, s, h, d})
               : TensorView::Contiguous(storage.data(), dtype, {b, h, s, d});
    std::mt19937 gen(seed.value_or(0));
    std::normal_distribution<double> dist(0.0, 1.0);
    for (Index i = 0; i < view.NumElements(); ++i) {
      StoreFromDouble(view.data, dtype, i, seed ? dist(gen) : std::nan(""));
    }
  }
};

inline AttentionGrads MakeGrads(const TensorView& dq, const TensorView& dk, const TensorView& dv) {
  AttentionGrads g;
  g.dq = dq;
  g.dk = dk;
  g.dv = dv;
  return g;
}

// A rank-4 attention view in [B, H, S, D] order as doubles.
inline std::vector<double> Canonical(const TensorView& view, AttentionLayout layout) {
  const AttentionDims d = GetAttentionDims(view, layout, "view");
  std::vector<double> out;
  for (Index b = 0; b < d.batch; ++b)
    for (Index h = 0; h < d.heads; ++h)
      for (Index s = 0; s < d.seq; ++s)
        for (Index x = 0; x < d.head_dim; ++x)
          out.push_back(LoadAsDouble(
              view.data, view.dtype,
              b * d.stride_batch + h * d.stride_head + s * d.stride_seq + x * d.stride_dim));
  return out;
}

inline std::vector<float> RandomFloats(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// Inputs and scheme tables of one case.
struct Fixture {
  Case c;
  Tensor q, k, v, dout;
  std::vector<Index> qids, kids;
  std::unique_ptr<T5BiasTable> t5;
  std::vector<float> a_key, a_value;
  AttentionParams params;

  explicit Fixture(const Case& cs)
      : c(cs),
        q(c.dtype, c.layout, c.B, c.Sq, c.H, c.D, 11),
        k(c.dtype, c.layout, c.B, c.Sk, c.Hkv, c.D, 12),
        v(c.dtype, c.layout, c.B, c.Sk, c.Hkv, c.Dv, 13),
        dout(c.dtype, c.layout, c.B, c.Sq, c.H, c.Dv, 14) {
    params.layout = c.layout;
    params.mask = c.mask;
    params.sliding_window = c.window;
    if (c.explicit_positions) {
      std::mt19937 gen(5);
      for (Index i = 0; i < c.B * c.Sq; ++i)
        qids.push_back(static_cast<Index>(gen() % (c.Sk + 10)));
      for (Index j = 0; j < c.B * c.Sk; ++j)
        kids.push_back(static_cast<Index>(gen() % (c.Sk + 10)));
      params.query_positions = Positions::Ids(qids.data(), c.B * c.Sq);
      params.key_positions = Positions::Ids(kids.data(), c.B * c.Sk);
    }
    switch (c.kind) {
      case Kind::kRope: {
        RopeParams r;
        r.head_dim = c.D;
        params.scheme = PositionScheme::FromRope(r);
        break;
      }
      case Kind::kAlibi: {
        std::vector<double> slopes;
        for (Index h = 0; h < c.H; ++h)
          slopes.push_back(std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(c.H)));
        params.scheme = PositionScheme::FromAlibi(slopes);
        break;
      }
      case Kind::kT5: {
        T5BucketParams tp;
        tp.direction = c.mask == kCausal ? T5Direction::kCausal : T5Direction::kBidirectional;
        t5 = std::make_unique<T5BiasTable>(tp, c.H);
        t5->InitNormal(3, 1.0);
        params.scheme = PositionScheme::FromT5(*t5);
        break;
      }
      case Kind::kShaw: {
        ShawParams sp;
        sp.clip = 5;
        sp.head_dim = c.D;
        a_key = RandomFloats(Z(sp.TableRows() * c.D), 15);
        a_value = RandomFloats(Z(sp.TableRows() * c.Dv), 16);
        params.scheme = PositionScheme::FromShaw(
            sp, TensorView::Contiguous(a_key.data(), DType::kFloat32, {sp.TableRows(), c.D}),
            TensorView::Contiguous(a_value.data(), DType::kFloat32, {sp.TableRows(), c.Dv}));
        break;
      }
      default:
        break;
    }
  }
  Positions QPos() const { return params.query_positions.value_or(Positions::Offset(c.Sk - c.Sq)); }
  Positions KPos() const { return params.key_positions.value_or(Positions::Offset(0)); }
  Index TableRows() const {
    if (c.kind == Kind::kT5) return t5->num_buckets();
    if (c.kind == Kind::kShaw) return params.scheme.shaw.params.TableRows();
    return 0;
  }
  bool Visible(Index p, Index r) const {
    bool vis = c.mask == kCausal ? r <= p : true;
    return c.window ? vis && std::llabs(p - r) < *c.window : vis;
  }
};

// All gradients of one case in [B, H, S, D] order (tables row-major).
struct Grads {
  std::vector<double> dq, dk, dv, t5, a_key, a_value;
};

// A plain float32 backward given the same inputs as the flash backward:
// whole rows of float32 logits and probabilities, float32 sums in row
// order, the same float32 position terms, D_i = dO_i . out_i from the same
// forward output `out` ([B, H, Sq, Dv]). `k_rotated`: k holds pre-rotated
// RoPE keys (dk stays in that frame).
inline Grads NaiveFloat32(Fixture& f, bool k_rotated, const std::vector<double>& out) {
  const Case& c = f.c;
  const auto load = [&](const Tensor& t) {
    const std::vector<double> d = Canonical(t.view, c.layout);
    return std::vector<float>(d.begin(), d.end());
  };
  std::vector<float> q = load(f.q), k = load(f.k), v = load(f.v), go = load(f.dout);
  const RopeParams& rope = f.params.scheme.rope;
  const TensorView qv = TensorView::Contiguous(q.data(), DType::kFloat32, {c.B, c.H, c.Sq, c.D});
  const TensorView kv = TensorView::Contiguous(k.data(), DType::kFloat32, {c.B, c.Hkv, c.Sk, c.D});
  if (c.kind == Kind::kRope) {
    ApplyRope(rope, qv, AttentionLayout::kBHSD, f.QPos());
    if (!k_rotated) ApplyRope(rope, kv, AttentionLayout::kBHSD, f.KPos());
  }
  const Index rows = f.TableRows(), D = c.D, Dv = c.Dv;
  std::vector<float> dq(q.size(), 0.0f), dk(k.size(), 0.0f), dv(v.size(), 0.0f);
  std::vector<float> gt5(Z(c.kind == Kind::kT5 ? rows * c.H : 0), 0.0f);
  std::vector<float> gak(Z(c.kind == Kind::kShaw ? rows * D : 0), 0.0f);
  std::vector<float> gav(Z(c.kind == Kind::kShaw ? rows * Dv : 0), 0.0f);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  const Positions qpos = f.QPos(), kpos = f.KPos();
  std::vector<float> s(Z(c.Sk)), dp(Z(c.Sk));
  for (Index b = 0; b < c.B; ++b)
    for (Index h = 0; h < c.H; ++h) {
      const Index hk = h / (c.H / c.Hkv);
      for (Index i = 0; i < c.Sq; ++i) {
        const float* qi = &q[Z(((b * c.H + h) * c.Sq + i) * D)];
        float* dqi = &dq[Z(((b * c.H + h) * c.Sq + i) * D)];
        const float* gi = &go[Z(((b * c.H + h) * c.Sq + i) * Dv)];
        const Index p = qpos.At(b, i, c.Sq);
        auto K = [&](Index j) { return Z(((b * c.Hkv + hk) * c.Sk + j) * D); };
        auto V = [&](Index j) { return Z(((b * c.Hkv + hk) * c.Sk + j) * Dv); };
        auto idx = [&](Index j) { return ShawIndex(5, p, kpos.At(b, j, c.Sk)); };
        float mx = -INFINITY;
        for (Index j = 0; j < c.Sk; ++j) {
          const Index r = kpos.At(b, j, c.Sk);
          float& x = s[Z(j)];
          if (!f.Visible(p, r)) {
            x = -INFINITY;
            continue;
          }
          x = 0.0f;
          for (Index t = 0; t < D; ++t) x += qi[t] * k[K(j) + Z(t)];
          if (c.kind == Kind::kShaw) {
            for (Index t = 0; t < D; ++t) x += qi[t] * f.a_key[Z(idx(j) * D + t)];
          }
          x *= scale;
          if (c.kind == Kind::kAlibi) {
            x -= static_cast<float>(f.params.scheme.alibi.slopes[Z(h)]) *
                 static_cast<float>(std::llabs(p - r));
          }
          if (c.kind == Kind::kT5) x += f.t5->Bias(h, p, r);
          mx = std::max(mx, x);
        }
        if (mx == -INFINITY) continue;
        float sum = 0.0f;
        for (Index j = 0; j < c.Sk; ++j) {
          s[Z(j)] = s[Z(j)] == -INFINITY ? 0.0f : std::exp(s[Z(j)] - mx);
          sum += s[Z(j)];
        }
        for (Index j = 0; j < c.Sk; ++j) {
          float& pj = s[Z(j)];
          pj /= sum;
          float d = 0.0f;
          for (Index x = 0; x < Dv; ++x) {
            const float val =
                v[V(j) + Z(x)] + (c.kind == Kind::kShaw ? f.a_value[Z(idx(j) * Dv + x)] : 0.0f);
            d += gi[x] * val;
          }
          dp[Z(j)] = d;
        }
        const double* oi = &out[Z(((b * c.H + h) * c.Sq + i) * Dv)];
        float delta = 0.0f;
        for (Index x = 0; x < Dv; ++x) delta += gi[x] * static_cast<float>(oi[x]);
        for (Index j = 0; j < c.Sk; ++j) {
          const float pj = s[Z(j)];
          if (pj == 0.0f) continue;
          const float ds = pj * (dp[Z(j)] - delta), g = scale * ds;
          for (Index x = 0; x < D; ++x) {
            dqi[x] +=
                g * (k[K(j) + Z(x)] + (c.kind == Kind::kShaw ? f.a_key[Z(idx(j) * D + x)] : 0.0f));
            dk[K(j) + Z(x)] += g * qi[x];
          }
          for (Index x = 0; x < Dv; ++x) dv[V(j) + Z(x)] += pj * gi[x];
          if (c.kind == Kind::kT5) {
            gt5[Z(f.t5->bucketer().BucketOf(p, kpos.At(b, j, c.Sk)) * c.H + h)] += ds;
          }
          if (c.kind == Kind::kShaw) {
            for (Index x = 0; x < D; ++x) gak[Z(idx(j) * D + x)] += g * qi[x];
            for (Index x = 0; x < Dv; ++x) gav[Z(idx(j) * Dv + x)] += pj * gi[x];
          }
        }
      }
    }
  if (c.kind == Kind::kRope) {
    ApplyRope(rope, TensorView::Contiguous(dq.data(), DType::kFloat32, {c.B, c.H, c.Sq, D}),
              AttentionLayout::kBHSD, f.QPos(), RopeDirection::kInverse);
    if (!k_rotated) {
      ApplyRope(rope, TensorView::Contiguous(dk.data(), DType::kFloat32, {c.B, c.Hkv, c.Sk, D}),
                AttentionLayout::kBHSD, f.KPos(), RopeDirection::kInverse);
    }
  }
  const auto d = [](const std::vector<float>& x) {
    return std::vector<double>(x.begin(), x.end());
  };
  return {d(dq), d(dk), d(dv), d(gt5), d(gak), d(gav)};
}

inline double MaxErr(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double e = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) e = std::max(e, std::abs(a[i] - b[i]));
  return e;
}

inline double MaxAbs(const std::vector<double>& a) {
  double m = 0.0;
  for (double x : a) m = std::max(m, std::abs(x));
  return m;
}

// The 2x rule for one gradient.
inline void ExpectWithin2x(const std::vector<double>& flash, const std::vector<double>& naive,
                           const std::vector<double>& oracle, const char* what) {
  const double err = MaxErr(flash, oracle), naive_err = MaxErr(naive, oracle);
  const double rounding = 8.0 * std::ldexp(1.0, -24) * std::max(1.0, MaxAbs(oracle));
  EXPECT_LE(err, 2.0 * naive_err + rounding)
      << what << ": flash error " << err << ", plain float32 error " << naive_err << ", max oracle "
      << MaxAbs(oracle);
  EXPECT_LT(err, 1e-4 * std::max(1.0, MaxAbs(oracle))) << what;  // sanity bound
  for (double x : flash) ASSERT_TRUE(std::isfinite(x)) << what;
}

// Runs the flash backward, the reference backward and the naive float32
// backward; checks the 2x rule for every gradient. Returns flash's grads.
inline Grads CheckCase(const Case& c) {
  SCOPED_TRACE(c.name);
  Fixture f(c);
  // Oracle (float64 gradients in the case's layout).
  Tensor rq(DType::kFloat64, c.layout, c.B, c.Sq, c.H, c.D, std::nullopt);
  Tensor rk(DType::kFloat64, c.layout, c.B, c.Sk, c.Hkv, c.D, std::nullopt);
  Tensor rv(DType::kFloat64, c.layout, c.B, c.Sk, c.Hkv, c.Dv, std::nullopt);
  const Index rows = f.TableRows();
  std::vector<double> rt5(Z(rows * c.H)), rak(Z(rows * c.D)), rav(Z(rows * c.Dv));
  AttentionGrads rg = MakeGrads(rq.view, rk.view, rv.view);
  if (c.kind == Kind::kT5)
    rg.t5_table = TensorView::Contiguous(rt5.data(), DType::kFloat64, {rows, c.H});
  if (c.kind == Kind::kShaw) {
    rg.shaw_a_key = TensorView::Contiguous(rak.data(), DType::kFloat64, {rows, c.D});
    rg.shaw_a_value = TensorView::Contiguous(rav.data(), DType::kFloat64, {rows, c.Dv});
  }
  AttentionReferenceBackward(f.params, f.q.view, f.k.view, f.v.view, f.dout.view, rg);
  Grads oracle{Canonical(rq.view, c.layout),
               Canonical(rk.view, c.layout),
               Canonical(rv.view, c.layout),
               rt5,
               rak,
               rav};
  bool k_rotated = false;
  if (c.kind == Kind::kRope && c.rope_keys == FlashRopeKeys::kPreRotated) {
    // The caller's KV cache holds R(r) k; the gradient for it is R(r) dk.
    ApplyRope(f.params.scheme.rope, f.k.view, c.layout, f.KPos());
    ApplyRope(f.params.scheme.rope,
              TensorView::Contiguous(oracle.dk.data(), DType::kFloat64, {c.B, c.Hkv, c.Sk, c.D}),
              AttentionLayout::kBHSD, f.KPos());
    k_rotated = true;
  }
  // Flash: forward with lse, then the backward into NaN-filled float32 grads.
  FlashAttentionOptions opt;
  opt.query_tile = c.query_tile;
  opt.key_tile = c.key_tile;
  opt.rope_keys = c.rope_keys;
  const Context ctx(c.threads, c.backend);
  std::vector<float> out(Z(c.B * c.Sq * c.H * c.Dv)), lse(Z(c.B * c.H * c.Sq));
  const TensorView out_view =
      c.layout == AttentionLayout::kBSHD
          ? TensorView::Contiguous(out.data(), DType::kFloat32, {c.B, c.Sq, c.H, c.Dv})
          : TensorView::Contiguous(out.data(), DType::kFloat32, {c.B, c.H, c.Sq, c.Dv});
  const TensorView lse_view = TensorView::Contiguous(lse.data(), DType::kFloat32, {c.B, c.H, c.Sq});
  FlashAttentionWithLse(f.params, f.q.view, f.k.view, f.v.view, out_view, lse_view, opt, ctx);
  Tensor fq(DType::kFloat32, c.layout, c.B, c.Sq, c.H, c.D, std::nullopt);
  Tensor fk(DType::kFloat32, c.layout, c.B, c.Sk, c.Hkv, c.D, std::nullopt);
  Tensor fv(DType::kFloat32, c.layout, c.B, c.Sk, c.Hkv, c.Dv, std::nullopt);
  std::vector<float> ft5(Z(rows * c.H), NAN), fak(Z(rows * c.D), NAN), fav(Z(rows * c.Dv), NAN);
  AttentionGrads fg = MakeGrads(fq.view, fk.view, fv.view);
  if (c.kind == Kind::kT5)
    fg.t5_table = TensorView::Contiguous(ft5.data(), DType::kFloat32, {rows, c.H});
  if (c.kind == Kind::kShaw) {
    fg.shaw_a_key = TensorView::Contiguous(fak.data(), DType::kFloat32, {rows, c.D});
    fg.shaw_a_value = TensorView::Contiguous(fav.data(), DType::kFloat32, {rows, c.Dv});
  }
  FlashAttentionBackward(f.params, f.q.view, f.k.view, f.v.view, out_view, f.dout.view,
                         c.pass_lse ? lse_view : TensorView{}, fg, opt, ctx);
  const auto d = [](const std::vector<float>& x) {
    return std::vector<double>(x.begin(), x.end());
  };
  Grads flash{Canonical(fq.view, c.layout),
              Canonical(fk.view, c.layout),
              Canonical(fv.view, c.layout),
              d(ft5),
              d(fak),
              d(fav)};
  const Grads naive = NaiveFloat32(f, k_rotated, Canonical(out_view, c.layout));
  ExpectWithin2x(flash.dq, naive.dq, oracle.dq, "dq");
  ExpectWithin2x(flash.dk, naive.dk, oracle.dk, "dk");
  ExpectWithin2x(flash.dv, naive.dv, oracle.dv, "dv");
  if (c.kind == Kind::kT5) ExpectWithin2x(flash.t5, naive.t5, oracle.t5, "t5 table");
  if (c.kind == Kind::kShaw) {
    ExpectWithin2x(flash.a_key, naive.a_key, oracle.a_key, "shaw a_key");
    ExpectWithin2x(flash.a_value, naive.a_value, oracle.a_value, "shaw a_value");
  }
  return flash;
}

}  // namespace posenc::flash_backward_test
