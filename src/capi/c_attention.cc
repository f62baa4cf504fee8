// The C API (include/posenc/c.h), part 2: attention (prefill, varlen,
// decode) and the KV-cache RoPE entry points. A scheme arrives typed
// (posenc_scheme: RoPE params, ALiBi slopes, a T5 table) or NAMED (a
// registered name plus posenc_scheme_arg entries); SchemeOf is the one place
// that turns either into a posenc::PositionScheme. The named form follows the
// scheme's declaration in the registry (posenc/scheme.h), so every registered
// scheme passes through unchanged (FlashAttention rejects the reference-only
// ones), with the declared argument names of the Python API.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "c_api_internal.h"
#include "posenc/attention.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"
#include "posenc/rope.h"
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
Scheme SchemeFromArgs(const char* name, const posenc_scheme_arg* args, std::int64_t n) {
  RequirePointer(name, "scheme.name", "a registered scheme name (`posenc schemes` lists them)");
  const SchemeInfo& info = FindScheme(name, "scheme.name");
  const std::string scheme(info.name);
  Require(n >= 0 && n <= 64, "scheme.num_args", n, "a count in [0, 64]");
  if (n > 0) RequirePointer(args, "scheme.args", "num_args posenc_scheme_arg entries");
  const bool rotation = info.Has(SchemeTerm::kRotation);
  std::string list;
  for (const SchemeArgDecl& d : info.args) list += (list.empty() ? "" : ", ") + std::string(d.name);
  if (rotation) list += (list.empty() ? "" : ", ") + std::string("rope_keys");
  Scheme s;
  SchemeArgs named;
  std::vector<std::string_view> seen;
  for (std::int64_t i = 0; i < n; ++i) {
    const posenc_scheme_arg& a = args[i];
    const std::string at = "scheme.args[" + std::to_string(i) + "]";
    CheckStructSize(&a, at, "posenc_scheme_arg_init");
    RequirePointer(a.name, at + ".name", "an argument name");
    const std::string_view arg(a.name);
    for (std::string_view prior : seen) {
      if (prior == arg) {
        FailArgument(at + ".name", std::string(arg), "each argument once");
      }
    }
    seen.push_back(arg);
    auto kind = [&](posenc_arg_kind want, const char* want_name) {
      if (a.kind != want) {
        FailArgument(
            std::string(arg) + ".kind", static_cast<int>(a.kind),
            std::string(want_name) + " for the " + scheme + " argument " + std::string(arg));
      }
    };
    if (rotation && arg == "rope_keys") {
      kind(POSENC_ARG_TEXT, "POSENC_ARG_TEXT (1)");
      RequirePointer(a.text, "rope_keys", "a text");
      s.rope_keys = ParseFlashRopeKeys(a.text, "rope_keys");
      continue;
    }
    const SchemeArgDecl* decl = info.FindArg(arg);
    if (decl == nullptr) {
      FailArgument(at + ".name", std::string(arg),
                   "one of the " + scheme + " arguments: " + (list.empty() ? "(none)" : list));
    }
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
  // RoPE's pairing and the keys' rotation have no default here: a wrong
  // guess rotates every key the wrong way without any other sign.
  if (rotation) {
    Require(named.Find("pairing") != nullptr, "scheme.args", "no pairing",
            "a pairing argument (TEXT half_split: GPT-NeoX / HF Llama; interleaved: GPT-J, "
            "GGUF llama)");
    Require(std::find(seen.begin(), seen.end(), "rope_keys") != seen.end(), "scheme.args",
            "no rope_keys", "a rope_keys argument (TEXT rotate or pre_rotated)");
  }
  s.scheme = PositionScheme::Registered(scheme, std::move(named));
  return s;
}

// A typed scheme (kinds ROPE, ALIBI, T5) or a NAMED one -> PositionScheme.
Scheme SchemeOf(const posenc_scheme* c) {
  Scheme s;
  if (c == nullptr) return s;
  CheckStructSize(c, "scheme", "posenc_scheme_init");
  switch (c->kind) {
    case POSENC_SCHEME_NONE:
      return s;
    case POSENC_SCHEME_ROPE:
      RequirePointer(c->rope, "scheme.rope", "the RoPE params (posenc_rope_from_config)");
      s.scheme = PositionScheme::FromRope(RopeParamsOf(c->rope));
      s.rope_keys = EnumOf<FlashRopeKeys>(
          static_cast<int>(c->rope_keys), 2, "scheme.rope_keys",
          "POSENC_ROPE_KEYS_ROTATE (0) or POSENC_ROPE_KEYS_PRE_ROTATED (1): whether the kernel "
          "rotates the keys or they were rotated when cached");
      return s;
    case POSENC_SCHEME_ALIBI:
      Require(c->num_alibi_slopes >= 1 && c->num_alibi_slopes <= 4096, "scheme.num_alibi_slopes",
              c->num_alibi_slopes, "one slope per query head, in [1, 4096]");
      RequirePointer(c->alibi_slopes, "scheme.alibi_slopes",
                     "num_alibi_slopes slopes (posenc_alibi_slopes)");
      s.scheme = PositionScheme::FromAlibi(
          std::vector<double>(c->alibi_slopes, c->alibi_slopes + c->num_alibi_slopes));
      return s;
    case POSENC_SCHEME_T5: {
      RequirePointer(c->t5_table, "scheme.t5_table", "the table [num_buckets, H]");
      const auto direction = EnumOf<T5Direction>(
          static_cast<int>(c->t5_direction), 2, "scheme.t5_direction",
          "POSENC_T5_BIDIRECTIONAL (0: encoders) or POSENC_T5_CAUSAL (1: decoders)");
      Require(c->t5_max_distance >= 1, "scheme.t5_max_distance", c->t5_max_distance,
              "the bucketing's max_distance >= 1 (T5: 128)");
      SchemeArgs named;
      named.Tensor("table", ViewOf(c->t5_table, "scheme.t5_table"));
      named.Integer("max_distance", c->t5_max_distance);
      named.Flag("bidirectional", direction == T5Direction::kBidirectional);
      s.scheme = PositionScheme::Registered("t5", std::move(named));
      return s;
    }
    case POSENC_SCHEME_NAMED:
      return SchemeFromArgs(c->name, c->args, c->num_args);
    default:
      break;
  }
  Require(false, "scheme.kind", c->kind,
          "POSENC_SCHEME_NONE (0), POSENC_SCHEME_ROPE (1), POSENC_SCHEME_ALIBI (2), "
          "POSENC_SCHEME_T5 (3) or POSENC_SCHEME_NAMED (4)");
  return s;
}

struct Prepared {
  AttentionParams params;
  FlashAttentionOptions options;
  Scheme scheme;
};

Prepared Prepare(const posenc_attention_params* p) {
  CheckStructSize(p, "params", "posenc_attention_params_init");
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
  r.scheme = SchemeOf(p->scheme);
  r.params.scheme = r.scheme.scheme;
  r.options.rope_keys = r.scheme.rope_keys;
  return r;
}

}  // namespace
}  // namespace posenc::capi

