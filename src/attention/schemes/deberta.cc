// Scheme "deberta": DeBERTa's disentangled attention (He et al. 2021,
// "DeBERTa: Decoding-enhanced BERT with Disentangled Attention", eq. (4);
// conventions and index functions of posenc/deberta.h).
//   logit(i, j) = scale * (q_i . k_j + [c2p] q_i . Kr[c2p(p, r), h]
//                                    + [p2c] k_j . Qr[p2c(p, r), h])
// Kr / Qr [2 att_span, H, D] are the projected relative embeddings
// (trainable); the default scale is 1 / sqrt(D (1 + #terms)) (DebertaScale).
// Reference only (the p2c term reads k_j): the fused kernels reject it.
// Reference: HF DebertaV2 DisentangledSelfAttention (golden buckets in
// tests/golden/deberta_buckets.json; the paper's index order, see deberta.h).
#include <optional>
#include <string>

#include "attention/scheme_policy.h"
#include "posenc/deberta.h"
#include "posenc/error.h"

namespace posenc::attention_internal {
namespace {

const SchemeInfo& Info() {
  static const SchemeInfo info{
      .name = "deberta",
      .title = "DeBERTa disentangled attention",
      .paper = "He et al. 2021, DeBERTa: Decoding-enhanced BERT with Disentangled Attention",
      .formula = "logit = scale * (q . k + q . Kr[c2p] + k . Qr[p2c])",
      .terms = static_cast<std::uint8_t>(SchemeTerm::kLogit),
      .kernels = SchemeKernels::kReferenceOnly,
      .masks = SchemeMasks::kAny,
      .args =
          {
              {.name = "pos_key",
               .type = SchemeArgType::kTensor,
               .shape = "[2 att_span, H, D]",
               .grad = SchemeArgGrad::kTrainable,
               .doc = "Kr (required with c2p)"},
              {.name = "pos_query",
               .type = SchemeArgType::kTensor,
               .shape = "[2 att_span, H, D]",
               .grad = SchemeArgGrad::kTrainable,
               .doc = "Qr (required with p2c)"},
              {.name = "position_buckets",
               .type = SchemeArgType::kInteger,
               .default_text = "256",
               .doc = "log buckets (<= 0: none)"},
              {.name = "max_relative_positions",
               .type = SchemeArgType::kInteger,
               .default_text = "512",
               .doc = "k of the paper"},
              {.name = "pos_att_type",
               .type = SchemeArgType::kText,
               .default_text = "c2p|p2c",
               .doc = "none, c2p, p2c or c2p|p2c"},
              {.name = "head_dim",
               .type = SchemeArgType::kInteger,
               .default_text = "D",
               .doc = "head dimension; must equal q's"},
          },
  };
  return info;
}

DebertaParams ParamsOf(const SchemeArgReader& a, std::int64_t head_dim) {
  DebertaParams d;
  d.position_buckets = a.Integer("position_buckets", 256);
  d.max_relative_positions = a.Integer("max_relative_positions", 512);
  d.pos_att_type =
      ParseDebertaPosAttType(a.Text("pos_att_type", "c2p|p2c"), a.Name("pos_att_type"));
  d.head_dim = a.Integer("head_dim", head_dim);
  return d;
}

class DebertaScheme final : public SchemeImpl<DebertaScheme> {
 public:
  DebertaScheme(const DebertaParams& params, const Dims& d, std::vector<double> pos_key,
                std::vector<double> pos_query)
      : SchemeImpl(Info()),
        rel_(params),
        H_(d.heads),
        D_(d.head_dim),
        pos_key_(std::move(pos_key)),
        pos_query_(std::move(pos_query)) {}

  void Record(const SchemeArgReader& a) {
    // Gradient slots for both tables (an absent table's stays unused).
    for (const char* name : {"pos_key", "pos_query"}) {
      const TensorView* t = a.Tensor(name);
      TensorView shape;
      shape.rank = 3;
      shape.shape = {2 * rel_.att_span(), H_, D_};
      AddTrainable(name, t != nullptr ? *t : shape);
    }
  }

  template <typename T>
  void Logit(const SchemeRow<T>& row, T scale, T* out) const {
    for (std::int64_t j = 0; j < row.nk; ++j) {
      T s = T(0);
      if (!pos_key_.empty()) s += Dot(row.q, KeyRow(row, j));
      if (!pos_query_.empty()) s += Dot(row.k + j * row.k_stride, QueryRow(row, j));
      out[j] = scale * s;
    }
  }

