// Scheme "fire": Functional Interpolation for Relative Positions (Li et al.
// 2024, "Functional Interpolation for Relative Positions Improves Long
// Context Transformers", ICLR, eq. (4)-(6); conventions of posenc/fire.h).
//   psi(d)      = log(|c d| + 1)
//   x(p, r)     = psi(p - r) / (psi(max(p, |L|)) + eps)
//   logit(i, j) = scale * q_i . k_j + w2[h] . relu(w1 x + b1) + b2[h]
// a learned bias for keys r <= p (causal only): f_theta is one hidden ReLU
// layer of width `hidden` shared by the heads with one output per head;
// c (init 0.1) and the threshold L (init 512) are learned scalars. This is
// the paper's reference code (its appendix): positions are 0-based token
// positions, the normaliser is max(p, |L|) of the query's position ("progressive
// interpolation"), torch.maximum's gradient at a tie is split in half, and
// relu'(0) = abs'(0) = 0 as in torch.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <type_traits>

#include "attention/scheme_policy.h"
#include "posenc/error.h"
#include "posenc/fire.h"

namespace posenc::attention_internal {
namespace {

const SchemeInfo& Info() {
  static const SchemeInfo info{
      .name = "fire",
      .title = "FIRE (functional interpolation for relative positions)",
      .paper =
          "Li et al. 2024, Functional Interpolation for Relative Positions Improves Long "
          "Context Transformers",
      .formula =
          "logit = scale * q . k + f_h(psi(p - r) / (psi(max(p, |L|)) + eps)), "
          "psi(d) = log(|c d| + 1)",
      .terms = static_cast<std::uint8_t>(SchemeTerm::kBias),
      .kernels = SchemeKernels::kReferenceFused,
      .masks = SchemeMasks::kCausalOnly,
      .args =
          {
              {.name = "w1",
               .type = SchemeArgType::kTensor,
               .shape = "[hidden]",
               .grad = SchemeArgGrad::kTrainable,
               .presence = SchemeArgPresence::kRequired,
               .doc = "first layer weights (Linear(1, hidden).weight)"},
              {.name = "b1",
               .type = SchemeArgType::kTensor,
               .shape = "[hidden]",
               .grad = SchemeArgGrad::kTrainable,
               .presence = SchemeArgPresence::kRequired,
               .doc = "first layer bias"},
              {.name = "w2",
               .type = SchemeArgType::kTensor,
               .shape = "[H, hidden]",
               .grad = SchemeArgGrad::kTrainable,
               .presence = SchemeArgPresence::kRequired,
               .doc = "output weights, one row per head (Linear(hidden, H).weight)"},
              {.name = "b2",
               .type = SchemeArgType::kTensor,
               .shape = "[H]",
               .grad = SchemeArgGrad::kTrainable,
               .presence = SchemeArgPresence::kRequired,
               .doc = "output bias per head"},
              {.name = "c",
               .type = SchemeArgType::kTensor,
               .shape = "[]",
               .grad = SchemeArgGrad::kTrainable,
               .presence = SchemeArgPresence::kRequired,
               .doc = "scale of the log transform (paper init 0.1)"},
              {.name = "threshold",
               .type = SchemeArgType::kTensor,
               .shape = "[]",
               .grad = SchemeArgGrad::kTrainable,
               .presence = SchemeArgPresence::kRequired,
               .doc = "L: the normaliser is max(p, |L|) (paper init 512)"},
              {.name = "eps",
               .type = SchemeArgType::kNumber,
               .default_text = "1e-6",
               .doc = "added to the normaliser"},
          },
  };
  return info;
}

template <typename T>
T Sign(T v) {
  return v > T(0) ? T(1) : (v < T(0) ? T(-1) : T(0));
}

class FireScheme final : public SchemeImpl<FireScheme> {
 public:
  FireScheme(std::int64_t heads, std::int64_t hidden, std::vector<double> values, double eps)
      : SchemeImpl(Info()),
        H_(heads),
        hidden_(hidden),
        eps_(eps),
        d_(std::move(values)),
        f_(d_.begin(), d_.end()) {}

