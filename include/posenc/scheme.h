// posenc/scheme.h: the positional schemes of attention, declared by name.
//
// A positional scheme is what an attention layer adds to plain
// softmax(scale * q k^T) v to make it order-aware. posenc knows each scheme
// by one registered declaration (SchemeInfo): its name, the kind of terms it
// adds, which kernels evaluate it, which masks it allows, and its arguments
// — tensors (with their symbolic shapes and whether they get gradients) and
// scalars (with their types and defaults). The reference attention, the
// fused forward and the fused backward all evaluate a scheme through the
// same per-scheme code (src/attention/schemes/<name>.cc); the Python
// binding, posenc.torch's autograd, the C API and the CLI listings read the
// declaration instead of knowing the schemes by hand. How to add a scheme:
// docs/ARCHITECTURE.md, "Adding a positional scheme".
//
// Terms a scheme may add, for query i at position p and key j at position r
// (the logit is scale * q_i . k_j before these):
//   rotation: q and k are rotated by their positions first (RoPE);
//   bias:     + b_h(p, r), unscaled (ALiBi, T5, FIRE);
//   logit:    + scale * c_h(q_i, k_j, p, r), a content term (Shaw a^K,
//             Transformer-XL, DeBERTa);
//   value:    out_i += sum_j P_ij a(p, r), a value term (Shaw a^V).
//
// Arguments travel by name (SchemeArgs) and are validated against the
// declaration when a call resolves the scheme: an unknown name, a wrong type
// or a missing required tensor is an InvalidArgument naming
// "scheme.<scheme>.<argument>". Tensor arguments are views the caller keeps
// alive for the call (SchemeArgs::Vector owns its values instead); a declared
// scalar-shaped tensor ("[]") is a view of one element (rank 1, shape [1]).
//
// A call names its scheme with a PositionScheme (below). Each family header
// has a factory that fills one from typed parameters: AbsoluteScheme
// (sinusoidal.h), RopeScheme (rope.h), AlibiScheme (alibi.h), T5Scheme
// (t5.h), ShawScheme (shaw.h), TransformerXLScheme (transformer_xl.h),
// DebertaScheme (deberta.h), FireScheme (fire.h); a scheme added later is
// reached the same way, or by name with PositionScheme::Registered.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "posenc/tensor.h"

namespace posenc {

// The terms a scheme adds (bit set; see above).
enum class SchemeTerm : std::uint8_t {
  kRotation = 1,
  kBias = 2,
  kLogit = 4,
  kValue = 8,
};
std::string_view SchemeTermName(SchemeTerm term);  // "rotation", "bias", "logit", "value"

// The kernels that evaluate a scheme.
enum class SchemeKernels : std::uint8_t {
  kReferenceOnly,   // AttentionReference (+ backward)
  kReferenceFused,  // also FlashAttention, FlashAttentionVarlen, FlashAttentionBackward
};

// The attention masks a scheme is defined for.
enum class SchemeMasks : std::uint8_t {
  kAny,         // causal and bidirectional
  kCausalOnly,  // keys at positions r <= p only (e.g. FIRE)
};

enum class SchemeArgType : std::uint8_t { kTensor, kNumber, kInteger, kText, kFlag };
std::string_view SchemeArgTypeName(SchemeArgType type);  // "tensor", "number", ...

// Whether a tensor argument is a trainable parameter (its gradient is
// computed by the backward passes when the caller asks for it).
enum class SchemeArgGrad : std::uint8_t { kConstant, kTrainable };

enum class SchemeArgPresence : std::uint8_t { kOptional, kRequired };

// One argument of a scheme.
struct SchemeArgDecl {
  // Every member has a default so that designated initializers may omit any
  // (GCC 12's -Wmissing-field-initializers warns about members without one).
  std::string_view name = {};
  SchemeArgType type = SchemeArgType::kNumber;
  // Tensors: symbolic shape with H (query heads), D (head dim), Dv (value
  // dim) and the scheme's own symbols, e.g. "[num_buckets, H]"; "[]" is a
  // scalar-shaped tensor. Scalars: "".
  std::string_view shape = {};
  SchemeArgGrad grad = SchemeArgGrad::kConstant;
  SchemeArgPresence presence = SchemeArgPresence::kOptional;
  std::string_view default_text = {};  // the default as text ("" when none)
  std::string_view doc = {};
};

// The declaration of one registered scheme.
struct SchemeInfo {
  std::string_view name;     // "alibi"
  std::string_view title;    // "ALiBi"
  std::string_view paper;    // "Press et al. 2022, ..."
  std::string_view formula;  // one line
  std::uint8_t terms = 0;    // SchemeTerm bits
  SchemeKernels kernels = SchemeKernels::kReferenceOnly;
  SchemeMasks masks = SchemeMasks::kAny;
  std::vector<SchemeArgDecl> args;

