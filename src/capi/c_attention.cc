// The C API (include/posenc/c.h), part 2: fused attention forward. The
// positional scheme arrives as a NAME plus an array of NAMED arguments
// (posenc_scheme_arg), not as one C struct per scheme, so that any scheme the
// library knows can be passed through. SchemeFromArgs is the one place that
// turns name + arguments into a posenc::PositionScheme (none, absolute, rope,
// alibi, t5, shaw; FlashAttention rejects the others); argument names follow
// the Python API (posenc.flash_attention(..., scheme=..., **args)).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "c_api_internal.h"
#include "posenc/alibi.h"
#include "posenc/attention.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"
#include "posenc/t5.h"

namespace posenc::capi {
namespace {

// A scheme and what it points into (the T5 table is copied into a
// T5BiasTable, which the PositionScheme references).
struct Scheme {
  PositionScheme scheme;
  std::unique_ptr<T5BiasTable> t5;
  FlashRopeKeys rope_keys = FlashRopeKeys::kRotate;
};

// Named arguments of one call, checked against the names a scheme accepts.
class Args {
 public:
  Args(const std::string& scheme, const posenc_scheme_arg* args, std::int64_t n,
       std::initializer_list<const char*> allowed)
      : scheme_(scheme) {
    Require(n >= 0 && n <= 64, "num_scheme_args", n, "a count in [0, 64]");
    if (n > 0) RequirePointer(args, "scheme_args", "num_scheme_args posenc_scheme_arg entries");
    std::string list;
    for (const char* a : allowed) list += list.empty() ? a : std::string(", ") + a;
    for (std::int64_t i = 0; i < n; ++i) {
      const posenc_scheme_arg& a = args[i];
      const std::string at = "scheme_args[" + std::to_string(i) + "]";
      RequirePointer(a.name, at + ".name", "an argument name");
      bool ok = false;
      for (const char* name : allowed) ok = ok || a.name == std::string_view(name);
      Require(ok, at + ".name", std::string(a.name),
              "one of the " + scheme + " arguments: " + (list.empty() ? "(none)" : list));
      for (const posenc_scheme_arg* seen : args_) {
        Require(std::string_view(seen->name) != a.name, at + ".name", std::string(a.name),
                "each argument once");
      }
      args_.push_back(&a);
    }
  }

  const posenc_scheme_arg* Find(const char* name, posenc_arg_kind kind,
                                const char* kind_name) const {
    for (const posenc_scheme_arg* a : args_) {
      if (std::string_view(a->name) != name) continue;
      Require(a->kind == kind, std::string(name) + ".kind", static_cast<int>(a->kind),
              std::string(kind_name) + " for the " + scheme_ + " argument " + name);
      return a;
    }
    return nullptr;
  }
  double Number(const char* name, double fallback) const {
    const posenc_scheme_arg* a = Find(name, POSENC_ARG_NUMBER, "POSENC_ARG_NUMBER (0)");
    return a != nullptr ? a->number : fallback;
  }
  std::int64_t Int(const char* name, std::int64_t fallback) const {
    const double v = Number(name, static_cast<double>(fallback));
    Require(v == static_cast<double>(static_cast<std::int64_t>(v)), name, v, "an integer");
    return static_cast<std::int64_t>(v);
  }
  std::string Text(const char* name, const char* fallback) const {
    const posenc_scheme_arg* a = Find(name, POSENC_ARG_TEXT, "POSENC_ARG_TEXT (1)");
    if (a == nullptr) return fallback;
    RequirePointer(a->text, name, "a text");
    return a->text;
  }
  // nullopt when absent; required ones throw.
  std::optional<TensorView> Tensor(const char* name, bool required) const {
    const posenc_scheme_arg* a = Find(name, POSENC_ARG_TENSOR, "POSENC_ARG_TENSOR (2)");
    if (a == nullptr) {
      Require(!required, name, "nothing (missing)", "a tensor for the " + scheme_ + " scheme");
      return std::nullopt;
    }
    return ViewOf(&a->tensor, name);
  }