  void Record(const SchemeArgReader& a) {
    for (const char* name : {"w1", "b1", "w2", "b2", "c", "threshold"}) {
      AddTrainable(name, a.RequiredTensor(name));
    }
  }

  // For query positions below |L| the normaliser is the constant psi(|L|)
  // and the bias depends on r - p only: the fused kernels then evaluate
  // f_theta once per distance of a tile and sum d logit per distance before
  // its backward.
  bool DistanceOnly(std::int64_t /*pmin*/, std::int64_t pmax) const override {
    return static_cast<double>(pmax) < std::abs(d_[Threshold()]);
  }

  template <typename T>
  T BiasAt(std::int64_t h, std::int64_t p, std::int64_t r) const {
    return Mlp<T>(h, X<T>(p - r, Normaliser<T>(p)));
  }

  template <typename T>
  void Logit(const SchemeRow<T>& row, T /*scale*/, T* out) const {
    const T den = Normaliser<T>(row.qpos);
    for (std::int64_t j = 0; j < row.nk; ++j) {
      out[j] = Mlp<T>(row.head, X<T>(row.qpos - row.kpos[j], den));
    }
  }

  void BiasGradAt(std::int64_t h, std::int64_t p, std::int64_t r, double g,
                  SchemeGradSums& sums) const {
    PairGrad(h, p, p - r, g, sums);
  }

  template <typename T>
  void Backward(const SchemeRow<T>& row, const T* /*probs*/, const T* ds, const T* /*dout*/,
                T /*scale*/, T* /*dq*/, T* /*dk*/, SchemeGradSums& sums) const {
    for (std::int64_t j = 0; j < row.nk; ++j) {
      if (ds[j] != T(0)) PairGrad(row.head, row.qpos, row.qpos - row.kpos[j], double(ds[j]), sums);
    }
  }

 private:
  // Layout of the parameter vector: w1 [hidden], b1 [hidden], w2 [H, hidden],
  // b2 [H], c, L (the trainable tensors in declaration order).
  std::size_t W1() const { return 0; }
  std::size_t B1() const { return static_cast<std::size_t>(hidden_); }
  std::size_t W2() const { return static_cast<std::size_t>(2 * hidden_); }
  std::size_t B2() const { return static_cast<std::size_t>((2 + H_) * hidden_); }
  std::size_t C() const { return B2() + static_cast<std::size_t>(H_); }
  std::size_t Threshold() const { return C() + 1; }

  template <typename T>
  const T* Param() const {
    if constexpr (std::is_same_v<T, float>)
      return f_.data();
    else
      return d_.data();
  }
  // psi(max(p, |L|)) + eps.
  template <typename T>
  T Normaliser(std::int64_t p) const {
    const T* w = Param<T>();
    const T m = std::max(static_cast<T>(p), std::abs(w[Threshold()]));
    return std::log(std::abs(w[C()]) * m + T(1)) + static_cast<T>(eps_);
  }
  template <typename T>
  T X(std::int64_t distance, T den) const {
    const T* w = Param<T>();
    return std::log(std::abs(w[C()] * static_cast<T>(distance)) + T(1)) / den;
  }
  template <typename T>
  T Mlp(std::int64_t h, T x) const {
    const T* w = Param<T>();
    const T* w2 = w + W2() + static_cast<std::size_t>(h * hidden_);
    T b = w[B2() + static_cast<std::size_t>(h)];
    for (std::int64_t u = 0; u < hidden_; ++u) {
      const T pre =
          w[W1() + static_cast<std::size_t>(u)] * x + w[B1() + static_cast<std::size_t>(u)];
      if (pre > T(0)) b += w2[u] * pre;
    }
    return b;
  }