  bool Has(SchemeTerm term) const { return (terms & static_cast<std::uint8_t>(term)) != 0; }
  bool Fused() const { return kernels == SchemeKernels::kReferenceFused; }
  const SchemeArgDecl* FindArg(std::string_view arg_name) const;
};

// Every registered scheme, in registration order (none, absolute, rope,
// alibi, t5, shaw, transformer_xl, deberta, fire, ...).
std::span<const SchemeInfo* const> RegisteredSchemes();

// The declaration of `name`; InvalidArgument naming `arg` and listing the
// registered names when there is none.
const SchemeInfo& FindScheme(std::string_view name, std::string_view arg = "scheme");

// Comma-separated names of the registered schemes (with `fused_only`, those
// the fused kernels evaluate), for messages and listings.
std::string SchemeNames(bool fused_only = false);

// Named arguments of one scheme call. Insertion order is kept; setting a
// name twice replaces the value.
class SchemeArgs {
 public:
  struct Value {
    SchemeArgType type = SchemeArgType::kNumber;
    TensorView tensor;
    double number = 0.0;
    std::int64_t integer = 0;
    std::string text;
    bool flag = false;
    // Vector(): the values `tensor` points into (shared by copies).
    std::shared_ptr<const std::vector<double>> owned;
  };

  SchemeArgs& Tensor(std::string_view name, const TensorView& view);
  // A rank-1 float64 tensor argument whose values the arguments own, so that
  // a scheme built from temporaries (e.g. AlibiScheme(AlibiSlopes(H))) stays
  // valid; an empty vector is a tensor of shape [0].
  SchemeArgs& Vector(std::string_view name, std::vector<double> values);
  SchemeArgs& Number(std::string_view name, double value);
  SchemeArgs& Integer(std::string_view name, std::int64_t value);
  SchemeArgs& Text(std::string_view name, std::string_view value);
  SchemeArgs& Flag(std::string_view name, bool value);

  const Value* Find(std::string_view name) const;
  std::span<const std::pair<std::string, Value>> entries() const { return entries_; }
  void Reserve(std::size_t n) { entries_.reserve(n); }  // room for n arguments
  bool empty() const { return entries_.empty(); }

 private:
  Value& Slot(std::string_view name);
  std::vector<std::pair<std::string, Value>> entries_;
};

// Named tensor views, e.g. the gradients of a scheme's trainable tensor
// arguments (keyed by the argument's name).
class NamedTensors {
 public:
  NamedTensors& Set(std::string_view name, const TensorView& view);
  const TensorView* Find(std::string_view name) const;
  std::span<const std::pair<std::string, TensorView>> entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, TensorView>> entries_;
};

// The positional scheme of one attention call: a registered scheme by name
// with its named arguments, validated against the declaration when the call
// resolves it. The family factories listed above build one; the default is
// "none" (no positional term).
struct PositionScheme {
  std::string name = "none";
  SchemeArgs args;

  static PositionScheme None() { return {}; }
  // Throws InvalidArgument naming "scheme.name" when `name` is not registered.
  static PositionScheme Registered(std::string_view name, SchemeArgs args = {});
};

}  // namespace posenc
