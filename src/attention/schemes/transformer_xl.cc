// Scheme "transformer_xl": Transformer-XL relative attention (Dai et al.
// 2019, "Transformer-XL: Attentive Language Models Beyond a Fixed-Length
// Context", section 3.3; conventions of posenc/transformer_xl.h).
//   logit(i, j) = scale * (q_i . k_j + u_h . k_j + (q_i + v_h) . RW[row(p - r), h])
// with RW = W_R R the caller's projected sinusoids [R, H, D] in HF row
// order (row R - 1 - d encodes distance d); pairs with p < r
// (bidirectional) get the u_h . k_j term only. u, v and RW are trainable.
// Reference only (the term reads k_j): the fused kernels reject it.
// Reference: HF RelPartialLearnableMultiHeadAttn (removed in v5).
#include <string>

#include "attention/scheme_policy.h"
#include "posenc/error.h"
#include "posenc/transformer_xl.h"

namespace posenc::attention_internal {
namespace {

const SchemeInfo& Info() {
  static const SchemeInfo info{
      .name = "transformer_xl",
      .title = "Transformer-XL relative attention",
      .paper =
          "Dai et al. 2019, Transformer-XL: Attentive Language Models Beyond a "
          "Fixed-Length Context",
      .formula = "logit = scale * ((q + u) . k + (q + v) . RW[p - r])",
      .terms = static_cast<std::uint8_t>(SchemeTerm::kLogit),
      .kernels = SchemeKernels::kReferenceOnly,
      .masks = SchemeMasks::kAny,
      .args =
          {
              {.name = "r_w_bias",
               .type = SchemeArgType::kTensor,
               .shape = "[H, D]",
               .grad = SchemeArgGrad::kTrainable,
               .presence = SchemeArgPresence::kRequired,
               .doc = "u, the content bias"},
              {.name = "r_r_bias",
               .type = SchemeArgType::kTensor,
               .shape = "[H, D]",
               .grad = SchemeArgGrad::kTrainable,
               .presence = SchemeArgPresence::kRequired,
               .doc = "v, the position bias"},
              {.name = "rw",
               .type = SchemeArgType::kTensor,
               .shape = "[R, H, D]",
               .grad = SchemeArgGrad::kTrainable,
               .presence = SchemeArgPresence::kRequired,
               .doc = "W_R R, row R - 1 - d for distance d"},
          },
  };
  return info;
}

template <typename T>
T Dot(const T* a, const double* b, std::int64_t n) {
  T s = T(0);
  for (std::int64_t x = 0; x < n; ++x) s += a[x] * static_cast<T>(b[x]);
  return s;
}

class XlScheme final : public SchemeImpl<XlScheme> {
 public:
  XlScheme(const Dims& d, std::vector<double> u, std::vector<double> v, std::vector<double> rw,
           std::int64_t rows)
      : SchemeImpl(Info()),
        H_(d.heads),
        D_(d.head_dim),
        u_(std::move(u)),
        v_(std::move(v)),
        rw_(std::move(rw)),
        rows_(rows) {}

  void Record(const SchemeArgReader& a) {
    for (const char* name : {"r_w_bias", "r_r_bias", "rw"})
      AddTrainable(name, a.RequiredTensor(name));
  }

  void CheckPair(std::int64_t p, std::int64_t r) const override {
    const std::int64_t distance = p - r;
    if (distance >= rows_) {
      throw InvalidArgument("scheme.transformer_xl.rw: got " + std::to_string(rows_) +
                            " rows, expected more than the largest visible query-key distance (" +
                            std::to_string(distance) + ", query position " + std::to_string(p) +
                            ", key position " + std::to_string(r) + ")");
    }
  }

