// The exact reference attention and its backward (include/posenc/attention.h).
// Scalar loops, float64 throughout: inputs are loaded into float64 copies in
// [batch, heads, seq, dim] order, RoPE rotates those copies with
// posenc::ApplyRope, the position terms of every scheme come from its policy
// (attention/scheme_policy.h: the same code the fused kernels run, in
// float64), and results are rounded once to the output dtypes. The forward splits work
// into one task per (batch, head); the backward runs on one thread.
// Error bound: float64 rounding of sums (~1e-15 relative) before the final
// store. Positions [0, 2^24).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "attention/call_shape.h"
#include "attention/scheme_policy.h"
#include "posenc/error.h"

namespace posenc {

std::string_view AttentionMaskName(AttentionMask mask) {
  return mask == AttentionMask::kCausal ? "causal" : "bidirectional";
}

AttentionMask ParseAttentionMask(std::string_view text, std::string_view arg) {
  if (text == "causal") return AttentionMask::kCausal;
  if (text == "bidirectional") return AttentionMask::kBidirectional;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "one of causal, bidirectional"));
}

double EffectiveAttentionScale(const AttentionParams& params, std::int64_t head_dim) {
  if (params.scale.has_value()) {
    Require(std::isfinite(*params.scale) && *params.scale > 0.0, "scale", *params.scale,
            "a finite number > 0");
    return *params.scale;
  }
  return attention_internal::SchemeDefaultScale(params.scheme, head_dim);
}

namespace {

using attention_internal::CheckAttentionTensor;
using attention_internal::Dims;
using attention_internal::SchemeGradSums;
using attention_internal::SchemePolicy;
using attention_internal::SchemeRow;

// float64 copy of a rank-4 attention tensor in [batch, heads, seq, dim] order.
std::vector<double> Load(const TensorView& view, const AttentionDims& d) {
  std::vector<double> out(static_cast<std::size_t>(d.batch * d.heads * d.seq * d.head_dim));
  std::size_t n = 0;
  for (std::int64_t b = 0; b < d.batch; ++b)
    for (std::int64_t h = 0; h < d.heads; ++h)
      for (std::int64_t s = 0; s < d.seq; ++s)
        for (std::int64_t x = 0; x < d.head_dim; ++x)
          out[n++] = LoadAsDouble(
              view.data, view.dtype,
              b * d.stride_batch + h * d.stride_head + s * d.stride_seq + x * d.stride_dim);
  return out;
}

void Store(const std::vector<double>& values, const TensorView& view, const AttentionDims& d) {
  std::size_t n = 0;
  for (std::int64_t b = 0; b < d.batch; ++b)
    for (std::int64_t h = 0; h < d.heads; ++h)
      for (std::int64_t s = 0; s < d.seq; ++s)
        for (std::int64_t x = 0; x < d.head_dim; ++x)
          StoreFromDouble(
              view.data, view.dtype,
              b * d.stride_batch + h * d.stride_head + s * d.stride_seq + x * d.stride_dim,
              values[n++]);
}

// Everything one call needs, validated and converted to float64.
struct Problem {
  Dims dims{};
  AttentionDims qd{}, kd{}, vd{};
  std::vector<double> q, k, v;           // [B][H][Sq][D], [B][Hkv][Sk][D], [B][Hkv][Sk][Dv]
  std::vector<std::int64_t> qpos, kpos;  // [B][Sq], [B][Sk]
  Positions query_positions, key_positions;
  double scale = 1.0;
  AttentionMask mask = AttentionMask::kCausal;
  std::int64_t window = 0;  // 0: none
  std::unique_ptr<SchemePolicy> policy;

