// Scheme "shaw": relative position representations on keys and values
// (Shaw, Uszkoreit, Vaswani 2018, "Self-Attention with Relative Position
// Representations", eq. (3)-(5); conventions of posenc/shaw.h).
//   idx(p, r)   = clip(r - p, -k, k) + k
//   logit(i, j) = scale * (q_i . k_j + q_i . a^K[idx])          (logit term)
//   out_i       = sum_j P_ij (v_j + a^V[idx])                    (value term)
// a^K [2k + 1, D] and a^V [2k + 1, Dv] are learned and shared by all heads.
// Many keys of a row share a clipped index, so every term is evaluated once
// per index of the row: q . a^K[idx] (forward), the P and dS sums per index
// (value output, table gradients, dq), and dO . a^V[idx] - D_i, combined in
// float64 before one rounding (a float32 rounding of dO . a^V alone would be
// the same error for every key of the index: systematic in sum_j dS_ij and
// amplified in the a^K gradient and dq). Reference: tensor2tensor
// `dot_product_attention_relative` (HF BERT's relative_key, removed in v5).
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "attention/scheme_policy.h"
#include "kernels/thread_scratch.h"
#include "posenc/error.h"
#include "posenc/shaw.h"

namespace posenc::attention_internal {
namespace {

const SchemeInfo& Info() {
  static const SchemeInfo info{
      .name = "shaw",
      .title = "Shaw relative keys and values",
      .paper = "Shaw et al. 2018, Self-Attention with Relative Position Representations",
      .formula = "logit = scale * q . (k + a^K[idx]); out = sum P (v + a^V[idx])",
      .terms = static_cast<std::uint8_t>(static_cast<unsigned>(SchemeTerm::kLogit) |
                                         static_cast<unsigned>(SchemeTerm::kValue)),
      .kernels = SchemeKernels::kReferenceFused,
      .masks = SchemeMasks::kAny,
      .args =
          {
              {.name = "clip",
               .type = SchemeArgType::kInteger,
               .default_text = "16",
               .doc = "clip distance k; tables have 2k + 1 rows"},
              {.name = "a_key",
               .type = SchemeArgType::kTensor,
               .shape = "[2 clip + 1, D]",
               .grad = SchemeArgGrad::kTrainable,
               .presence = SchemeArgPresence::kRequired,
               .doc = "a^K"},
              {.name = "a_value",
               .type = SchemeArgType::kTensor,
               .shape = "[2 clip + 1, Dv]",
               .grad = SchemeArgGrad::kTrainable,
               .presence = SchemeArgPresence::kRequired,
               .doc = "a^V"},
              {.name = "head_dim",
               .type = SchemeArgType::kInteger,
               .default_text = "D",
               .doc = "head dimension; must equal q's"},
          },
  };
  return info;
}

// The calling thread's scratch rows indexed by clipped index, kept between
// calls (kernels::ThreadBuffers). Slots 1 and 2 are all zeros between uses:
// the functions that add into them zero every entry they used.
template <typename T>
struct ScratchRows {
  std::vector<T> slots[3];
};

// Slot `slot` of the leased rows, grown (with zeros) to at least n entries.
template <typename T>
std::vector<T>& Scratch(kernels::ThreadBuffers<ScratchRows<T>>& lease, int slot, std::int64_t n) {
  std::vector<T>& b = lease.get().slots[slot];
  if (static_cast<std::int64_t>(b.size()) < n) b.assign(static_cast<std::size_t>(n), T(0));
  return b;
}

class ShawScheme final : public SchemeImpl<ShawScheme> {
 public:
  ShawScheme(std::int64_t clip, std::int64_t D, std::int64_t Dv, const std::vector<double>& a_key,
             const std::vector<double>& a_value)
      : SchemeImpl(Info()),
        clip_(clip),
        D_(D),
        Dv_(Dv),
        key_d_(a_key),
        value_d_(a_value),
        key_f_(a_key.begin(), a_key.end()),
        value_f_(a_value.begin(), a_value.end()) {}