  template <typename T>
  void Logit(const SchemeRow<T>& row, T scale, T* out) const {
    const double* u = &u_[static_cast<std::size_t>(row.head * D_)];
    const double* v = &v_[static_cast<std::size_t>(row.head * D_)];
    for (std::int64_t j = 0; j < row.nk; ++j) {
      const T* k = row.k + j * row.k_stride;
      T s = Dot(k, u, D_);
      if (const double* rw = Rw(row.head, row.qpos - row.kpos[j]); rw != nullptr) {
        s += Dot(row.q, rw, D_) + static_cast<T>(DotD(v, rw));
      }
      out[j] = scale * s;
    }
  }

  template <typename T>
  void Backward(const SchemeRow<T>& row, const T* /*probs*/, const T* ds, const T* /*dout*/,
                T scale, T* dq, T* dk, SchemeGradSums& sums) const {
    const auto hd = static_cast<std::size_t>(row.head * D_);
    std::vector<double>& gu = sums.tensors[0];
    std::vector<double>& gv = sums.tensors[1];
    std::vector<double>& grw = sums.tensors[2];
    for (std::int64_t j = 0; j < row.nk; ++j) {
      if (ds[j] == T(0)) continue;
      const T* k = row.k + j * row.k_stride;
      T* dkj = dk + j * row.k_stride;
      const double g = static_cast<double>(scale) * static_cast<double>(ds[j]);
      for (std::int64_t x = 0; x < D_; ++x) {
        dkj[x] += ds[j] * static_cast<T>(u_[hd + static_cast<std::size_t>(x)]);
        gu[hd + static_cast<std::size_t>(x)] += g * static_cast<double>(k[x]);
      }
      const double* rw = Rw(row.head, row.qpos - row.kpos[j]);
      if (rw == nullptr) continue;
      const auto r = static_cast<std::size_t>(rw - rw_.data());
      for (std::int64_t x = 0; x < D_; ++x) {
        const auto xi = static_cast<std::size_t>(x);
        dq[x] += ds[j] * static_cast<T>(rw[x]);
        gv[hd + xi] += g * rw[x];
        grw[r + xi] += g * (static_cast<double>(row.q[x]) + v_[hd + xi]);
      }
    }
  }

 private:
  // RW row of distance d for head h, or null for d < 0.
  const double* Rw(std::int64_t h, std::int64_t distance) const {
    if (distance < 0) return nullptr;
    return &rw_[static_cast<std::size_t>((TransformerXLRow(rows_, distance) * H_ + h) * D_)];
  }
  double DotD(const double* a, const double* b) const {
    double s = 0.0;
    for (std::int64_t x = 0; x < D_; ++x) s += a[x] * b[x];
    return s;
  }

  std::int64_t H_, D_;
  std::vector<double> u_, v_, rw_;
  std::int64_t rows_;
};

std::unique_ptr<SchemePolicy> Resolve(const SchemeArgs& args, const SchemeCall& call) {
  const SchemeArgReader a(Info(), args);
  const std::int64_t H = call.dims.heads, D = call.dims.head_dim;
  std::vector<double> u = a.Table("r_w_bias", {H, D});
  std::vector<double> v = a.Table("r_r_bias", {H, D});
  const TensorView& rw = a.RequiredTensor("rw");
  ValidateView(rw, a.Name("rw"), 3);
  const std::int64_t rows = rw.shape[0];
  auto scheme = std::make_unique<XlScheme>(call.dims, std::move(u), std::move(v),
                                           a.Table("rw", {rows, H, D}), rows);
  scheme->Record(a);
  return scheme;
}

}  // namespace

POSENC_REGISTER_SCHEME(transformer_xl, &Info, &Resolve)

}  // namespace posenc::attention_internal

namespace posenc {

PositionScheme TransformerXLScheme(const TensorView& r_w_bias, const TensorView& r_r_bias,
                                   const TensorView& rw) {
  SchemeArgs a;
  a.Tensor("r_w_bias", r_w_bias).Tensor("r_r_bias", r_r_bias).Tensor("rw", rw);
  return PositionScheme::Registered("transformer_xl", std::move(a));
}

}  // namespace posenc
