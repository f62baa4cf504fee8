// Scheme "rope": rotary position embedding (Su et al. 2021, "RoFormer:
// Enhanced Transformer with Rotary Position Embedding", eq. (34)).
//   logit(i, j) = scale * (R(p) q_i) . (R(r) k_j) = scale * q_i . R(r - p) k_j
// q and k are rotated by their positions before the dot products (the
// rotation, pairings, partial rotary, frequencies and numerics of
// posenc/rope.h); v is not rotated. The kernels rotate tiles with
// ApplyRope; the fused kernels can take keys already rotated by the caller
// (FlashRopeKeys::kPreRotated, a RoPE KV cache).
#include <string>

#include "attention/scheme_policy.h"
#include "posenc/error.h"
#include "posenc/rope.h"

namespace posenc::attention_internal {
namespace {

const SchemeInfo& Info() {
  static const SchemeInfo info{
      .name = "rope",
      .title = "rotary position embedding (RoPE)",
      .paper = "Su et al. 2021, RoFormer: Enhanced Transformer with Rotary Position Embedding",
      .formula = "logit = scale * (R(p) q) . (R(r) k)",
      .terms = static_cast<std::uint8_t>(SchemeTerm::kRotation),
      .kernels = SchemeKernels::kReferenceFused,
      .masks = SchemeMasks::kAny,
      .args =
          {
              {.name = "head_dim",
               .type = SchemeArgType::kInteger,
               .default_text = "D",
               .doc = "head dimension; must equal q's"},
              {.name = "rotary_dim",
               .type = SchemeArgType::kInteger,
               .default_text = "0",
               .doc = "rotated dimensions (even; 0: head_dim)"},
              {.name = "theta",
               .type = SchemeArgType::kNumber,
               .default_text = "10000",
               .doc = "base of the default frequencies"},
              {.name = "pairing",
               .type = SchemeArgType::kText,
               .default_text = "half_split",
               .doc = "half_split (GPT-NeoX, HF) or interleaved (GPT-J, RoFormer)"},
              {.name = "numerics",
               .type = SchemeArgType::kText,
               .default_text = "accurate",
               .doc = "accurate (float64 angles) or hf (HF's float32 recipe)"},
              {.name = "inv_freq",
               .type = SchemeArgType::kTensor,
               .shape = "[rotary_dim / 2]",
               .doc = "explicit frequencies (e.g. from a scaled config)"},
              {.name = "attention_factor",
               .type = SchemeArgType::kNumber,
               .default_text = "1",
               .doc = "multiplies cos and sin (YaRN, LongRoPE)"},
          },
  };
  return info;
}

class RopeScheme final : public SchemeImpl<RopeScheme> {
 public:
  explicit RopeScheme(RopeParams params) : SchemeImpl(Info()), params_(std::move(params)) {}
  const RopeParams* rotation() const override { return &params_; }

 private:
  RopeParams params_;
};

std::unique_ptr<SchemePolicy> Resolve(const SchemeArgs& args, const SchemeCall& call) {
  const SchemeArgReader a(Info(), args);
  const std::int64_t D = call.dims.head_dim;
  RopeParams r;
  r.head_dim = a.Integer("head_dim", D);
  r.rotary_dim = a.Integer("rotary_dim", 0);
  r.theta = a.Number("theta", 10000.0);
  r.pairing = ParseRopePairing(a.Text("pairing", "half_split"), a.Name("pairing"));
  r.numerics = ParseRopeNumerics(a.Text("numerics", "accurate"), a.Name("numerics"));
  if (const TensorView* f = a.Tensor("inv_freq"); f != nullptr) {
    ValidateView(*f, a.Name("inv_freq"), 1);
    for (std::int64_t i = 0; i < f->shape[0]; ++i) {
      r.frequencies.inv_freq.push_back(LoadAsDouble(f->data, f->dtype, i * f->strides[0]));
    }
  }
  r.frequencies.attention_factor = a.Number("attention_factor", 1.0);
  ValidateRopeParams(r);
  if (r.head_dim != D) {
    FailArgument(a.Name("head_dim"), r.head_dim,
                 "the head dimension of q and k (" + std::to_string(D) + ")");
  }
  return std::make_unique<RopeScheme>(std::move(r));
}

}  // namespace

POSENC_REGISTER_SCHEME(rope, &Info, &Resolve)

}  // namespace posenc::attention_internal

namespace posenc {

PositionScheme RopeScheme(const RopeParams& r) {
  SchemeArgs a;
  a.Integer("head_dim", r.head_dim).Integer("rotary_dim", r.rotary_dim);
  a.Number("theta", r.theta).Text("pairing", RopePairingName(r.pairing));
  a.Text("numerics", RopeNumericsName(r.numerics));
  if (!r.frequencies.inv_freq.empty()) a.Vector("inv_freq", r.frequencies.inv_freq);
  a.Number("attention_factor", r.frequencies.attention_factor);
  return PositionScheme::Registered("rope", std::move(a));
}

}  // namespace posenc