  // Gradient of b_h(p, p - distance) with upstream g, in float64 (summed per
  // worker): w1, b1, w2, c and L; b2's is exactly 0 (below).
  void PairGrad(std::int64_t h, std::int64_t p, std::int64_t distance, double g,
                SchemeGradSums& sums) const {
    const double* w = d_.data();
    const double c = w[C()], L = w[Threshold()], abs_c = std::abs(c);
    const double m = std::max(static_cast<double>(p), std::abs(L));
    const double den = std::log(abs_c * m + 1.0) + eps_;
    const double ad = std::abs(static_cast<double>(distance));
    const double num = std::log(abs_c * ad + 1.0);
    const double x = num / den;
    std::vector<double>& gw1 = sums.tensors[0];
    std::vector<double>& gb1 = sums.tensors[1];
    std::vector<double>& gw2 = sums.tensors[2];
    // b2[h] shifts every logit of head h's rows alike and softmax ignores a
    // shift, so its gradient, sum_j dS_ij over each row, is exactly 0; it is
    // left at 0 instead of summing rounding (a 16-bit O or bfloat16 P leaves
    // each row's sum off by its rounding, coherently across rows).
    const double* w2 = w + W2() + static_cast<std::size_t>(h * hidden_);
    double dx = 0.0;
    for (std::int64_t u = 0; u < hidden_; ++u) {
      const auto ui = static_cast<std::size_t>(u);
      const double pre = w[W1() + ui] * x + w[B1() + ui];
      if (pre <= 0.0) continue;
      gw2[static_cast<std::size_t>(h * hidden_) + ui] += g * pre;
      const double t = g * w2[u];
      gw1[ui] += t * x;
      gb1[ui] += t;
      dx += t * w[W1() + ui];
    }
    if (dx == 0.0) return;
    // x = num / den: d/dc and d/dL (torch.maximum splits a tie's gradient).
    const double dnum_dc = Sign(c) * ad / (abs_c * ad + 1.0);
    const double dden_dc = Sign(c) * m / (abs_c * m + 1.0);
    sums.tensors[4][0] += dx * (dnum_dc / den - num * dden_dc / (den * den));
    const double abs_l = std::abs(L), pf = static_cast<double>(p);
    const double share = abs_l > pf ? 1.0 : (abs_l == pf ? 0.5 : 0.0);
    if (share == 0.0) return;
    const double dden_dl = abs_c / (abs_c * m + 1.0) * share * Sign(L);
    sums.tensors[5][0] += dx * (-num * dden_dl / (den * den));
  }

  std::int64_t H_, hidden_;
  double eps_;
  std::vector<double> d_;
  std::vector<float> f_;
};

std::unique_ptr<SchemePolicy> Resolve(const SchemeArgs& args, const SchemeCall& call) {
  const SchemeArgReader a(Info(), args);
  const std::int64_t H = call.dims.heads;
  const TensorView& w1 = a.RequiredTensor("w1");
  ValidateView(w1, a.Name("w1"), 1);
  const std::int64_t hidden = w1.shape[0];
  if (hidden > kMaxFireHidden) {
    FailArgument(a.Name("w1.shape[0]"), hidden,
                 "a hidden width in [1, " + std::to_string(kMaxFireHidden) + "]");
  }
  std::vector<double> values;
  auto append = [&](const char* name, std::initializer_list<std::int64_t> shape) {
    const std::vector<double> t = a.Table(name, shape);
    const std::string arg = a.Name(name);
    for (std::size_t i = 0; i < t.size(); ++i) {
      RequireAt(std::isfinite(t[i]), arg, static_cast<std::int64_t>(i), t[i], "a finite value");
    }
    values.insert(values.end(), t.begin(), t.end());
  };
  append("w1", {hidden});
  append("b1", {hidden});
  append("w2", {H, hidden});
  append("b2", {H});
  append("c", {1});
  append("threshold", {1});
  Require(std::abs(values[values.size() - 1]) <= static_cast<double>(kMaxPosition),
          a.Name("threshold"), values.back(),
          "|L| <= 2^24 - 1 (the longest position posenc supports)");
  const double eps = a.Number("eps", 1e-6);
  Require(std::isfinite(eps) && eps > 0.0, a.Name("eps"), eps, "a finite number > 0");
  auto scheme = std::make_unique<FireScheme>(H, hidden, std::move(values), eps);
  scheme->Record(a);
  return scheme;
}

}  // namespace

POSENC_REGISTER_SCHEME(fire, &Info, &Resolve)

}  // namespace posenc::attention_internal