  void Record(const TensorView& a_key, const TensorView& a_value) {
    AddTrainable("a_key", a_key);
    AddTrainable("a_value", a_value);
  }

  // out[j] = scale * q . a^K[idx(p, r_j)], one dot per index of the row.
  template <typename T>
  void Logit(const SchemeRow<T>& row, T scale, T* out) const {
    const auto [lo, hi] = Range(row);
    kernels::ThreadBuffers<ScratchRows<T>> lease;
    std::vector<T>& dot = Scratch<T>(lease, 0, Rows());
    const T* a = Key<T>();
    for (std::int64_t idx = lo; idx <= hi; ++idx) {
      T s = T(0);
      for (std::int64_t x = 0; x < D_; ++x) s += row.q[x] * a[idx * D_ + x];
      dot[static_cast<std::size_t>(idx)] = scale * s;
    }
    for (std::int64_t j = 0; j < row.nk; ++j) out[j] = dot[static_cast<std::size_t>(Idx(row, j))];
  }

  // acc += sum_j P_ij a^V[idx]: P summed per index first.
  template <typename T>
  void Values(const SchemeRow<T>& row, const T* probs, T* acc) const {
    kernels::ThreadBuffers<ScratchRows<T>> lease;
    std::vector<T>& w = Scratch<T>(lease, 1, Rows());
    std::int64_t lo = Rows(), hi = -1;
    for (std::int64_t j = 0; j < row.nk; ++j) {
      if (probs[j] == T(0)) continue;
      const std::int64_t idx = Idx(row, j);
      w[static_cast<std::size_t>(idx)] += probs[j];
      lo = std::min(lo, idx);
      hi = std::max(hi, idx);
    }
    const T* a = Value<T>();
    for (std::int64_t idx = lo; idx <= hi; ++idx) {
      const T p = w[static_cast<std::size_t>(idx)];
      w[static_cast<std::size_t>(idx)] = T(0);
      for (std::int64_t x = 0; x < Dv_; ++x) acc[x] += p * a[idx * Dv_ + x];
    }
  }

  // dp[j] += dO . a^V[idx] - delta, combined in float64 once per index.
  template <typename T>
  void ValueGrad(const SchemeRow<T>& row, const T* dout, double delta, T* dp) const {
    const auto [lo, hi] = Range(row);
    kernels::ThreadBuffers<ScratchRows<T>> lease;
    std::vector<T>& c = Scratch<T>(lease, 0, Rows());
    for (std::int64_t idx = lo; idx <= hi; ++idx) {
      const T* av = Value<T>() + idx * Dv_;
      double dot = 0.0;
      for (std::int64_t x = 0; x < Dv_; ++x) dot += static_cast<double>(dout[x]) * av[x];
      c[static_cast<std::size_t>(idx)] = static_cast<T>(dot - delta);
    }
    for (std::int64_t j = 0; j < row.nk; ++j) dp[j] += c[static_cast<std::size_t>(Idx(row, j))];
  }