  bool Visible(std::int64_t p, std::int64_t r) const {
    if (mask == AttentionMask::kCausal) {
      if (r > p) return false;
      return window == 0 || p - r < window;
    }
    return window == 0 || std::llabs(p - r) < window;
  }
  const double* Q(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return &q[static_cast<std::size_t>(((b * dims.heads + h) * dims.query_len + i) *
                                       dims.head_dim)];
  }
  std::size_t KIndex(std::int64_t b, std::int64_t h, std::int64_t j, std::int64_t dim) const {
    const std::int64_t hk = h / dims.Group();
    return static_cast<std::size_t>(((b * dims.kv_heads + hk) * dims.key_len + j) * dim);
  }
  // Query row i of (b, h) against every key, for the scheme's row functions.
  SchemeRow<double> Row(std::int64_t b, std::int64_t h, std::int64_t i) const {
    SchemeRow<double> r;
    r.head = h;
    r.qpos = qpos[static_cast<std::size_t>(b * dims.query_len + i)];
    r.q = Q(b, h, i);
    r.kpos = &kpos[static_cast<std::size_t>(b * dims.key_len)];
    r.nk = dims.key_len;
    r.k = &k[KIndex(b, h, 0, dims.head_dim)];
    r.k_stride = dims.head_dim;
    return r;
  }
};

Problem Setup(const AttentionParams& params, const TensorView& q, const TensorView& k,
              const TensorView& v) {
  Problem p;
  attention_internal::CallShape shape = attention_internal::ValidateCallShape(params, q, k, v);
  p.qd = shape.qd;
  p.kd = shape.kd;
  p.vd = shape.vd;
  p.dims = shape.dims;
  p.window = shape.window;
  p.query_positions = shape.query_positions;
  p.key_positions = shape.key_positions;
  p.mask = params.mask;
  p.policy = attention_internal::ResolveScheme(params.scheme, {p.dims, p.mask});
  p.scale = EffectiveAttentionScale(params, p.qd.head_dim);
  const Dims& d = p.dims;
  p.qpos.resize(static_cast<std::size_t>(d.batch * d.query_len));
  p.kpos.resize(static_cast<std::size_t>(d.batch * d.key_len));
  for (std::int64_t b = 0; b < d.batch; ++b) {
    for (std::int64_t i = 0; i < d.query_len; ++i)
      p.qpos[static_cast<std::size_t>(b * d.query_len + i)] =
          p.query_positions.At(b, i, d.query_len);
    for (std::int64_t j = 0; j < d.key_len; ++j)
      p.kpos[static_cast<std::size_t>(b * d.key_len + j)] = p.key_positions.At(b, j, d.key_len);
  }
  for (std::int64_t b = 0; b < d.batch; ++b)
    for (std::int64_t i = 0; i < d.query_len; ++i)
      for (std::int64_t j = 0; j < d.key_len; ++j) {
        const auto qp = p.qpos[static_cast<std::size_t>(b * d.query_len + i)];
        const auto kp = p.kpos[static_cast<std::size_t>(b * d.key_len + j)];
        if (p.Visible(qp, kp)) p.policy->CheckPair(qp, kp);
      }
  p.q = Load(q, p.qd);
  p.k = Load(k, p.kd);
  p.v = Load(v, p.vd);
  if (const RopeParams* rope = p.policy->rotation(); rope != nullptr) {
    // Rotated float64 copies, in [B, H, S, D] (the bhsd layout).
    ApplyRope(*rope,
              TensorView::Contiguous(p.q.data(), DType::kFloat64,
                                     {d.batch, d.heads, d.query_len, d.head_dim}),
              AttentionLayout::kBHSD, p.query_positions);
    ApplyRope(*rope,
              TensorView::Contiguous(p.k.data(), DType::kFloat64,
                                     {d.batch, d.kv_heads, d.key_len, d.head_dim}),
              AttentionLayout::kBHSD, p.key_positions);
  }
  return p;
}

// Probabilities of query row i of (b, h) over all keys (zeros where masked).
// Returns false when no key is visible (the row is all zeros).
//   logit_j = scale * q . k_j + scheme terms (bias + scale * content)
bool RowProbs(const Problem& p, std::int64_t b, std::int64_t h, std::int64_t i,
              std::vector<double>& probs) {
  const Dims& d = p.dims;
  const SchemeRow<double> row = p.Row(b, h, i);
  if (p.policy->HasLogitTerms()) {
    p.policy->LogitRow(row, p.scale, probs.data());
  } else {
    std::fill(probs.begin(), probs.end(), 0.0);
  }
  double max_logit = -std::numeric_limits<double>::infinity();
  bool any = false;
  for (std::int64_t j = 0; j < d.key_len; ++j) {
    if (!p.Visible(row.qpos, row.kpos[j])) {
      probs[static_cast<std::size_t>(j)] = -std::numeric_limits<double>::infinity();
      continue;
    }
    const double* k = row.k + j * row.k_stride;
    double dot = 0.0;
    for (std::int64_t x = 0; x < d.head_dim; ++x) dot += row.q[x] * k[x];
    const double logit = p.scale * dot + probs[static_cast<std::size_t>(j)];
    probs[static_cast<std::size_t>(j)] = logit;
    max_logit = std::max(max_logit, logit);
    any = true;
  }
  if (!any) {
    std::fill(probs.begin(), probs.end(), 0.0);
    return false;
  }
  double sum = 0.0;
  for (auto& x : probs) {
    x = std::isinf(x) ? 0.0 : std::exp(x - max_logit);
    sum += x;
  }
  for (auto& x : probs) x /= sum;
  return true;
}

// Adds sum_j P_j v_j (+ the scheme's value terms) to acc (Dv entries).
void AccumulateValues(const Problem& p, std::int64_t b, std::int64_t h, std::int64_t i,
                      const std::vector<double>& probs, double* acc) {
  const Dims& d = p.dims;
  for (std::int64_t j = 0; j < d.key_len; ++j) {
    const double pj = probs[static_cast<std::size_t>(j)];
    if (pj == 0.0) continue;
    const double* v = &p.v[p.KIndex(b, h, j, d.value_dim)];
    for (std::int64_t x = 0; x < d.value_dim; ++x) acc[x] += pj * v[x];
  }
  if (p.policy->Has(SchemeTerm::kValue)) p.policy->AddValues(p.Row(b, h, i), probs.data(), acc);
}

}  // namespace