  template <typename T>
  void Backward(const SchemeRow<T>& row, const T* /*probs*/, const T* ds, const T* /*dout*/,
                T scale, T* dq, T* dk, SchemeGradSums& sums) const {
    for (std::int64_t j = 0; j < row.nk; ++j) {
      if (ds[j] == T(0)) continue;
      const double g = static_cast<double>(scale) * static_cast<double>(ds[j]);
      if (!pos_key_.empty()) {
        const double* kr = KeyRow(row, j);
        double* gk = &sums.tensors[0][static_cast<std::size_t>(kr - pos_key_.data())];
        for (std::int64_t x = 0; x < D_; ++x) {
          dq[x] += ds[j] * static_cast<T>(kr[x]);
          gk[x] += g * static_cast<double>(row.q[x]);
        }
      }
      if (!pos_query_.empty()) {
        const double* qr = QueryRow(row, j);
        const T* k = row.k + j * row.k_stride;
        T* dkj = dk + j * row.k_stride;
        double* gq = &sums.tensors[1][static_cast<std::size_t>(qr - pos_query_.data())];
        for (std::int64_t x = 0; x < D_; ++x) {
          dkj[x] += ds[j] * static_cast<T>(qr[x]);
          gq[x] += g * static_cast<double>(k[x]);
        }
      }
    }
  }

 private:
  template <typename T>
  const double* KeyRow(const SchemeRow<T>& row, std::int64_t j) const {
    return &pos_key_[static_cast<std::size_t>(
        (rel_.C2PIndex(row.qpos, row.kpos[j]) * H_ + row.head) * D_)];
  }
  template <typename T>
  const double* QueryRow(const SchemeRow<T>& row, std::int64_t j) const {
    return &pos_query_[static_cast<std::size_t>(
        (rel_.P2CIndex(row.qpos, row.kpos[j]) * H_ + row.head) * D_)];
  }
  template <typename T>
  T Dot(const T* a, const double* b) const {
    T s = T(0);
    for (std::int64_t x = 0; x < D_; ++x) s += a[x] * static_cast<T>(b[x]);
    return s;
  }

  DebertaRelative rel_;
  std::int64_t H_, D_;
  std::vector<double> pos_key_, pos_query_;
};

std::unique_ptr<SchemePolicy> Resolve(const SchemeArgs& args, const SchemeCall& call) {
  const SchemeArgReader a(Info(), args);
  const std::int64_t H = call.dims.heads, D = call.dims.head_dim;
  const DebertaParams params = ParamsOf(a, D);
  if (params.head_dim != D) {
    FailArgument(a.Name("params.head_dim"), params.head_dim,
                 "the head dimension of q and k (" + std::to_string(D) + ")");
  }
  const DebertaRelative rel(params);  // validates
  const std::int64_t rows = 2 * rel.att_span();
  const auto type = static_cast<unsigned>(params.pos_att_type);
  std::vector<double> pos_key, pos_query;
  if (type & static_cast<unsigned>(DebertaPosAttType::kC2P)) {
    pos_key = a.Table("pos_key", {rows, H, D});
  }
  if (type & static_cast<unsigned>(DebertaPosAttType::kP2C)) {
    pos_query = a.Table("pos_query", {rows, H, D});
  }
  auto scheme =
      std::make_unique<DebertaScheme>(params, call.dims, std::move(pos_key), std::move(pos_query));
  scheme->Record(a);
  return scheme;
}

double DefaultScale(const SchemeArgs& args, std::int64_t head_dim) {
  const SchemeArgReader a(Info(), args);
  return DebertaScale(ParamsOf(a, head_dim));
}

}  // namespace

POSENC_REGISTER_SCHEME(deberta, &Info, &Resolve, &DefaultScale)

}  // namespace posenc::attention_internal

namespace posenc {

PositionScheme DebertaScheme(const DebertaParams& p, const TensorView& pos_key,
                             const TensorView& pos_query) {
  SchemeArgs a;
  a.Integer("position_buckets", p.position_buckets);
  a.Integer("max_relative_positions", p.max_relative_positions);
  a.Text("pos_att_type", DebertaPosAttTypeName(p.pos_att_type));
  a.Integer("head_dim", p.head_dim);
  if (pos_key.data != nullptr) a.Tensor("pos_key", pos_key);
  if (pos_query.data != nullptr) a.Tensor("pos_query", pos_query);
  return PositionScheme::Registered("deberta", std::move(a));
}

}  // namespace posenc