 private:
  std::string scheme_;
  std::vector<const posenc_scheme_arg*> args_;
};

std::vector<double> Vector1D(const TensorView& t, const char* name) {
  ValidateView(t, name, 1);
  std::vector<double> v;
  for (std::int64_t i = 0; i < t.shape[0]; ++i)
    v.push_back(LoadAsDouble(t.data, t.dtype, i * t.strides[0]));
  return v;
}

// name + named arguments -> PositionScheme (head_dim D and heads H of q).
Scheme SchemeFromArgs(const char* name, const posenc_scheme_arg* args, std::int64_t n,
                      std::int64_t head_dim, std::int64_t heads) {
  const std::string scheme = name != nullptr ? name : "none";
  Scheme s;
  using Kind = PositionScheme::Kind;
  const Kind kind = ParsePositionSchemeKind(scheme, "scheme");
  switch (kind) {
    case Kind::kNone:
    case Kind::kAbsolute:
      Args(scheme, args, n, {});
      s.scheme = kind == Kind::kNone ? PositionScheme::None() : PositionScheme::Absolute();
      break;
    case Kind::kRope: {
      const Args a(scheme, args, n,
                   {"rotary_dim", "theta", "attention_factor", "pairing", "numerics", "rope_keys",
                    "inv_freq"});
      RopeParams r;
      r.head_dim = head_dim;
      r.rotary_dim = a.Int("rotary_dim", 0);
      r.theta = a.Number("theta", 10000.0);
      r.pairing = ParseRopePairing(a.Text("pairing", "half_split"), "pairing");
      r.numerics = ParseRopeNumerics(a.Text("numerics", "accurate"), "numerics");
      if (const auto f = a.Tensor("inv_freq", false))
        r.frequencies.inv_freq = Vector1D(*f, "inv_freq");
      r.frequencies.attention_factor = a.Number("attention_factor", 1.0);
      s.rope_keys = ParseFlashRopeKeys(a.Text("rope_keys", "rotate"), "rope_keys");
      s.scheme = PositionScheme::FromRope(r);
      break;
    }
    case Kind::kAlibi: {
      const Args a(scheme, args, n, {"slopes", "max_bias", "convention"});
      AlibiParams p;
      p.num_heads = heads;
      p.max_bias = a.Number("max_bias", 8.0);
      p.convention = ParseAlibiSlopeConvention(a.Text("convention", "reference"), "convention");
      if (const auto t = a.Tensor("slopes", false)) p.slopes = Vector1D(*t, "slopes");
      s.scheme = PositionScheme::FromAlibi(AlibiSlopes(p));
      break;
    }
    case Kind::kT5: {
      const Args a(scheme, args, n, {"table", "max_distance", "bidirectional"});
      const TensorView t = *a.Tensor("table", true);
      ValidateView(t, "table", 2);
      T5BucketParams b;
      b.num_buckets = t.shape[0];
      b.max_distance = a.Int("max_distance", 128);
      b.direction = a.Number("bidirectional", 1.0) != 0.0 ? T5Direction::kBidirectional
                                                          : T5Direction::kCausal;
      s.t5 = std::make_unique<T5BiasTable>(b, t.shape[1]);
      for (std::int64_t i = 0; i < t.shape[0]; ++i) {
        for (std::int64_t h = 0; h < t.shape[1]; ++h) {
          s.t5->data()[i * t.shape[1] + h] = static_cast<float>(
              LoadAsDouble(t.data, t.dtype, i * t.strides[0] + h * t.strides[1]));
        }
      }
      s.scheme = PositionScheme::FromT5(*s.t5);
      break;
    }
    case Kind::kShaw: {
      const Args a(scheme, args, n, {"clip", "a_key", "a_value"});
      ShawParams p;
      p.clip = a.Int("clip", 16);
      p.head_dim = head_dim;
      s.scheme = PositionScheme::FromShaw(p, *a.Tensor("a_key", true), *a.Tensor("a_value", true));
      break;
    }
    case Kind::kTransformerXL:
    case Kind::kDeBERTa:
      throw InvalidArgument(
          ArgMessage("scheme", scheme,
                     "a scheme the fused attention computes: none, absolute, rope, "
                     "alibi, t5, shaw"));
  }
  return s;
}

struct Prepared {
  AttentionParams params;
  FlashAttentionOptions options;
  Scheme scheme;
};

Prepared Prepare(const posenc_attention_params* p, const TensorView& q, bool varlen) {
  RequirePointer(p, "params", "a posenc_attention_params (see posenc_attention_params_init)");
  Prepared r;
  r.params.layout = LayoutOf(p->layout);
  r.params.mask = EnumOf<AttentionMask>(static_cast<int>(p->mask), 2, "mask",
                                        "POSENC_MASK_CAUSAL (0) or POSENC_MASK_BIDIRECTIONAL (1)");
  Require(p->sliding_window >= 0, "sliding_window", p->sliding_window,
          "a window W >= 1, or 0 for none");
  if (p->sliding_window > 0) r.params.sliding_window = p->sliding_window;
  if (p->scale != 0.0) r.params.scale = p->scale;
  if (p->query_positions != nullptr) {
    r.params.query_positions = PositionsOf(p->query_positions, "query_positions");
  }
  if (p->key_positions != nullptr) {
    r.params.key_positions = PositionsOf(p->key_positions, "key_positions");
  }
  r.options.query_tile = p->query_tile == 0 ? 64 : p->query_tile;
  r.options.key_tile = p->key_tile == 0 ? 64 : p->key_tile;
  std::int64_t head_dim = 0, heads = 0;
  if (varlen) {
    ValidateView(q, "q", 3);
    heads = q.shape[1];
    head_dim = q.shape[2];
  } else {
    const AttentionDims d = GetAttentionDims(q, r.params.layout, "q");
    heads = d.heads;
    head_dim = d.head_dim;
  }
  r.scheme = SchemeFromArgs(p->scheme, p->scheme_args, p->num_scheme_args, head_dim, heads);
  r.params.scheme = r.scheme.scheme;
  r.options.rope_keys = r.scheme.rope_keys;
  return r;
}

}  // namespace
}  // namespace posenc::capi

