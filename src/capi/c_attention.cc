// The C API (include/posenc/c.h), part 2: fused attention forward. The
// positional scheme arrives as a NAME plus an array of NAMED arguments
// (posenc_scheme_arg), not as one C struct per scheme, so that any scheme the
// library knows can be passed through. SchemeFromArgs is the one place that
// turns name + arguments into a posenc::PositionScheme, by the scheme's
// declaration in the registry (posenc/scheme.h): every registered scheme,
// present or future, passes through unchanged (FlashAttention rejects the
// reference-only ones); argument names are the declared ones, as in the
// Python API (posenc.flash_attention(..., scheme=..., **args)).
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "c_api_internal.h"
#include "posenc/attention.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"
#include "posenc/scheme.h"

namespace posenc::capi {
namespace {

// A scheme (its arguments' views point into the caller's posenc_scheme_arg
// array) and the one kernel option that travels with the scheme arguments.
struct Scheme {
  PositionScheme scheme;
  FlashRopeKeys rope_keys = FlashRopeKeys::kRotate;
};

// name + named arguments -> PositionScheme, by the scheme's declaration in
// the registry (posenc/scheme.h): any registered scheme passes through; the
// argument kinds map onto the declared types (NUMBER -> number, integer
// (integral values) or flag (0 or 1); TEXT -> text; TENSOR -> tensor).
// "rope_keys" (rotate | pre_rotated) is the fused kernel's option for
// schemes with a rotation term. head_dim and heads are unused: every scheme
// takes them from q when it is resolved.
Scheme SchemeFromArgs(const char* name, const posenc_scheme_arg* args, std::int64_t n,
                      std::int64_t /*head_dim*/, std::int64_t /*heads*/) {
  const SchemeInfo& info = FindScheme(name != nullptr ? name : "none", "scheme");
  const std::string scheme(info.name);
  Require(n >= 0 && n <= 64, "num_scheme_args", n, "a count in [0, 64]");
  if (n > 0) RequirePointer(args, "scheme_args", "num_scheme_args posenc_scheme_arg entries");
  const bool rotation = info.Has(SchemeTerm::kRotation);
  std::string list;
  for (const SchemeArgDecl& d : info.args) list += (list.empty() ? "" : ", ") + std::string(d.name);
  if (rotation) list += (list.empty() ? "" : ", ") + std::string("rope_keys");
  Scheme s;
  SchemeArgs named;
  std::vector<std::string_view> seen;
  for (std::int64_t i = 0; i < n; ++i) {
    const posenc_scheme_arg& a = args[i];
    const std::string at = "scheme_args[" + std::to_string(i) + "]";
    RequirePointer(a.name, at + ".name", "an argument name");
    const std::string_view arg(a.name);
    for (std::string_view prior : seen) {
      Require(prior != arg, at + ".name", std::string(arg), "each argument once");
    }
    seen.push_back(arg);
    auto kind = [&](posenc_arg_kind want, const char* want_name) {
      Require(a.kind == want, std::string(arg) + ".kind", static_cast<int>(a.kind),
              std::string(want_name) + " for the " + scheme + " argument " + std::string(arg));
    };
    if (rotation && arg == "rope_keys") {
      kind(POSENC_ARG_TEXT, "POSENC_ARG_TEXT (1)");
      RequirePointer(a.text, "rope_keys", "a text");
      s.rope_keys = ParseFlashRopeKeys(a.text, "rope_keys");
      continue;
    }
    const SchemeArgDecl* decl = info.FindArg(arg);
    Require(decl != nullptr, at + ".name", std::string(arg),
            "one of the " + scheme + " arguments: " + (list.empty() ? "(none)" : list));
    switch (decl->type) {
      case SchemeArgType::kTensor:
        kind(POSENC_ARG_TENSOR, "POSENC_ARG_TENSOR (2)");
        named.Tensor(arg, ViewOf(&a.tensor, a.name));
        break;
      case SchemeArgType::kText:
        kind(POSENC_ARG_TEXT, "POSENC_ARG_TEXT (1)");
        RequirePointer(a.text, a.name, "a text");
        named.Text(arg, a.text);
        break;
      case SchemeArgType::kNumber:
        kind(POSENC_ARG_NUMBER, "POSENC_ARG_NUMBER (0)");
        named.Number(arg, a.number);
        break;
      case SchemeArgType::kInteger:
        kind(POSENC_ARG_NUMBER, "POSENC_ARG_NUMBER (0)");
        Require(std::nearbyint(a.number) == a.number && std::abs(a.number) < 9.0e15, a.name,
                a.number, "an integer");
        named.Integer(arg, static_cast<std::int64_t>(a.number));
        break;
      case SchemeArgType::kFlag:
        kind(POSENC_ARG_NUMBER, "POSENC_ARG_NUMBER (0)");
        Require(a.number == 0.0 || a.number == 1.0, a.name, a.number, "0 or 1");
        named.Flag(arg, a.number != 0.0);
        break;
    }
  }
  s.scheme = PositionScheme::Registered(scheme, std::move(named));
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
