// The registry of positional schemes (posenc/scheme.h) and the generic
// parts of the scheme interface (attention/scheme_policy.h): named
// arguments, their validation against a declaration, resolution of a
// PositionScheme for one call, and the storage of the schemes' parameter
// gradients. Nothing here knows a particular scheme: each one lives in
// src/attention/schemes/<name>.cc and is listed once below.
#include <algorithm>
#include <cmath>
#include <string>

#include "attention/scheme_policy.h"
#include "posenc/error.h"

// ---- The registration list: one line per scheme, in listing order. ----
// Each name N is defined by src/attention/schemes/N.cc as
// `const SchemeEntry& SchemeEntry_N()` (POSENC_REGISTER_SCHEME there).
#define POSENC_SCHEMES(X) \
  X(none)                 \
  X(absolute)             \
  X(rope)                 \
  X(alibi)                \
  X(t5)                   \
  X(shaw)                 \
  X(transformer_xl)       \
  X(deberta)              \
  X(fire)

namespace posenc {
namespace attention_internal {

#define POSENC_DECLARE_SCHEME(n) const SchemeEntry& SchemeEntry_##n();
POSENC_SCHEMES(POSENC_DECLARE_SCHEME)
#undef POSENC_DECLARE_SCHEME

namespace {

struct Registry {
  std::vector<const SchemeEntry*> entries;
  std::vector<const SchemeInfo*> infos;
};

const Registry& TheRegistry() {
  static const Registry registry = [] {
    Registry r;
#define POSENC_LIST_SCHEME(n) r.entries.push_back(&SchemeEntry_##n());
    POSENC_SCHEMES(POSENC_LIST_SCHEME)
#undef POSENC_LIST_SCHEME
    for (const SchemeEntry* e : r.entries) r.infos.push_back(&e->info());
    return r;
  }();
  return registry;
}

// "a tensor", "an integer", ...
std::string Article(SchemeArgType type) {
  const std::string name(SchemeArgTypeName(type));
  return (type == SchemeArgType::kInteger ? "an " : "a ") + name;
}

const SchemeEntry& FindEntry(std::string_view name, std::string_view arg) {
  for (const SchemeEntry* e : TheRegistry().entries) {
    if (e->info().name == name) return *e;
  }
  throw InvalidArgument(ArgMessage(arg, std::string(name), "one of " + SchemeNames()));
}

}  // namespace

// ---- SchemePolicy defaults: a term the scheme does not declare. ----

std::int64_t TrainableTensor::Elements() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

void SchemePolicy::Unsupported(std::string_view what) const {
  throw Error("internal: scheme " + std::string(info_->name) + " has no " + std::string(what));
}

void SchemePolicy::LogitRow(const SchemeRow<float>&, float, float*) const {
  Unsupported("logit terms");
}
void SchemePolicy::LogitRow(const SchemeRow<double>&, double, double*) const {
  Unsupported("logit terms");
}
void SchemePolicy::DistanceBias(std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                                float*) const {
  Unsupported("distance bias");
}
void SchemePolicy::DistanceGrad(std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                                const double*, SchemeGradSums&) const {}
void SchemePolicy::AddValues(const SchemeRow<float>&, const float*, float*) const {
  Unsupported("value terms");
}
void SchemePolicy::AddValues(const SchemeRow<double>&, const double*, double*) const {
  Unsupported("value terms");
}
void SchemePolicy::ValueGradRow(const SchemeRow<float>& row, const float*, double delta,
                                float* dp) const {
  const auto d = static_cast<float>(delta);
  for (std::int64_t j = 0; j < row.nk; ++j) dp[j] -= d;
}
void SchemePolicy::ValueGradRow(const SchemeRow<double>& row, const double*, double delta,
                                double* dp) const {
  for (std::int64_t j = 0; j < row.nk; ++j) dp[j] -= delta;
}
void SchemePolicy::BackwardRow(const SchemeRow<float>&, const float*, const float*, const float*,
                               float, float*, float*, SchemeGradSums&) const {}
void SchemePolicy::BackwardRow(const SchemeRow<double>&, const double*, const double*,
                               const double*, double, double*, double*, SchemeGradSums&) const {}

void SchemePolicy::AddTrainable(std::string_view name, const TensorView& view) {
  TrainableTensor t;
  t.name = std::string(name);
  t.shape.assign(view.shape.begin(), view.shape.begin() + view.rank);
  trainable_.push_back(std::move(t));
}

SchemeGradSums SchemePolicy::NewGradSums() const {
  SchemeGradSums sums;
  for (const TrainableTensor& t : trainable_) {
    sums.tensors.emplace_back(static_cast<std::size_t>(t.Elements()), 0.0);
  }
  return sums;
}

// ---- Argument reader ----

SchemeArgReader::SchemeArgReader(const SchemeInfo& info, const SchemeArgs& args)
    : info_(info), args_(args) {
  for (const auto& [name, value] : args.entries()) {
    const SchemeArgDecl* decl = info.FindArg(name);
    if (decl == nullptr) {
      std::string allowed;
      for (const SchemeArgDecl& d : info.args) {
        allowed += (allowed.empty() ? "" : ", ") + std::string(d.name);
      }
      FailArgument("scheme argument", name,
                   "one of the " + std::string(info.name) +
                       " arguments: " + (allowed.empty() ? std::string("(none)") : allowed));
    }
    const bool numeric_ok =
        (decl->type == SchemeArgType::kNumber && value.type == SchemeArgType::kInteger) ||
        (decl->type == SchemeArgType::kInteger && value.type == SchemeArgType::kNumber &&
         std::nearbyint(value.number) == value.number && std::abs(value.number) < 9.0e15) ||
        (decl->type == SchemeArgType::kFlag && value.type == SchemeArgType::kInteger &&
         (value.integer == 0 || value.integer == 1));
    Require(decl->type == value.type || numeric_ok, Name(name), Article(value.type),
            Article(decl->type));
  }
  for (const SchemeArgDecl& d : info.args) {
    if (d.presence == SchemeArgPresence::kRequired) {
      if (args.Find(d.name) == nullptr) {
        FailArgument(Name(d.name), "nothing",
                     Article(d.type) +
                         (d.shape.empty() ? std::string() : " of shape " + std::string(d.shape)) +
                         " (required by scheme " + std::string(info.name) + ")");
      }
    }
  }
}

ArgName::ArgName(std::string_view scheme, std::string_view arg) {
  for (const std::string_view part :
       {std::string_view("scheme."), scheme, std::string_view("."), arg}) {
    const std::size_t n = std::min(part.size(), buf_.size() - 1 - size_);
    std::copy_n(part.data(), n, buf_.data() + size_);
    size_ += n;
  }
}

ArgName SchemeArgReader::Name(std::string_view arg) const { return ArgName(info_.name, arg); }

const SchemeArgs::Value* SchemeArgReader::Get(std::string_view arg, SchemeArgType) const {
  return args_.Find(arg);
}

const TensorView* SchemeArgReader::Tensor(std::string_view arg) const {
  const SchemeArgs::Value* v = Get(arg, SchemeArgType::kTensor);
  return v == nullptr ? nullptr : &v->tensor;
}

const TensorView& SchemeArgReader::RequiredTensor(std::string_view arg) const {
  const TensorView* t = Tensor(arg);
  if (t == nullptr) throw InvalidArgument(ArgMessage(Name(arg), "nothing", "a tensor"));
  return *t;
}

double SchemeArgReader::Number(std::string_view arg, double fallback) const {
  const SchemeArgs::Value* v = Get(arg, SchemeArgType::kNumber);
  if (v == nullptr) return fallback;
  return v->type == SchemeArgType::kInteger ? static_cast<double>(v->integer) : v->number;
}

std::int64_t SchemeArgReader::Integer(std::string_view arg, std::int64_t fallback) const {
  const SchemeArgs::Value* v = Get(arg, SchemeArgType::kInteger);
  if (v == nullptr) return fallback;
  return v->type == SchemeArgType::kNumber ? static_cast<std::int64_t>(v->number) : v->integer;
}

std::string SchemeArgReader::Text(std::string_view arg, std::string_view fallback) const {
  const SchemeArgs::Value* v = Get(arg, SchemeArgType::kText);
  return v == nullptr ? std::string(fallback) : v->text;
}

bool SchemeArgReader::Flag(std::string_view arg, bool fallback) const {
  const SchemeArgs::Value* v = Get(arg, SchemeArgType::kFlag);
  if (v == nullptr) return fallback;
  return v->type == SchemeArgType::kInteger ? v->integer != 0 : v->flag;
}

std::vector<double> SchemeArgReader::Table(std::string_view arg,
                                           std::initializer_list<std::int64_t> shape) const {
  return CopyTable(RequiredTensor(arg), Name(arg), shape);
}

// ---- Resolution ----

std::string_view SchemeName(const PositionScheme& scheme) { return scheme.name; }

std::unique_ptr<SchemePolicy> ResolveScheme(const PositionScheme& scheme, const SchemeCall& call) {
  const SchemeEntry& entry = FindEntry(SchemeName(scheme), "scheme.name");
  const SchemeInfo& info = entry.info();
  if (info.masks == SchemeMasks::kCausalOnly) {
    if (call.mask != AttentionMask::kCausal) {
      FailArgument(
          "mask", AttentionMaskName(call.mask),
          "causal (scheme " + std::string(info.name) + " is defined for keys r <= p only)");
    }
  }
  return entry.resolve(scheme.args, call);
}

double SchemeDefaultScale(const PositionScheme& scheme, std::int64_t head_dim) {
  const SchemeEntry& entry = FindEntry(SchemeName(scheme), "scheme.name");
  if (entry.default_scale != nullptr) {
    return entry.default_scale(scheme.args, head_dim);
  }
  return 1.0 / std::sqrt(static_cast<double>(head_dim));
}

// ---- Gradients of the schemes' trainable tensors ----

std::vector<TensorView> CheckSchemeGrads(const SchemePolicy& policy, const AttentionGrads& grads,
                                         std::vector<std::string>* labels) {
  const std::string_view scheme = policy.info().name;
  for (const auto& [name, view] : grads.scheme.entries()) {
    const SchemeArgDecl* decl = policy.info().FindArg(name);
    if (!(decl != nullptr && decl->grad == SchemeArgGrad::kTrainable)) {
      FailArgument("grads.scheme", name,
                   "a trainable tensor argument of scheme " + std::string(scheme));
    }
  }
  std::vector<TensorView> views;
  for (const TrainableTensor& t : policy.trainable()) {
    const std::string label = "grads.scheme." + t.name;
    const TensorView* requested = grads.scheme.Find(t.name);
    const TensorView v = requested != nullptr ? *requested : TensorView{};
    if (v.data != nullptr) {
      ValidateView(v, label, static_cast<int>(t.shape.size()), /*writable=*/true);
      for (std::size_t d = 0; d < t.shape.size(); ++d) {
        if (v.shape[d] != t.shape[d]) {
          FailArgument(label, v.Describe(), "the shape of scheme argument " + t.name);
        }
      }
    }
    views.push_back(v);
    if (labels != nullptr) labels->push_back(label);
  }
  return views;
}

void StoreSchemeGrads(const SchemePolicy& policy, std::span<const SchemeGradSums* const> parts,
                      std::span<const TensorView> views) {
  const auto trainable = policy.trainable();
  for (std::size_t i = 0; i < trainable.size(); ++i) {
    if (views[i].data == nullptr) continue;
    std::vector<double> sum(static_cast<std::size_t>(trainable[i].Elements()), 0.0);
    for (const SchemeGradSums* part : parts) {
      const std::vector<double>& g = part->tensors[i];
      for (std::size_t e = 0; e < sum.size(); ++e) sum[e] += g[e];
    }
    StoreTable(sum, views[i], "grads." + trainable[i].name, trainable[i].shape);
  }
}

}  // namespace attention_internal

// ---- Public declarations (posenc/scheme.h) ----

std::string_view SchemeTermName(SchemeTerm term) {
  switch (term) {
    case SchemeTerm::kRotation:
      return "rotation";
    case SchemeTerm::kBias:
      return "bias";
    case SchemeTerm::kLogit:
      return "logit";
    case SchemeTerm::kValue:
      return "value";
  }
  return "?";
}

std::string_view SchemeArgTypeName(SchemeArgType type) {
  switch (type) {
    case SchemeArgType::kTensor:
      return "tensor";
    case SchemeArgType::kNumber:
      return "number";
    case SchemeArgType::kInteger:
      return "integer";
    case SchemeArgType::kText:
      return "text";
    case SchemeArgType::kFlag:
      return "flag";
  }
  return "?";
}

const SchemeArgDecl* SchemeInfo::FindArg(std::string_view arg_name) const {
  for (const SchemeArgDecl& d : args) {
    if (d.name == arg_name) return &d;
  }
  return nullptr;
}

std::span<const SchemeInfo* const> RegisteredSchemes() {
  return attention_internal::TheRegistry().infos;
}

const SchemeInfo& FindScheme(std::string_view name, std::string_view arg) {
  return attention_internal::FindEntry(name, arg).info();
}

std::string SchemeNames(bool fused_only) {
  std::string names;
  for (const SchemeInfo* info : RegisteredSchemes()) {
    if (fused_only && !info->Fused()) continue;
    names += (names.empty() ? "" : ", ") + std::string(info->name);
  }
  return names;
}

SchemeArgs::Value& SchemeArgs::Slot(std::string_view name) {
  for (auto& [n, v] : entries_) {
    if (n == name) return v = Value{};
  }
  entries_.emplace_back(std::string(name), Value{});
  return entries_.back().second;
}

SchemeArgs& SchemeArgs::Tensor(std::string_view name, const TensorView& view) {
  Value& v = Slot(name);
  v.type = SchemeArgType::kTensor;
  v.tensor = view;
  return *this;
}
SchemeArgs& SchemeArgs::Vector(std::string_view name, std::vector<double> values) {
  auto owned = std::make_shared<const std::vector<double>>(std::move(values));
  Value& v = Slot(name);
  v.type = SchemeArgType::kTensor;
  v.tensor = TensorView::Contiguous(owned->data(), DType::kFloat64,
                                    {static_cast<std::int64_t>(owned->size())});
  v.owned = std::move(owned);
  return *this;
}
SchemeArgs& SchemeArgs::Number(std::string_view name, double value) {
  Value& v = Slot(name);
  v.type = SchemeArgType::kNumber;
  v.number = value;
  return *this;
}
SchemeArgs& SchemeArgs::Integer(std::string_view name, std::int64_t value) {
  Value& v = Slot(name);
  v.type = SchemeArgType::kInteger;
  v.integer = value;
  return *this;
}
SchemeArgs& SchemeArgs::Text(std::string_view name, std::string_view value) {
  Value& v = Slot(name);
  v.type = SchemeArgType::kText;
  v.text = std::string(value);
  return *this;
}
SchemeArgs& SchemeArgs::Flag(std::string_view name, bool value) {
  Value& v = Slot(name);
  v.type = SchemeArgType::kFlag;
  v.flag = value;
  return *this;
}

const SchemeArgs::Value* SchemeArgs::Find(std::string_view name) const {
  for (const auto& [n, v] : entries_) {
    if (n == name) return &v;
  }
  return nullptr;
}

PositionScheme PositionScheme::Registered(std::string_view name, SchemeArgs args) {
  FindScheme(name, "scheme.name");
  PositionScheme s;
  s.name = std::string(name);
  s.args = std::move(args);
  return s;
}

NamedTensors& NamedTensors::Set(std::string_view name, const TensorView& view) {
  for (auto& [n, v] : entries_) {
    if (n == name) {
      v = view;
      return *this;
    }
  }
  entries_.emplace_back(std::string(name), view);
  return *this;
}

const TensorView* NamedTensors::Find(std::string_view name) const {
  for (const auto& [n, v] : entries_) {
    if (n == name) return &v;
  }
  return nullptr;
}

}  // namespace posenc