extern "C" {

void posenc_attention_params_init(posenc_attention_params* params) {
  if (params == nullptr) return;
  *params = posenc_attention_params{};
  params->layout = POSENC_LAYOUT_BSHD;
  params->mask = POSENC_MASK_CAUSAL;
  params->scheme = "none";
}

posenc_status posenc_flash_attention(const posenc_context* ctx,
                                     const posenc_attention_params* params, const posenc_tensor* q,
                                     const posenc_tensor* k, const posenc_tensor* v,
                                     const posenc_tensor* out) {
  using namespace posenc::capi;  // NOLINT(build/namespaces): one function body
  return Guard([&] {
    const posenc::TensorView qv = ViewOf(q, "q");
    const Prepared p = Prepare(params, qv, false);
    posenc::FlashAttention(p.params, qv, ViewOf(k, "k"), ViewOf(v, "v"), ViewOf(out, "out"),
                           p.options, ContextOf(ctx));
  });
}

posenc_status posenc_flash_attention_varlen(const posenc_context* ctx,
                                            const posenc_attention_params* params,
                                            const posenc_tensor* q, const posenc_tensor* k,
                                            const posenc_tensor* v, const posenc_tensor* out,
                                            const int64_t* cu_seqlens_q,
                                            const int64_t* cu_seqlens_k, int64_t batch) {
  using namespace posenc::capi;  // NOLINT(build/namespaces): one function body
  return Guard([&] {
    const posenc::TensorView qv = ViewOf(q, "q");
    RequirePointer(cu_seqlens_q, "cu_seqlens_q", "batch + 1 offsets");
    RequirePointer(cu_seqlens_k, "cu_seqlens_k", "batch + 1 offsets");
    posenc::Require(batch >= 1 && batch <= (std::int64_t{1} << 24), "batch", batch,
                    "a count in [1, 2^24]");
    const Prepared p = Prepare(params, qv, true);
    const auto n = static_cast<std::size_t>(batch + 1);
    posenc::FlashAttentionVarlen(p.params, qv, ViewOf(k, "k"), ViewOf(v, "v"), ViewOf(out, "out"),
                                 {cu_seqlens_q, n}, {cu_seqlens_k, n}, p.options, ContextOf(ctx));
  });
}

}  // extern "C"
