// Scheme "alibi": attention with linear biases (Press, Smith, Lewis 2022,
// "Train Short, Test Long: Attention with Linear Biases Enables Input
// Length Extrapolation", section 3).
//   logit(i, j) = scale * q_i . k_j - m_h |p - r|
// one fixed slope m_h per query head (posenc/alibi.h: the paper's geometric
// slopes, Bloom's float32 variant, or explicit slopes), unscaled, no
// gradient. The symmetric |p - r| form is the encoder variant; under a
// causal mask it is the paper's -m (p - r). Reference: the paper's fairseq
// code and HF Bloom/MPT (tests/golden/alibi.json). The bias depends only on
// r - p, so the fused kernels evaluate it once per distance of a tile.
#include <cmath>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "attention/scheme_policy.h"
#include "posenc/alibi.h"
#include "posenc/error.h"

namespace posenc::attention_internal {
namespace {

const SchemeInfo& Info() {
  static const SchemeInfo info{
      .name = "alibi",
      .title = "ALiBi (attention with linear biases)",
      .paper = "Press et al. 2022, Train Short, Test Long: Attention with Linear Biases",
      .formula = "logit = scale * q . k - m_h |p - r|",
      .terms = static_cast<std::uint8_t>(SchemeTerm::kBias),
      .kernels = SchemeKernels::kReferenceFused,
      .masks = SchemeMasks::kAny,
      .args =
          {
              {.name = "slopes",
               .type = SchemeArgType::kTensor,
               .shape = "[H]",
               .doc = "explicit slopes m_h (finite, >= 0); default from max_bias"},
              {.name = "max_bias",
               .type = SchemeArgType::kNumber,
               .default_text = "8",
               .doc = "the paper's 8: m_h = 2^(-8 h / H) for H a power of two"},
              {.name = "convention",
               .type = SchemeArgType::kText,
               .default_text = "reference",
               .doc = "reference (the paper's slopes) or bloom_float32"},
          },
  };
  return info;
}

class AlibiScheme final : public SchemeImpl<AlibiScheme> {
 public:
  explicit AlibiScheme(std::vector<double> slopes)
      : SchemeImpl(Info()), slopes_(std::move(slopes)), slopes_f_(slopes_.begin(), slopes_.end()) {}

  template <typename T>
  T BiasAt(std::int64_t h, std::int64_t p, std::int64_t r) const {
    if constexpr (std::is_same_v<T, float>) {
      return -slopes_f_[static_cast<std::size_t>(h)] * static_cast<float>(std::llabs(p - r));
    } else {
      return 0.0 - slopes_[static_cast<std::size_t>(h)] * static_cast<double>(std::llabs(p - r));
    }
  }
  bool DistanceOnly(std::int64_t, std::int64_t) const override { return true; }
  // BiasAt<float> over a run of distances d0 + t, in 32-bit integers (the
  // distances of positions in [0, 2^24) are below 2^25 in magnitude, so
  // int32 holds them and float32 converts them exactly: the same values)
  // so that the loop vectorises (the generic loop's int64 conversions show
  // in an ALiBi decode).
  void DistanceBias(std::int64_t h, std::int64_t, std::int64_t d0, std::int64_t n,
                    float* out) const override {
    const float slope = slopes_f_[static_cast<std::size_t>(h)];
    const auto first = static_cast<std::int32_t>(d0);
    for (std::int32_t t = 0; t < static_cast<std::int32_t>(n); ++t) {
      const std::int32_t d = first + t;
      out[t] = -slope * static_cast<float>(d < 0 ? -d : d);
    }
  }

 private:
  std::vector<double> slopes_;
  std::vector<float> slopes_f_;
};

std::unique_ptr<SchemePolicy> Resolve(const SchemeArgs& args, const SchemeCall& call) {
  const SchemeArgReader a(Info(), args);
  const std::int64_t H = call.dims.heads;
  std::vector<double> slopes;
  if (const TensorView* s = a.Tensor("slopes"); s != nullptr) {
    Require(s->rank == 1, a.Name("slopes.ndim"), s->rank, "1");
    if (s->shape[0] != H) {
      FailArgument(a.Name("slopes.size()"), s->shape[0],
                   "one slope per query head (" + std::to_string(H) + ")");
    }
    const std::string slopes_name = a.Name("slopes");
    ValidateView(*s, slopes_name, 1);
    for (std::int64_t h = 0; h < H; ++h) {
      const double m = LoadAsDouble(s->data, s->dtype, h * s->strides[0]);
      RequireAt(std::isfinite(m) && m >= 0.0, slopes_name, h, m, "a finite slope >= 0");
      slopes.push_back(m);
    }
  } else {
    AlibiParams p;
    p.num_heads = H;
    p.max_bias = a.Number("max_bias", 8.0);
    p.convention =
        ParseAlibiSlopeConvention(a.Text("convention", "reference"), a.Name("convention"));
    slopes = AlibiSlopes(p);
  }
  return std::make_unique<AlibiScheme>(std::move(slopes));
}

}  // namespace

POSENC_REGISTER_SCHEME(alibi, &Info, &Resolve)

}  // namespace posenc::attention_internal

namespace posenc {

PositionScheme AlibiScheme(std::vector<double> slopes) {
  SchemeArgs a;
  a.Vector("slopes", std::move(slopes));
  return PositionScheme::Registered("alibi", std::move(a));
}

}  // namespace posenc