namespace posenc {

FireTensors FireWeights::View() {
  const std::int64_t hidden = static_cast<std::int64_t>(w1.size());
  const std::int64_t heads = static_cast<std::int64_t>(b2.size());
  return FireTensors{TensorView::Contiguous(w1.data(), DType::kFloat64, {hidden}),
                     TensorView::Contiguous(b1.data(), DType::kFloat64, {hidden}),
                     TensorView::Contiguous(w2.data(), DType::kFloat64, {heads, hidden}),
                     TensorView::Contiguous(b2.data(), DType::kFloat64, {heads}),
                     TensorView::Contiguous(&c, DType::kFloat64, {1}),
                     TensorView::Contiguous(&threshold, DType::kFloat64, {1})};
}

FireWeights FireInit(std::int64_t heads, std::int64_t hidden, std::uint64_t seed) {
  Require(heads >= 1 && heads <= 4096, "heads", heads, "an integer in [1, 4096]");
  if (!(hidden >= 1 && hidden <= kMaxFireHidden)) {
    FailArgument("hidden", hidden, "an integer in [1, " + std::to_string(kMaxFireHidden) + "]");
  }
  std::mt19937_64 rng(seed);
  // torch.nn.Linear's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias.
  auto uniform = [&](std::size_t n, double bound) {
    std::uniform_real_distribution<double> u(-bound, bound);
    std::vector<double> v(n);
    for (double& x : v) x = u(rng);
    return v;
  };
  FireWeights w;
  const auto H = static_cast<std::size_t>(heads), n = static_cast<std::size_t>(hidden);
  w.w1 = uniform(n, 1.0);
  w.b1 = uniform(n, 1.0);
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
  w.w2 = uniform(H * n, bound);
  w.b2 = uniform(H, bound);
  w.c = 0.1;
  w.threshold = 512.0;
  return w;
}

PositionScheme FireScheme(const FireTensors& t, const FireParams& params) {
  SchemeArgs a;
  a.Tensor("w1", t.w1).Tensor("b1", t.b1).Tensor("w2", t.w2).Tensor("b2", t.b2);
  a.Tensor("c", t.c).Tensor("threshold", t.threshold).Number("eps", params.eps);
  return PositionScheme::Registered("fire", std::move(a));
}

void FireBiasMatrix(const FireTensors& tensors, const FireParams& params, std::int64_t heads,
                    std::int64_t query_offset, std::int64_t query_len, std::int64_t key_len,
                    const TensorView& out) {
  Require(query_offset >= 0 && query_offset + query_len - 1 <= kMaxPosition, "query_offset",
          query_offset, "positions in [0, 2^24)");
  Require(query_len >= 1 && key_len >= 1 && key_len - 1 <= kMaxPosition, "key_len", key_len,
          "query_len >= 1 and key_len in [1, 2^24]");
  ValidateView(out, "out", 3, /*writable=*/true);
  if (!(out.shape[0] == heads && out.shape[1] == query_len && out.shape[2] == key_len)) {
    FailArgument("out", out.Describe(), "[heads, query_len, key_len]");
  }
  attention_internal::SchemeCall call;
  call.dims = attention_internal::Dims{1, heads, heads, query_len, key_len, 1, 1};
  const auto policy = attention_internal::ResolveScheme(FireScheme(tensors, params), call);
  std::vector<std::int64_t> kpos(static_cast<std::size_t>(key_len));
  for (std::int64_t j = 0; j < key_len; ++j) kpos[static_cast<std::size_t>(j)] = j;
  std::vector<double> row(static_cast<std::size_t>(key_len));
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t i = 0; i < query_len; ++i) {
      attention_internal::SchemeRow<double> r;
      r.head = h;
      r.qpos = query_offset + i;
      r.kpos = kpos.data();
      r.nk = key_len;
      policy->LogitRow(r, 1.0, row.data());
      for (std::int64_t j = 0; j < key_len; ++j) {
        StoreFromDouble(out.data, out.dtype,
                        h * out.strides[0] + i * out.strides[1] + j * out.strides[2],
                        row[static_cast<std::size_t>(j)]);
      }
    }
  }
}

}  // namespace posenc
