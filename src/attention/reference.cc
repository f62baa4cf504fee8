// The exact reference attention and its backward (include/posenc/attention.h).
// Scalar loops, float64 throughout: inputs are loaded into float64 copies in
// [batch, heads, seq, dim] order, RoPE rotates those copies with
// posenc::ApplyRope, the position terms come from attention/policies.h, and
// results are rounded once to the output dtypes. The forward splits work
// into one task per (batch, head); the backward runs on one thread.
// Error bound: float64 rounding of sums (~1e-15 relative) before the final
// store. Positions [0, 2^24).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "attention/policies.h"
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
  if (params.scheme.kind == PositionScheme::Kind::kDeBERTa) {
    return DebertaScale(params.scheme.deberta.params);
  }
  return 1.0 / std::sqrt(static_cast<double>(head_dim));
}

namespace {

using attention_internal::CheckAttentionTensor;
using attention_internal::Dims;
using attention_internal::Policy;
using attention_internal::TableGrads;

// float64 copy of a rank-4 attention tensor in [batch, heads, seq, dim] order.
std::vector<double> Load(const TensorView& view, const AttentionDims& d) {
  std::vector<double> out(static_cast<std::size_t>(d.batch * d.heads * d.seq * d.head_dim));
  std::size_t n = 0;
  for (std::int64_t b = 0; b < d.batch; ++b)
    for (std::int64_t h = 0; h < d.heads; ++h)
      for (std::int64_t s = 0; s < d.seq; ++s)
        for (std::int64_t x = 0; x < d.head_dim; ++x)
          out[n++] = LoadAsDouble(view.data, view.dtype,
                                  b * d.stride_batch + h * d.stride_head + s * d.stride_seq +
                                      x * d.stride_dim);
  return out;
}

void Store(const std::vector<double>& values, const TensorView& view, const AttentionDims& d) {
  std::size_t n = 0;
  for (std::int64_t b = 0; b < d.batch; ++b)
    for (std::int64_t h = 0; h < d.heads; ++h)
      for (std::int64_t s = 0; s < d.seq; ++s)
        for (std::int64_t x = 0; x < d.head_dim; ++x)
          StoreFromDouble(view.data, view.dtype,
                          b * d.stride_batch + h * d.stride_head + s * d.stride_seq +
                              x * d.stride_dim,
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
  std::optional<Policy> policy;

  bool Visible(std::int64_t p, std::int64_t r) const {
    if (mask == AttentionMask::kCausal) {
      if (r > p) return false;
      return window == 0 || p - r < window;
    }
    return window == 0 || std::llabs(p - r) < window;
  }
  const double* Q(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return &q[static_cast<std::size_t>(((b * dims.heads + h) * dims.query_len + i) * dims.head_dim)];
  }
  std::size_t KIndex(std::int64_t b, std::int64_t h, std::int64_t j, std::int64_t dim) const {
    const std::int64_t hk = h / dims.Group();
    return static_cast<std::size_t>(((b * dims.kv_heads + hk) * dims.key_len + j) * dim);
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
  p.scale = EffectiveAttentionScale(params, p.qd.head_dim);
  p.mask = params.mask;
  p.policy.emplace(params.scheme, p.dims);
  const Dims& d = p.dims;
  p.qpos.resize(static_cast<std::size_t>(d.batch * d.query_len));
  p.kpos.resize(static_cast<std::size_t>(d.batch * d.key_len));
  for (std::int64_t b = 0; b < d.batch; ++b) {
    for (std::int64_t i = 0; i < d.query_len; ++i)
      p.qpos[static_cast<std::size_t>(b * d.query_len + i)] = p.query_positions.At(b, i, d.query_len);
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
  if (params.scheme.kind == PositionScheme::Kind::kRope) {
    // Rotated float64 copies, in [B, H, S, D] (the bhsd layout).
    ApplyRope(params.scheme.rope,
              TensorView::Contiguous(p.q.data(), DType::kFloat64, {d.batch, d.heads, d.query_len, d.head_dim}),
              AttentionLayout::kBHSD, p.query_positions);
    ApplyRope(params.scheme.rope,
              TensorView::Contiguous(p.k.data(), DType::kFloat64, {d.batch, d.kv_heads, d.key_len, d.head_dim}),
              AttentionLayout::kBHSD, p.key_positions);
  }
  return p;
}

// Probabilities of query row i of (b, h) over all keys (zeros where masked).
// Returns false when no key is visible (the row is all zeros).
bool RowProbs(const Problem& p, std::int64_t b, std::int64_t h, std::int64_t i,
              std::vector<double>& probs) {
  const Dims& d = p.dims;
  const std::int64_t qp = p.qpos[static_cast<std::size_t>(b * d.query_len + i)];
  const double* q = p.Q(b, h, i);
  double max_logit = -std::numeric_limits<double>::infinity();
  bool any = false;
  for (std::int64_t j = 0; j < d.key_len; ++j) {
    const std::int64_t kp = p.kpos[static_cast<std::size_t>(b * d.key_len + j)];
    if (!p.Visible(qp, kp)) {
      probs[static_cast<std::size_t>(j)] = -std::numeric_limits<double>::infinity();
      continue;
    }
    const double* k = &p.k[p.KIndex(b, h, j, d.head_dim)];
    double dot = 0.0;
    for (std::int64_t x = 0; x < d.head_dim; ++x) dot += q[x] * k[x];
    const double logit = p.scale * (dot + p.policy->ContentTerm(h, q, k, qp, kp)) +
                         p.policy->BiasTerm(h, qp, kp);
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

// Adds sum_j P_j (v_j + a^V row) to acc (Dv entries).
void AccumulateValues(const Problem& p, std::int64_t b, std::int64_t h, std::int64_t i,
                      const std::vector<double>& probs, double* acc) {
  const Dims& d = p.dims;
  const std::int64_t qp = p.qpos[static_cast<std::size_t>(b * d.query_len + i)];
  for (std::int64_t j = 0; j < d.key_len; ++j) {
    const double pj = probs[static_cast<std::size_t>(j)];
    if (pj == 0.0) continue;
    const double* v = &p.v[p.KIndex(b, h, j, d.value_dim)];
    const double* extra = p.policy->ValueRow(qp, p.kpos[static_cast<std::size_t>(b * d.key_len + j)]);
    for (std::int64_t x = 0; x < d.value_dim; ++x) acc[x] += pj * (v[x] + (extra ? extra[x] : 0.0));
  }
}

}  // namespace

void AttentionReference(const AttentionParams& params, const TensorView& q, const TensorView& k,
                        const TensorView& v, const TensorView& out, const TensorView* probs,
                        const Context& ctx) {
  Problem p = Setup(params, q, k, v);
  const Dims& d = p.dims;
  const AttentionDims od =
      CheckAttentionTensor(out, params.layout, "out", d.batch, d.query_len, d.heads, d.value_dim, /*writable=*/true);
  for (const auto& [in, name] : {std::pair{&q, "q"}, std::pair{&k, "k"}, std::pair{&v, "v"}}) {
    RequireNoOverlap(out, "out", *in, name, /*inplace_allowed=*/false);
  }
  if (probs != nullptr) {
    ValidateView(*probs, "probs", 4, /*writable=*/true);
    Require(probs->shape[0] == d.batch && probs->shape[1] == d.heads &&
                probs->shape[2] == d.query_len && probs->shape[3] == d.key_len,
            "probs", probs->Describe(),
            "[batch, heads, Sq, Sk] = [" + std::to_string(d.batch) + ", " + std::to_string(d.heads) +
                ", " + std::to_string(d.query_len) + ", " + std::to_string(d.key_len) + "]");
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
        StoreFromDouble(out.data, out.dtype, base + x * od.stride_dim, acc[static_cast<std::size_t>(x)]);
      }
      if (probs != nullptr) {
        const std::int64_t pb = b * probs->strides[0] + h * probs->strides[1] + i * probs->strides[2];
        for (std::int64_t j = 0; j < d.key_len; ++j) {
          StoreFromDouble(probs->data, probs->dtype, pb + j * probs->strides[3],
                          row[static_cast<std::size_t>(j)]);
        }
      }
    }
  });
}

void AttentionReferenceBackward(const AttentionParams& params, const TensorView& q,
                                const TensorView& k, const TensorView& v, const TensorView& dout,
                                const AttentionGrads& grads) {
  Problem p = Setup(params, q, k, v);
  const Dims& d = p.dims;
  const AttentionDims dod = GetAttentionDims(dout, params.layout, "dout");
  Require(dod.batch == d.batch && dod.seq == d.query_len && dod.heads == d.heads &&
              dod.head_dim == d.value_dim,
          "dout", dout.Describe(), "the shape of out ([batch, Sq, H, Dv] in the layout)");
  const AttentionDims dqd = CheckAttentionTensor(grads.dq, params.layout, "grads.dq", d.batch, d.query_len, d.heads, d.head_dim, /*writable=*/true);
  const AttentionDims dkd = CheckAttentionTensor(grads.dk, params.layout, "grads.dk", d.batch, d.key_len, d.kv_heads, d.head_dim, /*writable=*/true);
  const AttentionDims dvd = CheckAttentionTensor(grads.dv, params.layout, "grads.dv", d.batch, d.key_len, d.kv_heads, d.value_dim, /*writable=*/true);
  const std::vector<double> dO = Load(dout, dod);
  std::vector<double> dq(p.q.size(), 0.0), dk(p.k.size(), 0.0), dv(p.v.size(), 0.0);
  TableGrads tg = p.policy->ZeroGrads();
  std::vector<double> probs(static_cast<std::size_t>(d.key_len)), dP(probs.size());
  std::vector<double> p_dout(static_cast<std::size_t>(d.value_dim));
  for (std::int64_t b = 0; b < d.batch; ++b) {
    for (std::int64_t h = 0; h < d.heads; ++h) {
      for (std::int64_t i = 0; i < d.query_len; ++i) {
        if (!RowProbs(p, b, h, i, probs)) continue;  // zero output: zero gradients
        const std::int64_t qp = p.qpos[static_cast<std::size_t>(b * d.query_len + i)];
        const double* go = &dO[static_cast<std::size_t>(((b * d.heads + h) * d.query_len + i) * d.value_dim)];
        double rowsum = 0.0;
        for (std::int64_t j = 0; j < d.key_len; ++j) {
          const double pj = probs[static_cast<std::size_t>(j)];
          if (pj == 0.0) { dP[static_cast<std::size_t>(j)] = 0.0; continue; }
          const double* vj = &p.v[p.KIndex(b, h, j, d.value_dim)];
          const double* extra = p.policy->ValueRow(qp, p.kpos[static_cast<std::size_t>(b * d.key_len + j)]);
          double s = 0.0;
          for (std::int64_t x = 0; x < d.value_dim; ++x) s += go[x] * (vj[x] + (extra ? extra[x] : 0.0));
          dP[static_cast<std::size_t>(j)] = s;
          rowsum += pj * s;
        }
        const double* qi = p.Q(b, h, i);
        double* dqi = &dq[static_cast<std::size_t>(qi - p.q.data())];
        for (std::int64_t j = 0; j < d.key_len; ++j) {
          const double pj = probs[static_cast<std::size_t>(j)];
          if (pj == 0.0) continue;
          const double dS = pj * (dP[static_cast<std::size_t>(j)] - rowsum);
          const double g = p.scale * dS;
          const std::size_t kj = p.KIndex(b, h, j, d.head_dim);
          const std::size_t vj = p.KIndex(b, h, j, d.value_dim);
          for (std::int64_t x = 0; x < d.head_dim; ++x) {
            dqi[x] += g * p.k[kj + static_cast<std::size_t>(x)];
            dk[kj + static_cast<std::size_t>(x)] += g * qi[x];
          }
          for (std::int64_t x = 0; x < d.value_dim; ++x) {
            p_dout[static_cast<std::size_t>(x)] = pj * go[x];
            dv[vj + static_cast<std::size_t>(x)] += pj * go[x];
          }
          p.policy->Backward(h, qi, &p.k[kj], qp, p.kpos[static_cast<std::size_t>(b * d.key_len + j)],
                             g, dS, p_dout.data(), dqi, &dk[kj], tg);
        }
      }
    }
  }
  if (params.scheme.kind == PositionScheme::Kind::kRope) {
    ApplyRope(params.scheme.rope,
              TensorView::Contiguous(dq.data(), DType::kFloat64, {d.batch, d.heads, d.query_len, d.head_dim}),
              AttentionLayout::kBHSD, p.query_positions, RopeDirection::kInverse);
    ApplyRope(params.scheme.rope,
              TensorView::Contiguous(dk.data(), DType::kFloat64, {d.batch, d.kv_heads, d.key_len, d.head_dim}),
              AttentionLayout::kBHSD, p.key_positions, RopeDirection::kInverse);
  }
  Store(dq, grads.dq, dqd);
  Store(dk, grads.dk, dkd);
  Store(dv, grads.dv, dvd);
  using attention_internal::StoreTable;
  const std::int64_t H = d.heads, D = d.head_dim, Dv = d.value_dim;
  const auto& s = params.scheme;
  if (s.kind == PositionScheme::Kind::kT5 && grads.t5_table.data != nullptr) {
    StoreTable(tg.t5, grads.t5_table, "grads.t5_table", {s.t5.table->num_buckets(), H});
  }
  if (s.kind == PositionScheme::Kind::kShaw) {
    const std::int64_t rows = s.shaw.params.TableRows();
    if (grads.shaw_a_key.data) StoreTable(tg.shaw_key, grads.shaw_a_key, "grads.shaw_a_key", {rows, D});
    if (grads.shaw_a_value.data) StoreTable(tg.shaw_value, grads.shaw_a_value, "grads.shaw_a_value", {rows, Dv});
  }
  if (s.kind == PositionScheme::Kind::kTransformerXL) {
    if (grads.xl_r_w_bias.data) StoreTable(tg.xl_u, grads.xl_r_w_bias, "grads.xl_r_w_bias", {H, D});
    if (grads.xl_r_r_bias.data) StoreTable(tg.xl_v, grads.xl_r_r_bias, "grads.xl_r_r_bias", {H, D});
    if (grads.xl_rw.data) {
      StoreTable(tg.xl_rw, grads.xl_rw, "grads.xl_rw", {s.transformer_xl.rw.shape[0], H, D});
    }
  }
  if (s.kind == PositionScheme::Kind::kDeBERTa) {
    const std::int64_t rows = 2 * s.deberta.params.AttSpan();
    if (grads.deberta_pos_key.data && !tg.deb_key.empty()) {
      StoreTable(tg.deb_key, grads.deberta_pos_key, "grads.deberta_pos_key", {rows, H, D});
    }
    if (grads.deberta_pos_query.data && !tg.deb_query.empty()) {
      StoreTable(tg.deb_query, grads.deberta_pos_query, "grads.deberta_pos_query", {rows, H, D});
    }
  }
}

}  // namespace posenc