void AttentionReference(const AttentionParams& params, const TensorView& q, const TensorView& k,
                        const TensorView& v, const TensorView& out, const TensorView* probs,
                        const Context& ctx) {
  Problem p = Setup(params, q, k, v);
  const Dims& d = p.dims;
  const AttentionDims od = CheckAttentionTensor(out, params.layout, "out", d.batch, d.query_len,
                                                d.heads, d.value_dim, /*writable=*/true);
  for (const auto& [in, name] : {std::pair{&q, "q"}, std::pair{&k, "k"}, std::pair{&v, "v"}}) {
    RequireNoOverlap(out, "out", *in, name, /*inplace_allowed=*/false);
  }
  if (probs != nullptr) {
    ValidateView(*probs, "probs", 4, /*writable=*/true);
    if (!(probs->shape[0] == d.batch && probs->shape[1] == d.heads &&
          probs->shape[2] == d.query_len && probs->shape[3] == d.key_len)) {
      FailArgument("probs", probs->Describe(),
                   "[batch, heads, Sq, Sk] = [" + std::to_string(d.batch) + ", " +
                       std::to_string(d.heads) + ", " + std::to_string(d.query_len) + ", " +
                       std::to_string(d.key_len) + "]");
    }
    RequireNoOverlap(*probs, "probs", out, "out", false);
    for (const auto& [in, name] : {std::pair{&q, "q"}, std::pair{&k, "k"}, std::pair{&v, "v"}}) {
      RequireNoOverlap(*probs, "probs", *in, name, false);
    }
  }
  ctx.ParallelFor(d.batch * d.heads, [&](std::int64_t task, int) {
    const std::int64_t b = task / d.heads, h = task % d.heads;
    std::vector<double> row(static_cast<std::size_t>(d.key_len));
    std::vector<double> acc(static_cast<std::size_t>(d.value_dim));
    for (std::int64_t i = 0; i < d.query_len; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0);
      if (RowProbs(p, b, h, i, row)) AccumulateValues(p, b, h, i, row, acc.data());
      const std::int64_t base = b * od.stride_batch + h * od.stride_head + i * od.stride_seq;
      for (std::int64_t x = 0; x < d.value_dim; ++x) {
        StoreFromDouble(out.data, out.dtype, base + x * od.stride_dim,
                        acc[static_cast<std::size_t>(x)]);
      }
      if (probs != nullptr) {
        const std::int64_t pb =
            b * probs->strides[0] + h * probs->strides[1] + i * probs->strides[2];
        for (std::int64_t j = 0; j < d.key_len; ++j) {
          StoreFromDouble(probs->data, probs->dtype, pb + j * probs->strides[3],
                          row[static_cast<std::size_t>(j)]);
        }
      }
    }
  });
}

