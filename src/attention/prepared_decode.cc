// PreparedDecode (include/posenc/flash_attention.h): a decode configuration
// resolved once, so that each decode step (FlashAttentionDecode with a plan)
// does no scheme resolution — the registry lookup, the scheme's argument
// reading and the copies of its tables, which allocate — and, with the
// shapes of the previous step, no allocation at all (c.h, "Memory"). The
// policy depends on H, D, Dv and the mask only (attention/scheme_policy.h:
// SchemeCall), never on the batch, Sq or Sk, so one plan serves a whole
// generation as the cache grows.
#include <memory>
#include <string>

#include "attention/flash_internal.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"

namespace posenc {

PreparedDecode::PreparedDecode(const AttentionParams& params, std::int64_t heads,
                               std::int64_t head_dim, std::int64_t value_dim,
                               const FlashAttentionOptions& options) {
  for (const auto& [arg, n] : {std::pair<const char*, std::int64_t>{"heads", heads},
                               {"head_dim", head_dim},
                               {"value_dim", value_dim}}) {
    if (n < 1 || n > 65536) FailArgument(arg, n, "a size in [1, 65536]");
  }
  ValidateFlashAttentionOptions(options);
  const SchemeInfo& info = FindScheme(attention_internal::SchemeName(params.scheme), "scheme.name");
  if (!info.Fused()) {
    FailArgument("scheme.name", std::string(info.name),
                 "one of " + SchemeNames(/*fused_only=*/true) + " (flash attention)");
  }
  if (params.sliding_window.has_value() && *params.sliding_window < 1) {
    FailArgument("sliding_window", *params.sliding_window,
                 "a window of at least 1 key (or no window)");
  }
  auto state = std::make_shared<State>();
  state->layout = params.layout;
  state->mask = params.mask;
  state->sliding_window = params.sliding_window;
  state->scale = static_cast<float>(EffectiveAttentionScale(params, head_dim));
  const attention_internal::Dims dims{1, heads, heads, 1, 1, head_dim, value_dim};
  state->scheme = attention_internal::ResolveScheme(params.scheme, {dims, params.mask});
  state->rope_keys = options.rope_keys;
  state->precision = options.precision;
  state->heads = heads;
  state->head_dim = head_dim;
  state->value_dim = value_dim;
  state_ = std::move(state);
}

PreparedDecode::~PreparedDecode() = default;
PreparedDecode::PreparedDecode(const PreparedDecode&) = default;
PreparedDecode& PreparedDecode::operator=(const PreparedDecode&) = default;

std::int64_t PreparedDecode::heads() const { return state_->heads; }
std::int64_t PreparedDecode::head_dim() const { return state_->head_dim; }
std::int64_t PreparedDecode::value_dim() const { return state_->value_dim; }

}  // namespace posenc