struct posenc_decode_plan {
  posenc::PreparedDecode plan;
};

extern "C" {

void posenc_scheme_arg_init(posenc_scheme_arg* arg) {
  if (arg == nullptr) return;
  *arg = posenc_scheme_arg{};
  arg->struct_size = sizeof(posenc_scheme_arg);
  arg->kind = POSENC_ARG_NUMBER;
}

void posenc_scheme_init(posenc_scheme* scheme) {
  if (scheme == nullptr) return;
  *scheme = posenc_scheme{};
  scheme->struct_size = sizeof(posenc_scheme);
  scheme->kind = POSENC_SCHEME_NONE;
  scheme->rope_keys = -1;
  scheme->t5_direction = -1;
}

void posenc_attention_params_init(posenc_attention_params* params) {
  if (params == nullptr) return;
  *params = posenc_attention_params{};
  params->struct_size = sizeof(posenc_attention_params);
  params->layout = POSENC_LAYOUT_BSHD;
  params->mask = POSENC_MASK_CAUSAL;
}

posenc_status posenc_flash_attention(const posenc_context* ctx,
                                     const posenc_attention_params* params, const posenc_tensor* q,
                                     const posenc_tensor* k, const posenc_tensor* v,
                                     const posenc_tensor* out) {
  using namespace posenc::capi;  // NOLINT(build/namespaces): one function body
  return Guard([&] {
    const posenc::TensorView qv = ViewOf(q, "q");
    const Prepared p = Prepare(params);
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
    const Prepared p = Prepare(params);
    const auto n = static_cast<std::size_t>(batch + 1);
    posenc::FlashAttentionVarlen(p.params, qv, ViewOf(k, "k"), ViewOf(v, "v"), ViewOf(out, "out"),
                                 {cu_seqlens_q, n}, {cu_seqlens_k, n}, p.options, ContextOf(ctx));
  });
}

posenc_status posenc_attention_decode(const posenc_context* ctx,
                                      const posenc_attention_params* params, const posenc_tensor* q,
                                      const posenc_tensor* k, const posenc_tensor* v,
                                      const posenc_tensor* out, const posenc_tensor* lse) {
  using namespace posenc::capi;  // NOLINT(build/namespaces): one function body
  return Guard([&] {
    const Prepared p = Prepare(params);
    posenc::FlashAttentionDecode(
        p.params, ViewOf(q, "q"), ViewOf(k, "k"), ViewOf(v, "v"), ViewOf(out, "out"),
        lse != nullptr ? ViewOf(lse, "lse") : posenc::TensorView{}, p.options, ContextOf(ctx));
  });
}

posenc_status posenc_rope_shift_keys(const posenc_context* ctx, const posenc_rope_params* params,
                                     const posenc_tensor* k, posenc_layout layout, int64_t delta) {
  using namespace posenc::capi;  // NOLINT(build/namespaces): one function body
  return Guard([&] {
    posenc::ShiftRopeKeys(RopeParamsOf(params), ViewOf(k, "k"), LayoutOf(layout), delta,
                          ContextOf(ctx));
  });
}

posenc_status posenc_rope_cos_sin_cache(const posenc_context* ctx, const posenc_rope_params* params,
                                        const posenc_tensor* cache) {
  using namespace posenc::capi;  // NOLINT(build/namespaces): one function body
  return Guard([&] {
    posenc::RopeCosSinCache(RopeParamsOf(params), ViewOf(cache, "cache"), ContextOf(ctx));
  });
}

posenc_status posenc_rope_apply_with_cache(const posenc_context* ctx,
                                           const posenc_rope_params* params, const posenc_tensor* x,
                                           posenc_layout layout, const posenc_positions* positions,
                                           const posenc_tensor* cache,
                                           posenc_rope_direction direction,
                                           const posenc_tensor* out) {
  using namespace posenc::capi;  // NOLINT(build/namespaces): one function body
  return Guard([&] {
    const auto dir = EnumOf<posenc::RopeDirection>(
        static_cast<int>(direction), 2, "direction",
        "POSENC_DIRECTION_FORWARD (0) or POSENC_DIRECTION_INVERSE (1)");
    const posenc::TensorView outv = out != nullptr ? ViewOf(out, "out") : posenc::TensorView{};
    posenc::ApplyRopeWithCache(RopeParamsOf(params), ViewOf(x, "x"), LayoutOf(layout),
                               PositionsOf(positions, "positions"), ViewOf(cache, "cache"), dir,
                               out != nullptr ? &outv : nullptr, ContextOf(ctx));
  });
}

posenc_status posenc_decode_plan_create(const posenc_attention_params* params, int64_t heads,
                                        int64_t head_dim, int64_t value_dim,
                                        posenc_decode_plan** out) {
  using namespace posenc::capi;  // NOLINT(build/namespaces): one function body
  return Guard([&] {
    RequirePointer(out, "out", "a posenc_decode_plan* to fill");
    *out = nullptr;
    const Prepared p = Prepare(params);
    *out = new posenc_decode_plan{
        posenc::PreparedDecode(p.params, heads, head_dim, value_dim, p.options)};
  });
}

void posenc_decode_plan_destroy(posenc_decode_plan* plan) { delete plan; }

posenc_status posenc_decode_plan_run(const posenc_context* ctx, const posenc_decode_plan* plan,
                                     const posenc_tensor* q, const posenc_tensor* k,
                                     const posenc_tensor* v, const posenc_tensor* out,
                                     const posenc_tensor* lse,
                                     const posenc_positions* query_positions,
                                     const posenc_positions* key_positions) {
  using namespace posenc::capi;  // NOLINT(build/namespaces): one function body
  return Guard([&] {
    RequirePointer(plan, "plan", "a plan from posenc_decode_plan_create");
    std::optional<posenc::Positions> qp, kp;
    if (query_positions != nullptr) qp = PositionsOf(query_positions, "query_positions");
    if (key_positions != nullptr) kp = PositionsOf(key_positions, "key_positions");
    posenc::FlashAttentionDecode(
        plan->plan, ViewOf(q, "q"), ViewOf(k, "k"), ViewOf(v, "v"), ViewOf(out, "out"),
        lse != nullptr ? ViewOf(lse, "lse") : posenc::TensorView{}, qp, kp, ContextOf(ctx));
  });
}

}  // extern "C"