namespace {

// The layouts of dout and of the gradients, checked against the problem's
// shapes: dout as out, dq as q, dk as k, dv as v (writable), in that order.
struct GradDims {
  AttentionDims dout, dq, dk, dv;
};
GradDims CheckGradShapes(const AttentionParams& params, const Dims& d, const TensorView& dout,
                         const AttentionGrads& grads) {
  GradDims g;
  g.dout = GetAttentionDims(dout, params.layout, "dout");
  const AttentionDims& dod = g.dout;
  if (!(dod.batch == d.batch && dod.seq == d.query_len && dod.heads == d.heads &&
        dod.head_dim == d.value_dim)) {
    FailArgument("dout", dout.Describe(), "the shape of out ([batch, Sq, H, Dv] in the layout)");
  }
  g.dq = CheckAttentionTensor(grads.dq, params.layout, "grads.dq", d.batch, d.query_len, d.heads,
                              d.head_dim, /*writable=*/true);
  g.dk = CheckAttentionTensor(grads.dk, params.layout, "grads.dk", d.batch, d.key_len, d.kv_heads,
                              d.head_dim, /*writable=*/true);
  g.dv = CheckAttentionTensor(grads.dv, params.layout, "grads.dv", d.batch, d.key_len, d.kv_heads,
                              d.value_dim, /*writable=*/true);
  return g;
}

// Rotates dq and dk (float64, [B, H, Sq, D] and [B, Hkv, Sk, D]) back to the
// unrotated frame when the scheme rotates q and k; else leaves them.
void RotateGradsBack(const Problem& p, std::vector<double>& dq, std::vector<double>& dk) {
  const Dims& d = p.dims;
  if (const RopeParams* rope = p.policy->rotation(); rope != nullptr) {
    ApplyRope(*rope,
              TensorView::Contiguous(dq.data(), DType::kFloat64,
                                     {d.batch, d.heads, d.query_len, d.head_dim}),
              AttentionLayout::kBHSD, p.query_positions, RopeDirection::kInverse);
    ApplyRope(*rope,
              TensorView::Contiguous(dk.data(), DType::kFloat64,
                                     {d.batch, d.kv_heads, d.key_len, d.head_dim}),
              AttentionLayout::kBHSD, p.key_positions, RopeDirection::kInverse);
  }
}

}  // namespace

