// The C API (include/posenc/c.h), part 2: attention (prefill, varlen,
// decode) and the KV-cache RoPE entry points. A scheme arrives typed
// (posenc_scheme: RoPE params, ALiBi slopes, a T5 table) or NAMED (a
// registered name plus posenc_scheme_arg entries); SchemeOf is the one place
// that turns either into a posenc::PositionScheme. The named form follows the
// scheme's declaration in the registry (posenc/scheme.h), so every registered
// scheme passes through unchanged (FlashAttention rejects the reference-only
// ones), with the declared argument names of the Python API.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "c_api_internal.h"
#include "kernels/thread_scratch.h"
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

// Fails unless argument `arg` of `scheme` (the entry a) has kind `want`.
void RequireArgKind(const posenc_scheme_arg& a, std::string_view arg, const std::string& scheme,
                    posenc_arg_kind want, const char* want_name) {
  if (a.kind != want) {
    FailArgument(std::string(arg) + ".kind", static_cast<int>(a.kind),
                 std::string(want_name) + " for the " + scheme + " argument " + std::string(arg));
  }
}

// Adds entry a (argument `arg` of `scheme`, declared as decl) to named, after
// checking its kind and, for integers and flags, its value.
void AddDeclaredArg(const SchemeArgDecl& decl, const posenc_scheme_arg& a, std::string_view arg,
                    const std::string& scheme, SchemeArgs& named) {
  const auto kind = [&](posenc_arg_kind want, const char* want_name) {
    RequireArgKind(a, arg, scheme, want, want_name);
  };
  switch (decl.type) {
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
      Require(std::nearbyint(a.number) == a.number && std::abs(a.number) < 9.0e15, a.name, a.number,
              "an integer");
      named.Integer(arg, static_cast<std::int64_t>(a.number));
      break;
    case SchemeArgType::kFlag:
      kind(POSENC_ARG_NUMBER, "POSENC_ARG_NUMBER (0)");
      Require(a.number == 0.0 || a.number == 1.0, a.name, a.number, "0 or 1");
      named.Flag(arg, a.number != 0.0);
      break;
  }
}

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
    if (rotation && arg == "rope_keys") {
      RequireArgKind(a, arg, scheme, POSENC_ARG_TEXT, "POSENC_ARG_TEXT (1)");
      RequirePointer(a.text, "rope_keys", "a text");
      s.rope_keys = ParseFlashRopeKeys(a.text, "rope_keys");
      continue;
    }
    const SchemeArgDecl* decl = info.FindArg(arg);
    if (decl == nullptr) {
      FailArgument(at + ".name", std::string(arg),
                   "one of the " + scheme + " arguments: " + (list.empty() ? "(none)" : list));
    }
    AddDeclaredArg(*decl, a, arg, scheme, named);
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
      s.scheme = RopeScheme(RopeParamsOf(c->rope));
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
      s.scheme =
          AlibiScheme(std::vector<double>(c->alibi_slopes, c->alibi_slopes + c->num_alibi_slopes));
      return s;
    case POSENC_SCHEME_T5: {
      RequirePointer(c->t5_table, "scheme.t5_table", "the table [num_buckets, H]");
      const auto direction = EnumOf<T5Direction>(
          static_cast<int>(c->t5_direction), 2, "scheme.t5_direction",
          "POSENC_T5_BIDIRECTIONAL (0: encoders) or POSENC_T5_CAUSAL (1: decoders)");
      Require(c->t5_max_distance >= 1, "scheme.t5_max_distance", c->t5_max_distance,
              "the bucketing's max_distance >= 1 (T5: 128)");
      s.scheme = T5Scheme(ViewOf(c->t5_table, "scheme.t5_table"), c->t5_max_distance, direction);
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
  r.options.precision =
      EnumOf<FlashPrecision>(static_cast<int>(p->precision), 2, "precision",
                             "POSENC_PRECISION_FLOAT32 (0) or POSENC_PRECISION_BFLOAT16 (1)");
  return r;
}

