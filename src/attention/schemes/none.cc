// Schemes "none" and "absolute": attention adds no position term.
//   logit(i, j) = scale * q_i . k_j
// "none" is NoPE (Kazemnejad et al. 2023, "The Impact of Positional Encoding
// on Length Generalization in Transformers"): order is visible only through
// the causal mask. "absolute" is the same attention for models whose
// encoding (sinusoidal, Vaswani et al. 2017; learned tables, GPT-2 / BERT)
// was added to the token embeddings before the projections
// (posenc/sinusoidal.h, posenc/learned.h); the kernels see no term.
#include "attention/scheme_policy.h"
#include "posenc/sinusoidal.h"

namespace posenc::attention_internal {
namespace {

const SchemeInfo& NoneInfo() {
  static const SchemeInfo info{
      .name = "none",
      .title = "no positional encoding (NoPE)",
      .paper =
          "Kazemnejad et al. 2023, The Impact of Positional Encoding on Length "
          "Generalization in Transformers",
      .formula = "logit = scale * q . k",
      .terms = 0,
      .kernels = SchemeKernels::kReferenceFused,
      .masks = SchemeMasks::kAny,
      .args = {},
  };
  return info;
}

const SchemeInfo& AbsoluteInfo() {
  static const SchemeInfo info{
      .name = "absolute",
      .title = "absolute encodings added to the inputs (sinusoidal, learned)",
      .paper = "Vaswani et al. 2017, Attention Is All You Need, section 3.5",
      .formula = "logit = scale * q . k (x + PE(pos) before the projections)",
      .terms = 0,
      .kernels = SchemeKernels::kReferenceFused,
      .masks = SchemeMasks::kAny,
      .args = {},
  };
  return info;
}

class NoTerms final : public SchemeImpl<NoTerms> {
 public:
  using SchemeImpl::SchemeImpl;
};

template <const SchemeInfo& (*InfoFn)()>
std::unique_ptr<SchemePolicy> Resolve(const SchemeArgs& args, const SchemeCall&) {
  const SchemeArgReader reader(InfoFn(), args);  // rejects any argument
  return std::make_unique<NoTerms>(InfoFn());
}

}  // namespace

POSENC_REGISTER_SCHEME(none, &NoneInfo, &Resolve<&NoneInfo>)
POSENC_REGISTER_SCHEME(absolute, &AbsoluteInfo, &Resolve<&AbsoluteInfo>)

}  // namespace posenc::attention_internal

namespace posenc {

PositionScheme AbsoluteScheme() { return PositionScheme::Registered("absolute"); }

}  // namespace posenc