void AttentionReferenceBackward(const AttentionParams& params, const TensorView& q,
                                const TensorView& k, const TensorView& v, const TensorView& dout,
                                const AttentionGrads& grads) {
  Problem p = Setup(params, q, k, v);
  const Dims& d = p.dims;
  const GradDims gd = CheckGradShapes(params, d, dout, grads);
  std::vector<std::string> labels;
  const std::vector<TensorView> table_views =
      attention_internal::CheckSchemeGrads(*p.policy, grads, &labels);
  const std::vector<double> dO = Load(dout, gd.dout);
  std::vector<double> dq(p.q.size(), 0.0), dk(p.k.size(), 0.0), dv(p.v.size(), 0.0);
  SchemeGradSums sums = p.policy->NewGradSums();
  const bool value_terms = p.policy->Has(SchemeTerm::kValue);
  const std::size_t nk = static_cast<std::size_t>(d.key_len);
  std::vector<double> probs(nk), dP(nk), dS(nk), dq_terms(static_cast<std::size_t>(d.head_dim));
  std::vector<double> dk_terms(nk * static_cast<std::size_t>(d.head_dim));
  for (std::int64_t b = 0; b < d.batch; ++b) {
    for (std::int64_t h = 0; h < d.heads; ++h) {
      const std::size_t k0 = p.KIndex(b, h, 0, d.head_dim), v0 = p.KIndex(b, h, 0, d.value_dim);
      for (std::int64_t i = 0; i < d.query_len; ++i) {
        if (!RowProbs(p, b, h, i, probs)) continue;  // zero output: zero gradients
        const SchemeRow<double> row = p.Row(b, h, i);
        const double* go =
            &dO[static_cast<std::size_t>(((b * d.heads + h) * d.query_len + i) * d.value_dim)];
        // dP_j = dO . v_j (+ dO . a_j - D_i for value terms), D_i = rowsum(P o dP).
        double rowsum = 0.0;
        for (std::size_t j = 0; j < nk; ++j) {
          const double* vj = &p.v[v0 + j * static_cast<std::size_t>(d.value_dim)];
          double s = 0.0;
          for (std::int64_t x = 0; x < d.value_dim; ++x) s += go[x] * vj[x];
          dP[j] = s;
        }
        if (value_terms) {
          p.policy->ValueGradRow(row, go, 0.0, dP.data());
        }
        for (std::size_t j = 0; j < nk; ++j) rowsum += probs[j] * dP[j];
        for (std::size_t j = 0; j < nk; ++j) dS[j] = probs[j] * (dP[j] - rowsum);
        double* dqi = &dq[static_cast<std::size_t>(row.q - p.q.data())];
        for (std::size_t j = 0; j < nk; ++j) {
          const double pj = probs[j];
          if (pj == 0.0) continue;
          const double g = p.scale * dS[j];
          const std::size_t kj = k0 + j * static_cast<std::size_t>(d.head_dim);
          const std::size_t vj = v0 + j * static_cast<std::size_t>(d.value_dim);
          for (std::int64_t x = 0; x < d.head_dim; ++x) {
            dqi[x] += g * p.k[kj + static_cast<std::size_t>(x)];
            dk[kj + static_cast<std::size_t>(x)] += g * row.q[x];
          }
          for (std::int64_t x = 0; x < d.value_dim; ++x)
            dv[vj + static_cast<std::size_t>(x)] += pj * go[x];
        }
        // The scheme's terms: content gradients (unscaled, like dS k) and its tables.
        std::fill(dq_terms.begin(), dq_terms.end(), 0.0);
        std::fill(dk_terms.begin(), dk_terms.end(), 0.0);
        p.policy->BackwardRow(row, probs.data(), dS.data(), go, p.scale, dq_terms.data(),
                              dk_terms.data(), sums);
        for (std::int64_t x = 0; x < d.head_dim; ++x) {
          dqi[x] += p.scale * dq_terms[static_cast<std::size_t>(x)];
        }
        for (std::size_t e = 0; e < dk_terms.size(); ++e) dk[k0 + e] += p.scale * dk_terms[e];
      }
    }
  }
  RotateGradsBack(p, dq, dk);
  Store(dq, grads.dq, gd.dq);
  Store(dk, grads.dk, gd.dk);
  Store(dv, grads.dv, gd.dv);
  const SchemeGradSums* parts[] = {&sums};
  attention_internal::StoreSchemeGrads(*p.policy, parts, table_views);
}

}  // namespace posenc