  // dS and P summed per index, then one axpy per index: dq += gs a^K
  // (unscaled, like the caller's dS k), da^K += scale gs q, da^V += gp dO.
  template <typename T>
  void Backward(const SchemeRow<T>& row, const T* probs, const T* ds, const T* dout, T scale, T* dq,
                T* /*dk*/, SchemeGradSums& sums) const {
    kernels::ThreadBuffers<ScratchRows<T>> lease;
    std::vector<T>& w_ds = Scratch<T>(lease, 1, Rows());
    std::vector<T>& w_p = Scratch<T>(lease, 2, Rows());
    std::int64_t lo = Rows(), hi = -1;
    for (std::int64_t j = 0; j < row.nk; ++j) {
      if (probs[j] == T(0)) continue;
      const std::int64_t idx = Idx(row, j);
      w_ds[static_cast<std::size_t>(idx)] += ds[j];
      w_p[static_cast<std::size_t>(idx)] += probs[j];
      lo = std::min(lo, idx);
      hi = std::max(hi, idx);
    }
    std::vector<double>& gk = sums.tensors[0];
    std::vector<double>& gv = sums.tensors[1];
    for (std::int64_t idx = lo; idx <= hi; ++idx) {
      const T gs = w_ds[static_cast<std::size_t>(idx)], gp = w_p[static_cast<std::size_t>(idx)];
      w_ds[static_cast<std::size_t>(idx)] = w_p[static_cast<std::size_t>(idx)] = T(0);
      const T* ak = Key<T>() + idx * D_;
      for (std::int64_t x = 0; x < D_; ++x) dq[x] += gs * ak[x];
      const double sg = static_cast<double>(scale) * static_cast<double>(gs);
      for (std::int64_t x = 0; x < D_; ++x) {
        gk[static_cast<std::size_t>(idx * D_ + x)] += sg * static_cast<double>(row.q[x]);
      }
      for (std::int64_t x = 0; x < Dv_; ++x) {
        gv[static_cast<std::size_t>(idx * Dv_ + x)] +=
            static_cast<double>(gp) * static_cast<double>(dout[x]);
      }
    }
  }

 private:
  std::int64_t Rows() const { return 2 * clip_ + 1; }
  template <typename T>
  std::int64_t Idx(const SchemeRow<T>& row, std::int64_t j) const {
    return ShawIndex(clip_, row.qpos, row.kpos[j]);
  }
  template <typename T>
  std::pair<std::int64_t, std::int64_t> Range(const SchemeRow<T>& row) const {
    std::int64_t lo = Rows(), hi = -1;
    for (std::int64_t j = 0; j < row.nk; ++j) {
      const std::int64_t idx = Idx(row, j);
      lo = std::min(lo, idx);
      hi = std::max(hi, idx);
    }
    return {lo, hi};
  }
  template <typename T>
  const T* Key() const {
    if constexpr (std::is_same_v<T, float>)
      return key_f_.data();
    else
      return key_d_.data();
  }
  template <typename T>
  const T* Value() const {
    if constexpr (std::is_same_v<T, float>)
      return value_f_.data();
    else
      return value_d_.data();
  }

  std::int64_t clip_, D_, Dv_;
  std::vector<double> key_d_, value_d_;
  std::vector<float> key_f_, value_f_;
};

std::unique_ptr<SchemePolicy> Resolve(const SchemeArgs& args, const SchemeCall& call) {
  const SchemeArgReader a(Info(), args);
  const std::int64_t D = call.dims.head_dim, Dv = call.dims.value_dim;
  ShawParams sp;
  sp.clip = a.Integer("clip", 16);
  sp.head_dim = a.Integer("head_dim", D);
  ValidateShawParams(sp);
  if (sp.head_dim != D) {
    FailArgument(a.Name("params.head_dim"), sp.head_dim,
                 "the head dimension of q and k (" + std::to_string(D) + ")");
  }
  const std::int64_t rows = sp.TableRows();
  const std::vector<double> a_key = a.Table("a_key", {rows, D});
  const std::vector<double> a_value = a.Table("a_value", {rows, Dv});
  auto scheme = std::make_unique<ShawScheme>(sp.clip, D, Dv, a_key, a_value);
  scheme->Record(a.RequiredTensor("a_key"), a.RequiredTensor("a_value"));
  return scheme;
}

}  // namespace

POSENC_REGISTER_SCHEME(shaw, &Info, &Resolve)

}  // namespace posenc::attention_internal

namespace posenc {

PositionScheme ShawScheme(const ShawParams& params, const TensorView& a_key,
                          const TensorView& a_value) {
  SchemeArgs a;
  a.Integer("clip", params.clip).Integer("head_dim", params.head_dim);
  a.Tensor("a_key", a_key).Tensor("a_value", a_value);
  return PositionScheme::Registered("shaw", std::move(a));
}

}  // namespace posenc