// posenc_attention_decode without a plan: the calling thread keeps the last
// few plans it made, keyed on the contents they were made from (the
// params' fields, every value the scheme points to, q's heads and head
// dim, v's head dim), so a serving loop that passes the same params every
// token resolves its scheme once and, like posenc_decode_plan_run,
// allocates nothing after the first call. Building the key reads what
// Prepare would read (the scheme's tables: a few KiB at most) and
// allocates nothing once its buffer has grown.
class PlanKey {
 public:
  std::string& bytes() { return bytes_; }
  template <typename T>
  void Add(const T& x) {
    bytes_.append(reinterpret_cast<const char*>(&x), sizeof x);
  }
  void Text(const char* text, std::string_view arg) {
    RequirePointer(text, arg, "a text");
    const std::string_view t(text);
    Add(t.size());
    bytes_.append(t);
  }
  // dtype, shape and every element's bytes (strided walk).
  void Tensor(const posenc_tensor* t, std::string_view arg) {
    const TensorView v = ViewOf(t, arg);
    ValidateView(v, arg);
    Add(v.dtype);
    Add(v.rank);
    std::array<std::int64_t, kMaxRank> at{};
    const auto size = static_cast<std::int64_t>(DTypeSize(v.dtype));
    for (int i = 0; i < v.rank; ++i) Add(v.shape[static_cast<std::size_t>(i)]);
    while (true) {
      std::int64_t offset = 0;
      for (int i = 0; i < v.rank; ++i) {
        offset += at[static_cast<std::size_t>(i)] * v.strides[static_cast<std::size_t>(i)];
      }
      bytes_.append(static_cast<const char*>(v.data) + offset * size,
                    static_cast<std::size_t>(size));
      int i = v.rank - 1;
      for (; i >= 0; --i) {
        const auto u = static_cast<std::size_t>(i);
        if (++at[u] < v.shape[u]) break;
        at[u] = 0;
      }
      if (i < 0) return;
    }
  }
  void Scheme(const posenc_scheme* c) {
    if (c == nullptr) return Add(-1);
    CheckStructSize(c, "scheme", "posenc_scheme_init");
    Add(c->kind);
    switch (c->kind) {
      case POSENC_SCHEME_ROPE: {
        const posenc_rope_params* r = c->rope;
        RequirePointer(r, "scheme.rope", "the RoPE params");
        CheckStructSize(r, "scheme.rope", "posenc_rope_params_init");
        Add(r->head_dim);
        Add(r->rotary_dim);
        Add(r->theta);
        Add(r->pairing);
        Add(r->numerics);
        Add(r->attention_factor);
        Add(r->inv_freq_count);
        if (r->inv_freq != nullptr) {
          Require(r->inv_freq_count >= 0 && r->inv_freq_count <= 32768, "inv_freq_count",
                  r->inv_freq_count, "rotary_dim / 2 frequencies");
          bytes_.append(reinterpret_cast<const char*>(r->inv_freq),
                        static_cast<std::size_t>(r->inv_freq_count) * sizeof(double));
        }
        return Add(c->rope_keys);
      }
      case POSENC_SCHEME_ALIBI:
        Require(c->num_alibi_slopes >= 1 && c->num_alibi_slopes <= 4096, "num_alibi_slopes",
                c->num_alibi_slopes, "[1, 4096]");
        RequirePointer(c->alibi_slopes, "scheme.alibi_slopes", "slopes");
        Add(c->num_alibi_slopes);
        bytes_.append(reinterpret_cast<const char*>(c->alibi_slopes),
                      static_cast<std::size_t>(c->num_alibi_slopes) * sizeof(double));
        return;
      case POSENC_SCHEME_T5:
        Tensor(c->t5_table, "scheme.t5_table");
        Add(c->t5_max_distance);
        return Add(c->t5_direction);
      case POSENC_SCHEME_NAMED:
        Text(c->name, "scheme.name");
        Require(c->num_args >= 0 && c->num_args <= 64, "scheme.num_args", c->num_args, "[0, 64]");
        Add(c->num_args);
        if (c->num_args > 0) RequirePointer(c->args, "scheme.args", "arguments");
        for (std::int64_t i = 0; i < c->num_args; ++i) {
          const posenc_scheme_arg& a = c->args[i];
          CheckStructSize(&a, "scheme.args[i]", "posenc_scheme_arg_init");
          Text(a.name, "scheme.args[i].name");
          Add(a.kind);
          if (a.kind == POSENC_ARG_NUMBER) Add(a.number);
          if (a.kind == POSENC_ARG_TEXT) Text(a.text, "scheme.args[i].text");
          if (a.kind == POSENC_ARG_TENSOR) Tensor(&a.tensor, "scheme.args[i].tensor");
        }
        return;
      default:
        return;
    }
  }

 private:
  std::string bytes_;
};

// The calling thread's plans (round robin over kSlots: enough for a model
// whose layers alternate a few schemes, e.g. Gemma's local and global).
struct PlanCache {
  static constexpr std::size_t kSlots = 4;
  struct Slot {
    std::string key;
    std::optional<PreparedDecode> plan;
  };
  std::array<Slot, kSlots> slots;
  std::size_t next = 0;
  PlanKey key;
};
thread_local PlanCache plan_cache;
const kernels::ScratchHook plan_cache_hook([] { plan_cache = PlanCache{}; });

