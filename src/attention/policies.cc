// Positional policies of the reference attention: scheme names, factories,
// validation, and the per-pair position terms with their gradients.
// Formulas: include/posenc/attention.h and the scheme headers (t5.h, shaw.h,
// transformer_xl.h, deberta.h), whose index helpers are used here
// (T5Bucketer, ShawIndex, TransformerXLRow, DebertaRelative). Arithmetic in
// float64.
#include "attention/policies.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "posenc/error.h"
#include "posenc/transformer_xl.h"

namespace posenc {

namespace {
using Kind = PositionScheme::Kind;
constexpr Kind kKinds[] = {Kind::kNone, Kind::kAbsolute, Kind::kRope, Kind::kAlibi,
                           Kind::kT5,   Kind::kShaw,     Kind::kTransformerXL, Kind::kDeBERTa};
}  // namespace

std::string_view PositionSchemeKindName(PositionScheme::Kind kind) {
  switch (kind) {
    case Kind::kNone: return "none";
    case Kind::kAbsolute: return "absolute";
    case Kind::kRope: return "rope";
    case Kind::kAlibi: return "alibi";
    case Kind::kT5: return "t5";
    case Kind::kShaw: return "shaw";
    case Kind::kTransformerXL: return "transformer_xl";
    case Kind::kDeBERTa: return "deberta";
  }
  return "?";
}

PositionScheme::Kind ParsePositionSchemeKind(std::string_view text, std::string_view arg) {
  for (Kind k : kKinds) {
    if (text == PositionSchemeKindName(k)) return k;
  }
  throw InvalidArgument(ArgMessage(
      arg, std::string(text),
      "one of none, absolute, rope, alibi, t5, shaw, transformer_xl, deberta"));
}

PositionScheme PositionScheme::Absolute() {
  PositionScheme s;
  s.kind = Kind::kAbsolute;
  return s;
}

PositionScheme PositionScheme::FromRope(const RopeParams& params) {
  PositionScheme s;
  s.kind = Kind::kRope;
  s.rope = params;
  return s;
}

PositionScheme PositionScheme::FromAlibi(std::vector<double> slopes) {
  PositionScheme s;
  s.kind = Kind::kAlibi;
  s.alibi.slopes = std::move(slopes);
  return s;
}

PositionScheme PositionScheme::FromT5(const T5BiasTable& table) {
  PositionScheme s;
  s.kind = Kind::kT5;
  s.t5.table = &table;
  return s;
}

PositionScheme PositionScheme::FromShaw(const ShawParams& params, const TensorView& a_key,
                                        const TensorView& a_value) {
  PositionScheme s;
  s.kind = Kind::kShaw;
  s.shaw = {params, a_key, a_value};
  return s;
}

PositionScheme PositionScheme::FromTransformerXL(const TensorView& r_w_bias,
                                                 const TensorView& r_r_bias,
                                                 const TensorView& rw) {
  PositionScheme s;
  s.kind = Kind::kTransformerXL;
  s.transformer_xl = {r_w_bias, r_r_bias, rw};
  return s;
}

PositionScheme PositionScheme::FromDeBERTa(const DebertaParams& params, const TensorView& pos_key,
                                           const TensorView& pos_query) {
  PositionScheme s;
  s.kind = Kind::kDeBERTa;
  s.deberta = {params, pos_key, pos_query};
  return s;
}

namespace attention_internal {

namespace {

std::string ShapeText(std::initializer_list<std::int64_t> shape) {
  std::string s = "[";
  bool first = true;
  for (auto n : shape) {
    s += (first ? "" : ", ") + std::to_string(n);
    first = false;
  }
  return s + "]";
}

void CheckShape(const TensorView& view, std::string_view arg,
                std::initializer_list<std::int64_t> shape, bool writable) {
  ValidateView(view, arg, static_cast<int>(shape.size()), writable);
  int d = 0;
  for (auto n : shape) {
    Require(view.shape[d] == n, std::string(arg), view.Describe(), "shape " + ShapeText(shape));
    ++d;
  }
}

// Offset in elements of row-major index `flat` of a view.
std::int64_t Offset(const TensorView& view, std::int64_t flat) {
  std::int64_t off = 0;
  for (int d = view.rank - 1; d >= 0; --d) {
    off += (flat % view.shape[d]) * view.strides[d];
    flat /= view.shape[d];
  }
  return off;
}

double Dot(const double* a, const double* b, std::int64_t n) {
  double s = 0.0;
  for (std::int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void Axpy(double alpha, const double* x, double* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

}  // namespace

std::vector<double> CopyTable(const TensorView& view, std::string_view arg,
                              std::initializer_list<std::int64_t> shape) {
  CheckShape(view, arg, shape, /*writable=*/false);
  std::vector<double> out(static_cast<std::size_t>(view.NumElements()));
  for (std::int64_t i = 0; i < view.NumElements(); ++i) {
    out[static_cast<std::size_t>(i)] = LoadAsDouble(view.data, view.dtype, Offset(view, i));
  }
  return out;
}

void StoreTable(const std::vector<double>& values, const TensorView& view, std::string_view arg,
                std::initializer_list<std::int64_t> shape) {
  CheckShape(view, arg, shape, /*writable=*/true);
  for (std::int64_t i = 0; i < view.NumElements(); ++i) {
    StoreFromDouble(view.data, view.dtype, Offset(view, i), values[static_cast<std::size_t>(i)]);
  }
}

Policy::Policy(const PositionScheme& scheme, const Dims& dims) : kind_(scheme.kind), dims_(dims) {
  const std::int64_t H = dims.heads, D = dims.head_dim, Dv = dims.value_dim;
  switch (kind_) {
    case Kind::kNone:
    case Kind::kAbsolute:
      break;
    case Kind::kRope:
      ValidateRopeParams(scheme.rope);
      Require(scheme.rope.head_dim == D, "scheme.rope.head_dim", scheme.rope.head_dim,
              "the head dimension of q and k (" + std::to_string(D) + ")");
      break;
    case Kind::kAlibi: {
      const auto& s = scheme.alibi.slopes;
      Require(static_cast<std::int64_t>(s.size()) == H, "scheme.alibi.slopes.size()", s.size(),
              "one slope per query head (" + std::to_string(H) + ")");
      for (std::size_t h = 0; h < s.size(); ++h) {
        Require(std::isfinite(s[h]) && s[h] >= 0.0, "scheme.alibi.slopes[" + std::to_string(h) + "]",
                s[h], "a finite slope >= 0");
      }
      slopes_ = s;
      break;
    }
    case Kind::kT5:
      Require(scheme.t5.table != nullptr, "scheme.t5.table", "null", "a T5BiasTable");
      Require(scheme.t5.table->heads() == H, "scheme.t5.table heads", scheme.t5.table->heads(),
              "the number of query heads (" + std::to_string(H) + ")");
      t5_ = scheme.t5.table;
      break;
    case Kind::kShaw: {
      ValidateShawParams(scheme.shaw.params);
      Require(scheme.shaw.params.head_dim == D, "scheme.shaw.params.head_dim",
              scheme.shaw.params.head_dim, "the head dimension of q and k (" + std::to_string(D) + ")");
      shaw_clip_ = scheme.shaw.params.clip;
      const std::int64_t rows = scheme.shaw.params.TableRows();
      a_key_ = CopyTable(scheme.shaw.a_key, "scheme.shaw.a_key", {rows, D});
      a_value_ = CopyTable(scheme.shaw.a_value, "scheme.shaw.a_value", {rows, Dv});
      break;
    }
    case Kind::kTransformerXL: {
      const auto& xl = scheme.transformer_xl;
      xl_u_ = CopyTable(xl.r_w_bias, "scheme.transformer_xl.r_w_bias", {H, D});
      xl_v_ = CopyTable(xl.r_r_bias, "scheme.transformer_xl.r_r_bias", {H, D});
      ValidateView(xl.rw, "scheme.transformer_xl.rw", 3);
      xl_rows_ = xl.rw.shape[0];
      xl_rw_ = CopyTable(xl.rw, "scheme.transformer_xl.rw", {xl_rows_, H, D});
      break;
    }
    case Kind::kDeBERTa: {
      const auto& db = scheme.deberta;
      Require(db.params.head_dim == D, "scheme.deberta.params.head_dim", db.params.head_dim,
              "the head dimension of q and k (" + std::to_string(D) + ")");
      deberta_.emplace(db.params);
      const std::int64_t rows = 2 * deberta_->att_span();
      const auto type = static_cast<unsigned>(db.params.pos_att_type);
      if (type & static_cast<unsigned>(DebertaPosAttType::kC2P)) {
        pos_key_ = CopyTable(db.pos_key, "scheme.deberta.pos_key", {rows, H, D});
      }
      if (type & static_cast<unsigned>(DebertaPosAttType::kP2C)) {
        pos_query_ = CopyTable(db.pos_query, "scheme.deberta.pos_query", {rows, H, D});
      }
      break;
    }
  }
}

void Policy::CheckPair(std::int64_t qpos, std::int64_t kpos) const {
  if (kind_ != Kind::kTransformerXL) return;
  const std::int64_t distance = qpos - kpos;
  if (distance >= xl_rows_) {
    throw InvalidArgument(
        "scheme.transformer_xl.rw: got " + std::to_string(xl_rows_) +
        " rows, expected more than the largest visible query-key distance (" +
        std::to_string(distance) + ", query position " + std::to_string(qpos) +
        ", key position " + std::to_string(kpos) + ")");
  }
}

double Policy::ContentTerm(std::int64_t h, const double* q, const double* k, std::int64_t qpos,
                           std::int64_t kpos) const {
  const std::int64_t D = dims_.head_dim, H = dims_.heads;
  switch (kind_) {
    case Kind::kShaw:
      return Dot(q, &a_key_[static_cast<std::size_t>(ShawIndex(shaw_clip_, qpos, kpos) * D)], D);
    case Kind::kTransformerXL: {
      double s = Dot(&xl_u_[static_cast<std::size_t>(h * D)], k, D);
      const std::int64_t distance = qpos - kpos;
      if (distance >= 0) {
        const double* rw =
            &xl_rw_[static_cast<std::size_t>((TransformerXLRow(xl_rows_, distance) * H + h) * D)];
        s += Dot(q, rw, D) + Dot(&xl_v_[static_cast<std::size_t>(h * D)], rw, D);
      }
      return s;
    }
    case Kind::kDeBERTa: {
      double s = 0.0;
      if (!pos_key_.empty()) {
        s += Dot(q, &pos_key_[static_cast<std::size_t>((deberta_->C2PIndex(qpos, kpos) * H + h) * D)], D);
      }
      if (!pos_query_.empty()) {
        s += Dot(k, &pos_query_[static_cast<std::size_t>((deberta_->P2CIndex(qpos, kpos) * H + h) * D)], D);
      }
      return s;
    }
    default:
      return 0.0;
  }
}

double Policy::BiasTerm(std::int64_t h, std::int64_t qpos, std::int64_t kpos) const {
  if (kind_ == Kind::kAlibi) {
    return 0.0 - slopes_[static_cast<std::size_t>(h)] * static_cast<double>(std::llabs(qpos - kpos));
  }
  if (kind_ == Kind::kT5) return static_cast<double>(t5_->Bias(h, qpos, kpos));
  return 0.0;
}

const double* Policy::ValueRow(std::int64_t qpos, std::int64_t kpos) const {
  if (kind_ != Kind::kShaw) return nullptr;
  return &a_value_[static_cast<std::size_t>(ShawIndex(shaw_clip_, qpos, kpos) * dims_.value_dim)];
}

TableGrads Policy::ZeroGrads() const {
  TableGrads g;
  const auto H = static_cast<std::size_t>(dims_.heads), D = static_cast<std::size_t>(dims_.head_dim);
  if (kind_ == Kind::kT5) g.t5.assign(static_cast<std::size_t>(t5_->num_buckets()) * H, 0.0);
  if (kind_ == Kind::kShaw) {
    g.shaw_key.assign(a_key_.size(), 0.0);
    g.shaw_value.assign(a_value_.size(), 0.0);
  }
  if (kind_ == Kind::kTransformerXL) {
    g.xl_u.assign(H * D, 0.0);
    g.xl_v.assign(H * D, 0.0);
    g.xl_rw.assign(xl_rw_.size(), 0.0);
  }
  if (kind_ == Kind::kDeBERTa) {
    g.deb_key.assign(pos_key_.size(), 0.0);
    g.deb_query.assign(pos_query_.size(), 0.0);
  }
  return g;
}

void Policy::Backward(std::int64_t h, const double* q, const double* k, std::int64_t qpos,
                      std::int64_t kpos, double g_content, double g_bias, const double* p_dout,
                      double* dq, double* dk, TableGrads& grads) const {
  const std::int64_t D = dims_.head_dim, H = dims_.heads, Dv = dims_.value_dim;
  switch (kind_) {
    case Kind::kT5:
      grads.t5[static_cast<std::size_t>(t5_->bucketer().BucketOf(qpos, kpos) * H + h)] += g_bias;
      break;
    case Kind::kShaw: {
      const std::int64_t idx = ShawIndex(shaw_clip_, qpos, kpos);
      Axpy(g_content, &a_key_[static_cast<std::size_t>(idx * D)], dq, D);
      Axpy(g_content, q, &grads.shaw_key[static_cast<std::size_t>(idx * D)], D);
      Axpy(1.0, p_dout, &grads.shaw_value[static_cast<std::size_t>(idx * Dv)], Dv);
      break;
    }
    case Kind::kTransformerXL: {
      const auto hd = static_cast<std::size_t>(h * D);
      Axpy(g_content, &xl_u_[hd], dk, D);
      Axpy(g_content, k, &grads.xl_u[hd], D);
      const std::int64_t distance = qpos - kpos;
      if (distance >= 0) {
        const auto r = static_cast<std::size_t>((TransformerXLRow(xl_rows_, distance) * H + h) * D);
        Axpy(g_content, &xl_rw_[r], dq, D);
        Axpy(g_content, &xl_rw_[r], &grads.xl_v[hd], D);
        Axpy(g_content, q, &grads.xl_rw[r], D);
        Axpy(g_content, &xl_v_[hd], &grads.xl_rw[r], D);
      }
      break;
    }
    case Kind::kDeBERTa:
      if (!pos_key_.empty()) {
        const auto c = static_cast<std::size_t>((deberta_->C2PIndex(qpos, kpos) * H + h) * D);
        Axpy(g_content, &pos_key_[c], dq, D);
        Axpy(g_content, q, &grads.deb_key[c], D);
      }
      if (!pos_query_.empty()) {
        const auto p = static_cast<std::size_t>((deberta_->P2CIndex(qpos, kpos) * H + h) * D);
        Axpy(g_content, &pos_query_[p], dk, D);
        Axpy(g_content, k, &grads.deb_query[p], D);
      }
      break;
    default:
      break;
  }
}

AttentionDims CheckAttentionTensor(const TensorView& view, AttentionLayout layout,
                                   std::string_view arg, std::int64_t batch, std::int64_t seq,
                                   std::int64_t heads, std::int64_t dim, bool writable) {
  ValidateView(view, arg, 4, writable);
  const AttentionDims d = GetAttentionDims(view, layout, arg);
  Require(d.batch == batch && d.seq == seq && d.heads == heads && d.head_dim == dim,
          std::string(arg), view.Describe(),
          "[batch, seq, heads, dim] = [" + std::to_string(batch) + ", " + std::to_string(seq) +
              ", " + std::to_string(heads) + ", " + std::to_string(dim) + "] in layout " +
              std::string(LayoutName(layout)));
  return d;
}

CallShape ValidateCallShape(const AttentionParams& params, const TensorView& q,
                            const TensorView& k, const TensorView& v) {
  CallShape c;
  c.qd = GetAttentionDims(q, params.layout, "q");
  c.kd = GetAttentionDims(k, params.layout, "k");
  c.vd = GetAttentionDims(v, params.layout, "v");
  const auto& qd = c.qd;
  const auto& kd = c.kd;
  const auto& vd = c.vd;
  Require(kd.batch == qd.batch, "k batch", kd.batch, "q's batch (" + std::to_string(qd.batch) + ")");
  Require(vd.batch == qd.batch, "v batch", vd.batch, "q's batch (" + std::to_string(qd.batch) + ")");
  Require(kd.head_dim == qd.head_dim, "k head_dim", kd.head_dim,
          "q's head_dim (" + std::to_string(qd.head_dim) + ")");
  Require(vd.seq == kd.seq, "v seq", vd.seq, "k's seq (" + std::to_string(kd.seq) + ")");
  Require(vd.heads == kd.heads, "v heads", vd.heads, "k's heads (" + std::to_string(kd.heads) + ")");
  Require(qd.heads % kd.heads == 0, "k heads", kd.heads,
          "a divisor of q's heads (" + std::to_string(qd.heads) + ", grouped-query attention)");
  c.dims = Dims{qd.batch, qd.heads, kd.heads, qd.seq, kd.seq, qd.head_dim, vd.head_dim};
  if (params.sliding_window.has_value()) {
    Require(*params.sliding_window >= 1, "sliding_window", *params.sliding_window,
            "a window of at least 1 key (or no window)");
    c.window = *params.sliding_window;
  }
  if (params.query_positions.has_value()) {
    c.query_positions = *params.query_positions;
  } else {
    Require(qd.seq <= kd.seq, "query_positions", "default (bottom-right: Sk - Sq + i)",
            "explicit query positions when Sq (" + std::to_string(qd.seq) + ") > Sk (" +
                std::to_string(kd.seq) + ")");
    c.query_positions = Positions::Offset(kd.seq - qd.seq);
  }
  c.key_positions = params.key_positions.value_or(Positions::Offset(0));
  ValidatePositions(c.query_positions, qd.batch, qd.seq, "query_positions");
  ValidatePositions(c.key_positions, qd.batch, kd.seq, "key_positions");
  return c;
}

}  // namespace attention_internal
}  // namespace posenc
