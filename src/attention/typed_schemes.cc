// The typed C++ front door of the built-in schemes (include/posenc/
// attention.h: PositionScheme's kinds, typed members and factories) and its
// mapping onto the registry's named arguments (TypedSchemeArgs). This file
// is frozen with the built-in kinds: a new scheme is reached through
// PositionScheme::Registered and its own typed factory (e.g. posenc/fire.h),
// never through a new kind here.
#include <string>

#include "attention/scheme_policy.h"
#include "posenc/error.h"

namespace posenc {

namespace {
using Kind = PositionScheme::Kind;
constexpr Kind kKinds[] = {Kind::kNone, Kind::kAbsolute, Kind::kRope,          Kind::kAlibi,
                           Kind::kT5,   Kind::kShaw,     Kind::kTransformerXL, Kind::kDeBERTa};
}  // namespace

std::string_view PositionSchemeKindName(PositionScheme::Kind kind) {
  switch (kind) {
    case Kind::kNone:
      return "none";
    case Kind::kAbsolute:
      return "absolute";
    case Kind::kRope:
      return "rope";
    case Kind::kAlibi:
      return "alibi";
    case Kind::kT5:
      return "t5";
    case Kind::kShaw:
      return "shaw";
    case Kind::kTransformerXL:
      return "transformer_xl";
    case Kind::kDeBERTa:
      return "deberta";
    case Kind::kRegistered:
      return "registered";
  }
  return "?";
}

PositionScheme::Kind ParsePositionSchemeKind(std::string_view text, std::string_view arg) {
  for (Kind k : kKinds) {
    if (text == PositionSchemeKindName(k)) return k;
  }
  throw InvalidArgument(
      ArgMessage(arg, std::string(text),
                 "one of none, absolute, rope, alibi, t5, shaw, transformer_xl, deberta"));
}

PositionScheme PositionScheme::Registered(std::string_view name, SchemeArgs args) {
  FindScheme(name, "scheme.name");
  PositionScheme s;
  s.kind = Kind::kRegistered;
  s.name = std::string(name);
  s.args = std::move(args);
  return s;
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
                                                 const TensorView& r_r_bias, const TensorView& rw) {
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

// A rank-1 float64 view of a vector (shape [size]; a size of 0 is kept so
// that the scheme's size check names it).
TensorView VectorView(const std::vector<double>& v) {
  TensorView t;
  t.data = const_cast<double*>(v.data());
  t.dtype = DType::kFloat64;
  t.rank = 1;
  t.shape[0] = static_cast<std::int64_t>(v.size());
  t.strides[0] = 1;
  return t;
}

}  // namespace

SchemeArgs TypedSchemeArgs(const PositionScheme& s) {
  SchemeArgs a;
  a.Reserve(8);  // one block for every kind's members
  switch (s.kind) {
    case Kind::kNone:
    case Kind::kAbsolute:
    case Kind::kRegistered:
      break;
    case Kind::kRope: {
      const RopeParams& r = s.rope;
      a.Integer("head_dim", r.head_dim).Integer("rotary_dim", r.rotary_dim);
      a.Number("theta", r.theta).Text("pairing", RopePairingName(r.pairing));
      a.Text("numerics", RopeNumericsName(r.numerics));
      if (!r.frequencies.inv_freq.empty()) a.Tensor("inv_freq", VectorView(r.frequencies.inv_freq));
      a.Number("attention_factor", r.frequencies.attention_factor);
      break;
    }
    case Kind::kAlibi:
      a.Tensor("slopes", VectorView(s.alibi.slopes));
      break;
    case Kind::kT5: {
      const T5BiasTable* t = s.t5.table;
      Require(t != nullptr, "scheme.t5.table", "null", "a T5BiasTable");
      a.Tensor("table",
               TensorView::Contiguous(t->data(), DType::kFloat32, {t->num_buckets(), t->heads()}));
      a.Integer("max_distance", t->bucketer().params().max_distance);
      a.Flag("bidirectional", t->bucketer().params().direction == T5Direction::kBidirectional);
      break;
    }
    case Kind::kShaw:
      a.Integer("clip", s.shaw.params.clip).Integer("head_dim", s.shaw.params.head_dim);
      a.Tensor("a_key", s.shaw.a_key).Tensor("a_value", s.shaw.a_value);
      break;
    case Kind::kTransformerXL:
      a.Tensor("r_w_bias", s.transformer_xl.r_w_bias).Tensor("r_r_bias", s.transformer_xl.r_r_bias);
      a.Tensor("rw", s.transformer_xl.rw);
      break;
    case Kind::kDeBERTa: {
      const DebertaParams& p = s.deberta.params;
      a.Integer("position_buckets", p.position_buckets);
      a.Integer("max_relative_positions", p.max_relative_positions);
      a.Text("pos_att_type", DebertaPosAttTypeName(p.pos_att_type));
      a.Integer("head_dim", p.head_dim);
      if (s.deberta.pos_key.data != nullptr) a.Tensor("pos_key", s.deberta.pos_key);
      if (s.deberta.pos_query.data != nullptr) a.Tensor("pos_query", s.deberta.pos_query);
      break;
    }
  }
  return a;
}

}  // namespace attention_internal
}  // namespace posenc