// The plan for params and q's / v's dims: a cached one with the same key,
// else one made now (errors as FlashAttentionDecode reports them). False
// where the key cannot be read (a NULL or uninitialised input): the caller
// then runs the uncached call, which reports the error.
const PreparedDecode* CachedPlan(const posenc_attention_params* params, const TensorView& q,
                                 const TensorView& v) {
  PlanKey& key = plan_cache.key;
  key.bytes().clear();
  try {
    CheckStructSize(params, "params", "posenc_attention_params_init");
    const AttentionLayout layout = LayoutOf(params->layout);
    const AttentionDims qd = GetAttentionDims(q, layout, "q");
    const AttentionDims vd = GetAttentionDims(v, layout, "v");
    key.Add(params->layout);
    key.Add(params->mask);
    key.Add(params->sliding_window);
    key.Add(params->scale);
    key.Add(params->query_tile);
    key.Add(params->key_tile);
    key.Add(params->precision);
    key.Add(qd.heads);
    key.Add(qd.head_dim);
    key.Add(vd.head_dim);
    key.Scheme(params->scheme);
    for (PlanCache::Slot& slot : plan_cache.slots) {
      if (slot.plan.has_value() && slot.key == key.bytes()) return &*slot.plan;
    }
    const Prepared p = Prepare(params);
    PlanCache::Slot& slot = plan_cache.slots[plan_cache.next];
    slot.plan.emplace(p.params, qd.heads, qd.head_dim, vd.head_dim, p.options);
    slot.key = key.bytes();
    plan_cache.next = (plan_cache.next + 1) % PlanCache::kSlots;
    return &*slot.plan;
  } catch (const Error&) {
    return nullptr;  // the uncached call reports it
  }
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
    const posenc::TensorView qv = ViewOf(q, "q"), kv = ViewOf(k, "k"), vv = ViewOf(v, "v"),
                             ov = ViewOf(out, "out");
    const posenc::TensorView lv = lse != nullptr ? ViewOf(lse, "lse") : posenc::TensorView{};
    if (const posenc::PreparedDecode* plan = CachedPlan(params, qv, vv)) {
      std::optional<posenc::Positions> qp, kp;
      if (params->query_positions != nullptr) {
        qp = PositionsOf(params->query_positions, "query_positions");
      }
      if (params->key_positions != nullptr) {
        kp = PositionsOf(params->key_positions, "key_positions");
      }
      return posenc::FlashAttentionDecode(*plan, qv, kv, vv, ov, lv, qp, kp, ContextOf(ctx));
    }
    const Prepared p = Prepare(params);
    posenc::FlashAttentionDecode(p.params, qv, kv, vv, ov, lv, p.options, ContextOf(ctx));
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

void posenc_kv_pages_init(posenc_kv_pages* pages) {
  if (pages == nullptr) return;
  *pages = posenc_kv_pages{};
  pages->struct_size = sizeof(posenc_kv_pages);
}

posenc_status posenc_decode_plan_run_paged(const posenc_context* ctx,
                                           const posenc_decode_plan* plan, const posenc_tensor* q,
                                           const posenc_kv_pages* cache, const posenc_tensor* out,
                                           const posenc_tensor* lse,
                                           const posenc_positions* query_positions,
                                           const posenc_positions* key_positions) {
  using namespace posenc::capi;  // NOLINT(build/namespaces): one function body
  return Guard([&] {
    RequirePointer(plan, "plan", "a plan from posenc_decode_plan_create");
    RequirePointer(cache, "cache", "a posenc_kv_pages (posenc_kv_pages_init)");
    CheckStructSize(cache, "cache", "posenc_kv_pages_init");
    posenc::PagedKVCache pages;
    pages.k_pages = ViewOf(&cache->k_pages, "cache.k_pages");
    pages.v_pages = ViewOf(&cache->v_pages, "cache.v_pages");
    pages.block_table = cache->block_table;
    pages.max_pages = cache->max_pages;
    pages.seq_lens = cache->seq_lens;
    std::optional<posenc::Positions> qp, kp;
    if (query_positions != nullptr) qp = PositionsOf(query_positions, "query_positions");
    if (key_positions != nullptr) kp = PositionsOf(key_positions, "key_positions");
    posenc::FlashAttentionDecodePaged(plan->plan, ViewOf(q, "q"), pages, ViewOf(out, "out"),
                                      lse != nullptr ? ViewOf(lse, "lse") : posenc::TensorView{},
                                      qp, kp, ContextOf(ctx));
  });
}

}  // extern "C"
