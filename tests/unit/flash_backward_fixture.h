// Shared runner of the flash attention backward tests
// (flash_backward_test.cc, flash_backward_checks_test.cc): a plain float32
// backward and the 2x-rule check of every gradient against the float64
// oracle AttentionReferenceBackward. Cases, inputs and scheme tables:
// flash_test_util.h (Case, Fixture).
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
#include <optional>
#include <vector>

#include "flash_test_util.h"
#include "posenc/flash_attention.h"

namespace posenc::flash_test {

inline AttentionGrads MakeGrads(const TensorView& dq, const TensorView& dk, const TensorView& dv) {
  AttentionGrads g;
  g.dq = dq;
  g.dk = dk;
  g.dv = dv;
  return g;
}

// All gradients of one case in [B, H, S, D] order (tables row-major).
struct Grads {
  std::vector<double> dq, dk, dv, t5, a_key, a_value;
};

// The gradient outputs of one case in `dtype`, NaN-filled (a gradient left
// unwritten shows): dq, dk, dv in the case's layout, and the T5 / Shaw table
// gradients ([rows, H], [rows, D], [rows, Dv], row-major) when the scheme
// has them. `grads` points into them.
struct GradOutputs {
  Tensor dq, dk, dv;
  std::vector<double> t5, a_key, a_value;  // 8-byte storage of `dtype` values
  AttentionGrads grads;

  GradOutputs(const Fixture& f, DType dtype)
      : dq(dtype, f.c.layout, f.c.B, f.c.Sq, f.c.H, f.c.D, std::nullopt),
        dk(dtype, f.c.layout, f.c.B, f.c.Sk, f.c.Hkv, f.c.D, std::nullopt),
        dv(dtype, f.c.layout, f.c.B, f.c.Sk, f.c.Hkv, f.c.Dv, std::nullopt) {
    const Case& c = f.c;
    const Index rows = f.TableRows();
    grads = MakeGrads(dq.view, dk.view, dv.view);
    if (c.kind == Kind::kT5) grads.scheme.Set("table", Table(t5, dtype, rows, c.H));
    if (c.kind == Kind::kShaw) {
      grads.scheme.Set("a_key", Table(a_key, dtype, rows, c.D));
      grads.scheme.Set("a_value", Table(a_value, dtype, rows, c.Dv));
    }
  }
  GradOutputs(const GradOutputs&) = delete;
  GradOutputs& operator=(const GradOutputs&) = delete;

  // All values as doubles, dq / dk / dv in [B, H, S, D] order.
  Grads Values(AttentionLayout layout) const {
    return {Canonical(dq.view, layout), Canonical(dk.view, layout), Canonical(dv.view, layout),
            Load(Grad("table")),        Load(Grad("a_key")),        Load(Grad("a_value"))};
  }

 private:
  TensorView Grad(std::string_view arg) const {
    const TensorView* v = grads.scheme.Find(arg);
    return v != nullptr ? *v : TensorView{};
  }
  static TensorView Table(std::vector<double>& storage, DType dtype, Index rows, Index cols) {
    storage.assign(Z(rows * cols), 0.0);
    const TensorView view = TensorView::Contiguous(storage.data(), dtype, {rows, cols});
    for (Index i = 0; i < rows * cols; ++i) StoreFromDouble(view.data, dtype, i, std::nan(""));
    return view;
  }
  static std::vector<double> Load(const TensorView& view) {
    std::vector<double> out;
    if (view.data == nullptr) return out;
    for (Index i = 0; i < view.NumElements(); ++i)
      out.push_back(LoadAsDouble(view.data, view.dtype, i));
    return out;
  }
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
  const RopeParams& rope = f.tables.rope;
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
        auto idx = [&](Index j) { return ShawIndex(c.shaw_clip, p, kpos.At(b, j, c.Sk)); };
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
            for (Index t = 0; t < D; ++t) x += qi[t] * f.tables.a_key[Z(idx(j) * D + t)];
          }
          x *= scale;
          if (c.kind == Kind::kAlibi) {
            x -= static_cast<float>(f.tables.slopes[Z(h)]) * static_cast<float>(std::llabs(p - r));
          }
          if (c.kind == Kind::kT5) x += f.t5()->Bias(h, p, r);
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
            const float val = v[V(j) + Z(x)] +
                              (c.kind == Kind::kShaw ? f.tables.a_value[Z(idx(j) * Dv + x)] : 0.0f);
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
            dqi[x] += g * (k[K(j) + Z(x)] +
                           (c.kind == Kind::kShaw ? f.tables.a_key[Z(idx(j) * D + x)] : 0.0f));
            dk[K(j) + Z(x)] += g * qi[x];
          }
          for (Index x = 0; x < Dv; ++x) dv[V(j) + Z(x)] += pj * gi[x];
          if (c.kind == Kind::kT5) {
            gt5[Z(f.t5()->bucketer().BucketOf(p, kpos.At(b, j, c.Sk)) * c.H + h)] += ds;
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

// The 2x rule for one gradient, with a floor of 8 float32 roundings of
// max(1, the oracle's largest value) and a sanity bound of 1e-4 of it.
inline void ExpectWithin2x(const std::vector<double>& flash, const std::vector<double>& naive,
                           const std::vector<double>& oracle, const char* what) {
  const double magnitude = std::max(1.0, MaxAbs(oracle));
  ExpectWithin2x(flash, naive, oracle, 8.0 * std::ldexp(1.0, -24) * magnitude, 1e-4 * magnitude,
                 what);
}

// Runs the flash backward, the reference backward and the naive float32
// backward; checks the 2x rule for every gradient. Returns flash's grads.
inline Grads CheckCase(const Case& c) {
  SCOPED_TRACE(c.name);
  Fixture f(c);
  // Oracle (float64 gradients in the case's layout).
  GradOutputs ref(f, DType::kFloat64);
  AttentionReferenceBackward(f.params, f.q.view, f.k.view, f.v.view, f.dout.view, ref.grads);
  Grads oracle = ref.Values(c.layout);
  bool k_rotated = false;
  if (c.kind == Kind::kRope && c.rope_keys == FlashRopeKeys::kPreRotated) {
    // The caller's KV cache holds R(r) k; the gradient for it is R(r) dk.
    ApplyRope(f.tables.rope, f.k.view, c.layout, f.KPos());
    ApplyRope(f.tables.rope,
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
      AttentionView(out.data(), DType::kFloat32, c.layout, c.B, c.Sq, c.H, c.Dv);
  const TensorView lse_view = TensorView::Contiguous(lse.data(), DType::kFloat32, {c.B, c.H, c.Sq});
  FlashAttentionWithLse(f.params, f.q.view, f.k.view, f.v.view, out_view, lse_view, opt, ctx);
  GradOutputs fg(f, DType::kFloat32);
  FlashAttentionBackward(f.params, f.q.view, f.k.view, f.v.view, out_view, f.dout.view,
                         c.pass_lse ? lse_view : TensorView{}, fg.grads, opt, ctx);
  const Grads flash = fg.Values(c.layout);
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

}  // namespace posenc::flash_test
