// Shared runner of the fused attention forward tests (flash_attention_test.cc,
// flash_decode_test.cc): a plain float32 attention and the 2x-rule check of
// an output against the float64 oracle AttentionReference. Cases, inputs and
// scheme tables: flash_test_util.h (Case, Fixture).
//
// Tolerance (FlashAttention's test rule): the error against the float64
// oracle must be at most 2x the error of the plain float32 attention written
// here (same inputs, same float32 position terms) plus twice the float32
// rounding of the oracle's values.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "flash_test_util.h"
#include "posenc/flash_attention.h"

namespace posenc::flash_test {

// A forward case: 217 x 217, 64-row tiles, Shaw clip 16 unless changed.
inline Case Forward(std::string name, Kind kind, AttentionMask mask) {
  Case c = Make(std::move(name), kind, mask);
  c.Sq = c.Sk = 217;
  c.query_tile = c.key_tile = 64;
  c.shaw_clip = 16;
  return c;
}

// A plain float32 attention: whole rows of float32 logits, float32 softmax
// and accumulation, the same float32 position terms. Returns [B, H, Sq, Dv].
// `k_rotated`: k already holds RoPE-rotated keys.
inline std::vector<double> NaiveFloat32(Fixture& f, bool k_rotated) {
  const Case& c = f.c;
  std::vector<double> qd = Canonical(f.q.view, c.layout), kd = Canonical(f.k.view, c.layout),
                      vd = Canonical(f.v.view, c.layout);
  std::vector<float> q(qd.begin(), qd.end()), k(kd.begin(), kd.end()), v(vd.begin(), vd.end());
  if (c.kind == Kind::kRope) {
    ApplyRope(f.tables.rope,
              TensorView::Contiguous(q.data(), DType::kFloat32, {c.B, c.H, c.Sq, c.D}),
              AttentionLayout::kBHSD, f.QPos());
    if (!k_rotated) {
      ApplyRope(f.tables.rope,
                TensorView::Contiguous(k.data(), DType::kFloat32, {c.B, c.Hkv, c.Sk, c.D}),
                AttentionLayout::kBHSD, f.KPos());
    }
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.D)));
  const Positions qpos = f.QPos(), kpos = f.KPos();
  std::vector<double> out(static_cast<std::size_t>(c.B * c.H * c.Sq * c.Dv), 0.0);
  std::vector<float> row(static_cast<std::size_t>(c.Sk)), acc(static_cast<std::size_t>(c.Dv));
  for (std::int64_t b = 0; b < c.B; ++b)
    for (std::int64_t h = 0; h < c.H; ++h) {
      const std::int64_t hk = h / (c.H / c.Hkv);
      for (std::int64_t i = 0; i < c.Sq; ++i) {
        const float* qi = &q[static_cast<std::size_t>(((b * c.H + h) * c.Sq + i) * c.D)];
        const std::int64_t p = qpos.At(b, i, c.Sq);
        float mx = -INFINITY;
        for (std::int64_t j = 0; j < c.Sk; ++j) {
          const std::int64_t r = kpos.At(b, j, c.Sk);
          bool vis = c.mask == AttentionMask::kCausal ? r <= p : true;
          if (c.window) vis = vis && std::llabs(p - r) < *c.window;
          float& s = row[static_cast<std::size_t>(j)];
          if (!vis) {
            s = -INFINITY;
            continue;
          }
          const float* kj = &k[static_cast<std::size_t>(((b * c.Hkv + hk) * c.Sk + j) * c.D)];
          s = 0.0f;
          for (std::int64_t x = 0; x < c.D; ++x) s += qi[x] * kj[x];
          if (c.kind == Kind::kShaw) {
            const float* a =
                &f.tables.a_key[static_cast<std::size_t>(ShawIndex(c.shaw_clip, p, r) * c.D)];
            for (std::int64_t x = 0; x < c.D; ++x) s += qi[x] * a[x];
          }
          s *= scale;
          if (c.kind == Kind::kAlibi) {
            s -= static_cast<float>(f.tables.slopes[static_cast<std::size_t>(h)]) *
                 static_cast<float>(std::llabs(p - r));
          }
          if (c.kind == Kind::kT5) s += f.t5()->Bias(h, p, r);
          mx = std::max(mx, s);
        }
        if (mx == -INFINITY) continue;
        float sum = 0.0f;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (std::int64_t j = 0; j < c.Sk; ++j) {
          const float s = row[static_cast<std::size_t>(j)];
          if (s == -INFINITY) continue;
          const float e = std::exp(s - mx);
          sum += e;
          const float* vj = &v[static_cast<std::size_t>(((b * c.Hkv + hk) * c.Sk + j) * c.Dv)];
          const float* av = c.kind == Kind::kShaw
                                ? &f.tables.a_value[static_cast<std::size_t>(
                                      ShawIndex(c.shaw_clip, p, kpos.At(b, j, c.Sk)) * c.Dv)]
                                : nullptr;
          for (std::int64_t x = 0; x < c.Dv; ++x)
            acc[static_cast<std::size_t>(x)] += e * (vj[x] + (av ? av[x] : 0.0f));
        }
        for (std::int64_t x = 0; x < c.Dv; ++x) {
          out[static_cast<std::size_t>(((b * c.H + h) * c.Sq + i) * c.Dv + x)] =
              acc[static_cast<std::size_t>(x)] / sum;
        }
      }
    }
  return out;
}

// Runs flash, the reference and the naive float32 attention; checks the
// FlashAttention tolerance rule. Returns flash's output.
inline std::vector<double> CheckCase(const Case& c) {
  SCOPED_TRACE(c.name);
  Fixture f(c);
  std::vector<double> ref(static_cast<std::size_t>(c.B * c.Sq * c.H * c.Dv));
  const TensorView ref_view =
      AttentionView(ref.data(), DType::kFloat64, c.layout, c.B, c.Sq, c.H, c.Dv);
  AttentionReference(f.params, f.q.view, f.k.view, f.v.view, ref_view);
  bool k_rotated = false;
  if (c.kind == Kind::kRope && c.rope_keys == FlashRopeKeys::kPreRotated) {
    ApplyRope(f.tables.rope, f.k.view, c.layout, f.KPos());  // the caller's KV cache
    k_rotated = true;
  }
  std::vector<float> out(ref.size(), NAN);
  FlashAttentionOptions opt;
  opt.query_tile = c.query_tile;
  opt.key_tile = c.key_tile;
  opt.rope_keys = c.rope_keys;
  const Context ctx(c.threads, c.backend);
  const TensorView out_view =
      AttentionView(out.data(), DType::kFloat32, c.layout, c.B, c.Sq, c.H, c.Dv);
  if (c.decode) {
    FlashAttentionDecode(f.params, f.q.view, f.k.view, f.v.view, out_view, TensorView{}, opt, ctx);
  } else {
    FlashAttention(f.params, f.q.view, f.k.view, f.v.view, out_view, opt, ctx);
  }
  const std::vector<double> flash = Canonical(out_view, c.layout);
  const std::vector<double> oracle = Canonical(ref_view, c.layout);
  const std::vector<double> naive = NaiveFloat32(f, k_rotated);
  double rounding = 0.0;
  for (double x : oracle) {
    rounding =
        std::max(rounding, std::abs(static_cast<double>(static_cast<float>(x + 0.3) - 0.3f) - x));
  }
  // Floor: twice the float32 rounding of the oracle's values; 1e-4: an
  // absolute sanity bound for O(1) values.
  ExpectWithin2x(flash, naive, oracle, 2.0 * rounding, 1e-4, "out");
  return flash;
}

}  // namespace posenc::flash_test
