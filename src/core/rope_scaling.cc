// RoPE context-extension schemes: default, linear, dynamic NTK, static NTK,
// YaRN, Llama 3, LongRoPE, proportional. Formulas, papers and conventions:
// include/posenc/rope_scaling.h. The enums' names and parsers are in
// rope_scaling_names.cc.
//
// Reference implementation matched: HF transformers modeling_rope_utils.py
// (_compute_*_parameters, dynamic_rope_update) at commit c49429ed
// (tests/golden/rope_init.json, rope_apply.json). Under RopeNumerics::kHF each
// step is computed in the dtype HF uses for it (which dtype for which step:
// above Hf() below); kAccurate: float64 throughout.
#include "posenc/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "posenc/error.h"

namespace posenc {

namespace {

constexpr double kPi = std::numbers::pi;

// Python's `int(x)` for a finite double (truncation toward zero).
std::int64_t PyInt(double x) { return static_cast<std::int64_t>(x); }

// torch: `base ** (arange(0, d, 2, float32) / d)`, element `two_j`. The
// float32 pow is computed here as a correctly rounded double pow of the
// float32 arguments; torch's is within ~1 ulp of that, so kHF inv_freq is
// within 1e-6 relative of HF's.
float Pow32(double base, std::int64_t two_j, std::int64_t dim) {
  const float e = static_cast<float>(two_j) / static_cast<float>(dim);
  return static_cast<float>(
      std::pow(static_cast<double>(static_cast<float>(base)), static_cast<double>(e)));
}

double PowD(double base, std::int64_t two_j, std::int64_t dim) {
  return std::pow(base, static_cast<double>(two_j) / static_cast<double>(dim));
}

// 1 / base^(2j/exp_dim) for j < pairs, in the requested numerics.
std::vector<double> PlainInvFreq(double base, std::int64_t pairs, std::int64_t exp_dim,
                                 RopeNumerics numerics) {
  std::vector<double> inv(static_cast<std::size_t>(pairs));
  for (std::int64_t j = 0; j < pairs; ++j) {
    inv[static_cast<std::size_t>(j)] =
        numerics == RopeNumerics::kHF
            ? static_cast<double>(1.0f / Pow32(base, 2 * j, exp_dim))
            : std::pow(base, -static_cast<double>(2 * j) / static_cast<double>(exp_dim));
  }
  return inv;
}

// Under kHF each step is computed in the dtype HF uses for it:
//  - float32 steps: torch tensor ops (`base ** (arange(0,d,2)/d)` with the
//    base rounded to float32, `1.0 / x`, `x / factor`, `factor * x`, the yarn
//    ramp, llama3 wavelengths and the smoothing band, longrope's `ext * p`,
//    the dynamic base in forward where seq_len is an int64 tensor). A tensor
//    op with a Python scalar rounds the scalar to float32 first.
//  - float64 steps: Python floats (yarn correction range, llama3 wavelength
//    bounds, get_mscale and every attention factor, the dynamic base at
//    init). Attention factors: same double operations in the same order as
//    HF, so within 1e-15 relative.
bool Hf(const RopeScalingParams& p) { return p.numerics == RopeNumerics::kHF; }

std::int64_t OriginalMax(const RopeScalingParams& p) {
  return p.original_max_position_embeddings > 0 ? p.original_max_position_embeddings
                                                : p.max_position_embeddings;
}

bool NearlyEqual(double a, double b) { return std::abs(a - b) <= 1e-6 * std::abs(b); }

// Region from the ratio inv/default: kept, fully interpolated, or in between.
RopePairRegion RegionFromRatio(double ratio, double factor) {
  if (ratio == 0.0) return RopePairRegion::kUnrotated;
  if (NearlyEqual(ratio, 1.0)) return RopePairRegion::kKept;
  if (factor != 1.0 && NearlyEqual(ratio, 1.0 / factor)) return RopePairRegion::kInterpolated;
  return RopePairRegion::kBlended;
}

double DeriveFactor(const RopeScalingParams& p) {
  if (p.factor) return *p.factor;
  return static_cast<double>(p.max_position_embeddings) / static_cast<double>(OriginalMax(p));
}

void Dynamic(const RopeScalingParams& p, std::int64_t seq_len, RopeScaling& r) {
  const std::int64_t d = r.rotary_dim;
  const double factor = *p.factor;
  const std::int64_t max_pos = p.max_position_embeddings;
  const double exponent = static_cast<double>(d) / static_cast<double>(d - 2);
  double base;
  if (seq_len > max_pos && Hf(p)) {
    // dynamic_rope_update: seq_len is a 0-d int64 tensor, so every step is a
    // float32 tensor op.
    float t = static_cast<float>(factor) * static_cast<float>(seq_len);
    t = t / static_cast<float>(max_pos);
    t = t - static_cast<float>(factor - 1.0);
    t = static_cast<float>(
        std::pow(static_cast<double>(t), static_cast<double>(static_cast<float>(exponent))));
    base = static_cast<double>(static_cast<float>(p.theta) * t);
  } else {
    const double len = static_cast<double>(std::max(seq_len, max_pos));
    base = p.theta *
           std::pow((factor * len / static_cast<double>(max_pos)) - (factor - 1.0), exponent);
  }
  r.effective_theta = base;
  r.frequencies.inv_freq = PlainInvFreq(base, d / 2, d, p.numerics);
}

void Yarn(const RopeScalingParams& p, RopeScaling& r, std::vector<RopePairRegion>& regions) {
  const std::int64_t d = r.rotary_dim;
  const double factor = r.factor;
  const double orig = static_cast<double>(OriginalMax(p));
  if (p.attention_factor) {
    r.frequencies.attention_factor = *p.attention_factor;
  } else if (p.mscale && *p.mscale != 0.0 && p.mscale_all_dim && *p.mscale_all_dim != 0.0) {
    r.frequencies.attention_factor =
        YarnGetMscale(factor, *p.mscale) / YarnGetMscale(factor, *p.mscale_all_dim);
  } else {
    r.frequencies.attention_factor = YarnGetMscale(factor);
  }
  if (p.mscale_all_dim && *p.mscale_all_dim != 0.0) {
    const double m = YarnGetMscale(factor, *p.mscale_all_dim);
    r.deepseek_softmax_factor = m * m;
  }
  const double beta_fast = (p.beta_fast && *p.beta_fast != 0.0) ? *p.beta_fast : 32.0;
  const double beta_slow = (p.beta_slow && *p.beta_slow != 0.0) ? *p.beta_slow : 1.0;
  const auto corr_dim = [&](double rotations) {
    return (static_cast<double>(d) * std::log(orig / (rotations * 2.0 * kPi))) /
           (2.0 * std::log(p.theta));
  };
  double low = corr_dim(beta_fast), high = corr_dim(beta_slow);
  if (p.truncate == YarnTruncate::kTruncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(d - 1));
  r.yarn_low = low;
  r.yarn_high = high;
  if (low == high) high += 0.001;  // HF: prevent singularity
  const std::int64_t pairs = d / 2;
  r.frequencies.inv_freq.resize(static_cast<std::size_t>(pairs));
  regions.resize(static_cast<std::size_t>(pairs));
  for (std::int64_t j = 0; j < pairs; ++j) {
    double ramp, inv;
    if (Hf(p)) {
      const float pf = Pow32(p.theta, 2 * j, d);
      const float extra = 1.0f / pf;
      const float inter = 1.0f / (static_cast<float>(factor) * pf);
      float rf = (static_cast<float>(j) - static_cast<float>(low)) / static_cast<float>(high - low);
      rf = std::clamp(rf, 0.0f, 1.0f);
      const float w = 1.0f - rf;  // inv_freq_extrapolation_factor
      inv = static_cast<double>(inter * (1.0f - w) + extra * w);
      ramp = rf;
    } else {
      const double pf = PowD(p.theta, 2 * j, d);
      ramp = std::clamp((static_cast<double>(j) - low) / (high - low), 0.0, 1.0);
      const double w = 1.0 - ramp;
      inv = (1.0 / (factor * pf)) * (1.0 - w) + (1.0 / pf) * w;
    }
    r.frequencies.inv_freq[static_cast<std::size_t>(j)] = inv;
    regions[static_cast<std::size_t>(j)] = ramp == 0.0   ? RopePairRegion::kKept
                                           : ramp == 1.0 ? RopePairRegion::kInterpolated
                                                         : RopePairRegion::kBlended;
  }
  if (factor == 1.0) std::fill(regions.begin(), regions.end(), RopePairRegion::kKept);
}

void Llama3(const RopeScalingParams& p, RopeScaling& r, std::vector<RopePairRegion>& regions) {
  const std::int64_t d = r.rotary_dim, pairs = d / 2;
  const double factor = r.factor;
  const double orig = static_cast<double>(OriginalMax(p));
  const double low_wl = orig / p.low_freq_factor;
  const double high_wl = orig / p.high_freq_factor;
  const std::vector<double> base = PlainInvFreq(p.theta, pairs, d, p.numerics);
  r.frequencies.inv_freq.resize(static_cast<std::size_t>(pairs));
  regions.resize(static_cast<std::size_t>(pairs));
  for (std::int64_t j = 0; j < pairs; ++j) {
    const auto k = static_cast<std::size_t>(j);
    RopePairRegion region;
    double out;
    if (Hf(p)) {
      const float inv = static_cast<float>(base[k]);
      const float wl = static_cast<float>(2.0 * kPi) / inv;
      if (wl > static_cast<float>(low_wl)) {
        out = static_cast<double>(inv / static_cast<float>(factor));
        region = RopePairRegion::kInterpolated;
      } else if (wl < static_cast<float>(high_wl)) {
        out = static_cast<double>(inv);
        region = RopePairRegion::kKept;
      } else {
        float s = static_cast<float>(orig) / wl - static_cast<float>(p.low_freq_factor);
        s = s / static_cast<float>(p.high_freq_factor - p.low_freq_factor);
        out = static_cast<double>((1.0f - s) * inv / static_cast<float>(factor) + s * inv);
        region = RopePairRegion::kBlended;
      }
    } else {
      const double inv = base[k];
      const double wl = 2.0 * kPi / inv;
      if (wl > low_wl) {
        out = inv / factor;
        region = RopePairRegion::kInterpolated;
      } else if (wl < high_wl) {
        out = inv;
        region = RopePairRegion::kKept;
      } else {
        const double s = (orig / wl - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
        out = (1.0 - s) * inv / factor + s * inv;
        region = RopePairRegion::kBlended;
      }
    }
    if (factor == 1.0) region = RopePairRegion::kKept;
    r.frequencies.inv_freq[k] = out;
    regions[k] = region;
  }
}

void LongRope(const RopeScalingParams& p, std::int64_t seq_len, RopeScaling& r) {
  const std::int64_t d = r.rotary_dim, pairs = d / 2;
  const std::int64_t orig = OriginalMax(p);
  const double factor = r.factor;
  if (p.attention_factor) {
    r.frequencies.attention_factor = *p.attention_factor;
  } else if (factor <= 1.0) {
    r.frequencies.attention_factor = 1.0;
  } else {
    r.frequencies.attention_factor =
        std::sqrt(1.0 + std::log(factor) / std::log(static_cast<double>(orig)));
  }
  bool use_long = false;
  switch (p.longrope_switch) {
    case LongRopeSwitch::kSeqLen:
      use_long = seq_len > orig;
      break;
    case LongRopeSwitch::kContext: {
      const std::int64_t ctx = p.context_length > 0 ? p.context_length : p.max_position_embeddings;
      use_long = ctx > orig;
      break;
    }
    case LongRopeSwitch::kAlwaysLong:
      use_long = true;
      break;
  }
  r.longrope_factors = use_long ? LongRopeFactors::kLong : LongRopeFactors::kShort;
  const std::vector<double>& ext = use_long ? p.long_factor : p.short_factor;
  r.frequencies.inv_freq.resize(static_cast<std::size_t>(pairs));
  for (std::int64_t j = 0; j < pairs; ++j) {
    const auto k = static_cast<std::size_t>(j);
    r.frequencies.inv_freq[k] =
        Hf(p) ? static_cast<double>(1.0f / (static_cast<float>(ext[k]) * Pow32(p.theta, 2 * j, d)))
              : 1.0 / (ext[k] * PowD(p.theta, 2 * j, d));
  }
}

void Proportional(const RopeScalingParams& p, RopeScaling& r) {
  const std::int64_t pairs = p.head_dim / 2;
  const std::int64_t angles = std::min(
      pairs, PyInt(std::floor(p.partial_rotary_factor * static_cast<double>(p.head_dim) / 2.0)));
  std::vector<double> inv = PlainInvFreq(p.theta, angles, p.head_dim, p.numerics);
  inv.resize(static_cast<std::size_t>(pairs), 0.0);
  for (double& v : inv) {
    v = Hf(p) ? static_cast<double>(static_cast<float>(v) / static_cast<float>(r.factor))
              : v / r.factor;
  }
  r.frequencies.inv_freq = std::move(inv);
}

}  // namespace

double YarnGetMscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

std::int64_t RopeScalingParams::RotaryDim() const {
  if (type == RopeScalingType::kProportional) return 2 * (head_dim / 2);
  return PyInt(static_cast<double>(head_dim) * partial_rotary_factor);
}

namespace {

// Checks head_dim, partial_rotary_factor, theta, the rotary dim and the context lengths; returns
// the rotary dim.
std::int64_t ValidateDims(const RopeScalingParams& p) {
  using T = RopeScalingType;
  Require(p.head_dim >= 2 && p.head_dim <= (1 << 16), "head_dim", p.head_dim,
          "an integer in [2, 65536]");
  Require(std::isfinite(p.partial_rotary_factor) && p.partial_rotary_factor > 0.0 &&
              p.partial_rotary_factor <= 1.0,
          "partial_rotary_factor", p.partial_rotary_factor, "a number in (0, 1]");
  Require(std::isfinite(p.theta) && p.theta > 1.0, "rope_theta", p.theta, "a finite number > 1");
  const std::int64_t d = p.RotaryDim();
  if (p.type != T::kProportional) {
    if (!(d >= 2 && d % 2 == 0)) {
      FailArgument("rotary_dim", d,
                   "an even number >= 2 (int(head_dim=" + std::to_string(p.head_dim) +
                       " * partial_rotary_factor))");
    }
  }
  if (p.type == T::kDynamic || p.type == T::kNtk) {
    Require(d >= 4, "rotary_dim", d, "at least 4 for NTK scaling (exponent d/(d-2))");
  }
  Require(p.max_position_embeddings >= 0, "max_position_embeddings", p.max_position_embeddings,
          "an integer >= 0");
  Require(p.original_max_position_embeddings >= 0, "original_max_position_embeddings",
          p.original_max_position_embeddings, "an integer >= 0 (0: max_position_embeddings)");
  Require(p.context_length >= 0, "context_length", p.context_length, "an integer >= 0");
  return d;
}

// Checks factor (> 0 for proportional, else >= 1) and attention_factor (> 0) where given.
void ValidateFactors(const RopeScalingParams& p, const std::string& type_name) {
  using T = RopeScalingType;
  if (p.factor) {
    const bool ok = p.type == T::kProportional ? std::isfinite(*p.factor) && *p.factor > 0.0
                                               : std::isfinite(*p.factor) && *p.factor >= 1.0;
    if (!(ok)) {
      FailArgument("factor", *p.factor,
                   p.type == T::kProportional ? "a finite number > 0"
                                              : "a finite number >= 1 for rope_type " + type_name);
    }
  }
  if (p.attention_factor) {
    Require(std::isfinite(*p.attention_factor) && *p.attention_factor > 0.0, "attention_factor",
            *p.attention_factor, "a finite number > 0");
  }
}

// Checks yarn's optional beta_fast / beta_slow (>= 0) and mscale / mscale_all_dim (finite).
void ValidateYarnParams(const RopeScalingParams& p) {
  for (auto [name, v] :
       {std::pair{"beta_fast", p.beta_fast}, std::pair{"beta_slow", p.beta_slow}}) {
    if (v)
      Require(std::isfinite(*v) && *v >= 0.0, name, *v,
              "a finite number > 0 (0 means the default)");
  }
  for (auto [name, v] :
       {std::pair{"mscale", p.mscale}, std::pair{"mscale_all_dim", p.mscale_all_dim}}) {
    if (v) Require(std::isfinite(*v), name, *v, "a finite number");
  }
}

// Checks that short_factor and long_factor each hold rotary_dim/2 finite numbers > 0.
void ValidateLongRopeFactors(const RopeScalingParams& p, std::int64_t d) {
  const std::size_t want = static_cast<std::size_t>(d / 2);
  for (auto [name, list] :
       {std::pair{"short_factor", &p.short_factor}, std::pair{"long_factor", &p.long_factor}}) {
    if (list->size() != want) {
      FailArgument(std::string(name) + " length", list->size(),
                   std::to_string(want) + " (rotary_dim/2)");
    }
    for (std::size_t i = 0; i < list->size(); ++i) {
      if (!(std::isfinite((*list)[i]) && (*list)[i] > 0.0)) {
        FailArgument(std::string(name) + "[" + std::to_string(i) + "]", (*list)[i],
                     "a finite number > 0");
      }
    }
  }
}

// Checks a yarn or longrope p: an original context, a factor given or derivable (>= 1 for yarn),
// then the scheme's own parameters.
void ValidateYarnOrLongRope(const RopeScalingParams& p, std::int64_t d,
                            const std::string& type_name) {
  if (OriginalMax(p) <= 0) {
    FailArgument("original_max_position_embeddings", OriginalMax(p),
                 "an integer > 0 (or max_position_embeddings > 0) for rope_type " + type_name);
  }
  if (!p.factor) {
    if (p.max_position_embeddings <= 0) {
      FailArgument("max_position_embeddings", p.max_position_embeddings,
                   "an integer > 0 to derive the factor of rope_type " + type_name);
    }
    Require(DeriveFactor(p) >= 1.0 || p.type == RopeScalingType::kLongRope, "factor",
            DeriveFactor(p), "max_position_embeddings / original_max_position_embeddings >= 1");
  }
  if (p.type == RopeScalingType::kYarn) {
    ValidateYarnParams(p);
  } else {
    ValidateLongRopeFactors(p, d);
  }
}

// Checks a llama3 p: factor, original context, and 0 < low_freq_factor < high_freq_factor.
void ValidateLlama3(const RopeScalingParams& p) {
  Require(p.factor.has_value(), "factor", "(missing)", "a number >= 1 for rope_type llama3");
  Require(OriginalMax(p) > 0, "original_max_position_embeddings", OriginalMax(p),
          "an integer > 0 for rope_type llama3");
  Require(std::isfinite(p.low_freq_factor) && p.low_freq_factor > 0.0, "low_freq_factor",
          p.low_freq_factor, "a finite number > 0");
  if (!(std::isfinite(p.high_freq_factor) && p.high_freq_factor > p.low_freq_factor)) {
    FailArgument("high_freq_factor", p.high_freq_factor,
                 "a finite number > low_freq_factor (" + detail::ToText(p.low_freq_factor) + ")");
  }
}

// Checks that freq_factors, if given, holds rotary_dim/2 (proportional: head_dim/2) finite
// numbers > 0.
void ValidateFreqFactors(const RopeScalingParams& p, std::int64_t d) {
  if (p.freq_factors.empty()) return;
  const std::size_t want =
      static_cast<std::size_t>(p.type == RopeScalingType::kProportional ? p.head_dim / 2 : d / 2);
  if (p.freq_factors.size() != want) {
    FailArgument("freq_factors length", p.freq_factors.size(),
                 std::to_string(want) + " (rotary_dim/2)");
  }
  for (std::size_t i = 0; i < want; ++i) {
    if (!(std::isfinite(p.freq_factors[i]) && p.freq_factors[i] > 0.0)) {
      FailArgument("freq_factors[" + std::to_string(i) + "]", p.freq_factors[i],
                   "a finite number > 0");
    }
  }
}

// Sets r's inv_freq (and the scheme's attention factors, regions, effective theta) by p's scheme.
void ApplyScheme(const RopeScalingParams& params, std::int64_t seq_len, RopeScaling& r,
                 std::vector<RopePairRegion>& regions) {
  using T = RopeScalingType;
  const std::int64_t d = r.rotary_dim, pairs = d / 2;
  switch (params.type) {
    case T::kDefault:
      r.frequencies.inv_freq = PlainInvFreq(params.theta, pairs, d, params.numerics);
      break;
    case T::kLinear: {
      r.frequencies.inv_freq = PlainInvFreq(params.theta, pairs, d, params.numerics);
      for (double& v : r.frequencies.inv_freq) {
        v = Hf(params) ? static_cast<double>(static_cast<float>(v) / static_cast<float>(r.factor))
                       : v / r.factor;
      }
      break;
    }
    case T::kDynamic:
      Dynamic(params, seq_len, r);
      break;
    case T::kNtk: {
      const double exponent = static_cast<double>(d) / static_cast<double>(d - 2);
      r.effective_theta = params.theta * std::pow(r.factor, exponent);
      r.frequencies.inv_freq = PlainInvFreq(r.effective_theta, pairs, d, params.numerics);
      break;
    }
    case T::kYarn:
      Yarn(params, r, regions);
      break;
    case T::kLlama3:
      Llama3(params, r, regions);
      break;
    case T::kLongRope:
      LongRope(params, seq_len, r);
      break;
    case T::kProportional:
      Proportional(params, r);
      break;
  }
}

// Divides r's inv_freq by params.freq_factors (ggml: after the scheme) and replaces regions:
// for default rope kept / most divided / in between, else empty (from the ratio).
void ApplyFreqFactors(const RopeScalingParams& params, RopeScaling& r,
                      std::vector<RopePairRegion>& regions) {
  for (std::size_t j = 0; j < r.frequencies.inv_freq.size(); ++j) {
    double& v = r.frequencies.inv_freq[j];
    v = Hf(params) ? static_cast<double>(static_cast<float>(v) /
                                         static_cast<float>(params.freq_factors[j]))
                   : v / params.freq_factors[j];
  }
  regions.clear();  // a scheme's own regions no longer describe the divided table
  if (params.type == RopeScalingType::kDefault) {  // kept / most divided / in between
    const double max_ff = *std::max_element(params.freq_factors.begin(), params.freq_factors.end());
    for (const double ff : params.freq_factors) {
      regions.push_back(ff == 1.0      ? RopePairRegion::kKept
                        : ff == max_ff ? RopePairRegion::kInterpolated
                                       : RopePairRegion::kBlended);
    }
  }
}

// Fills r.pairs: each pair's inv_freq against the unscaled table, its wavelength and region
// (regions[j], else from the ratio to the default).
void DescribePairs(const RopeScalingParams& params, const std::vector<RopePairRegion>& regions,
                   RopeScaling& r) {
  const std::int64_t exp_dim =
      params.type == RopeScalingType::kProportional ? params.head_dim : r.rotary_dim;
  const std::int64_t n = static_cast<std::int64_t>(r.frequencies.inv_freq.size());
  const std::vector<double> def = PlainInvFreq(params.theta, n, exp_dim, params.numerics);
  r.pairs.resize(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j) {
    const auto k = static_cast<std::size_t>(j);
    RopePairInfo& info = r.pairs[k];
    info.index = j;
    info.inv_freq = r.frequencies.inv_freq[k];
    info.default_inv_freq = def[k];
    info.wavelength =
        info.inv_freq > 0.0 ? 2.0 * kPi / info.inv_freq : std::numeric_limits<double>::infinity();
    info.ratio_to_default = info.inv_freq / def[k];
    info.region = regions.empty() ? RegionFromRatio(info.ratio_to_default, r.factor) : regions[k];
  }
}

}  // namespace

void ValidateRopeScalingParams(const RopeScalingParams& p) {
  using T = RopeScalingType;
  const std::int64_t d = ValidateDims(p);
  const std::string type_name(RopeScalingTypeName(p.type));
  ValidateFactors(p, type_name);
  switch (p.type) {
    case T::kDefault:
      break;
    case T::kLinear:
    case T::kNtk:
      if (!(p.factor.has_value())) {
        FailArgument("factor", "(missing)", "a number >= 1 for rope_type " + type_name);
      }
      break;
    case T::kDynamic:
      Require(p.factor.has_value(), "factor", "(missing)", "a number >= 1 for rope_type dynamic");
      Require(p.max_position_embeddings > 0, "max_position_embeddings", p.max_position_embeddings,
              "an integer > 0 for rope_type dynamic");
      break;
    case T::kYarn:
    case T::kLongRope:
      ValidateYarnOrLongRope(p, d, type_name);
      break;
    case T::kLlama3:
      ValidateLlama3(p);
      break;
    case T::kProportional:
      break;
  }
  ValidateFreqFactors(p, d);
}

RopeScaling ComputeRopeScaling(const RopeScalingParams& params, std::int64_t seq_len) {
  ValidateRopeScalingParams(params);
  Require(seq_len >= 0 && seq_len <= kMaxPosition + 1, "seq_len", seq_len,
          "an integer in [0, 2^24] (0: at initialisation)");
  using T = RopeScalingType;
  RopeScaling r;
  r.type = params.type;
  r.head_dim = params.head_dim;
  r.rotary_dim = params.RotaryDim();
  r.effective_theta = params.theta;
  r.factor = (params.type == T::kYarn || params.type == T::kLongRope) ? DeriveFactor(params)
             : params.factor                                          ? *params.factor
                                                                      : 1.0;
  std::vector<RopePairRegion> regions;  // scheme-specific; empty: from the ratio
  ApplyScheme(params, seq_len, r, regions);
  if (!params.freq_factors.empty()) ApplyFreqFactors(params, r, regions);
  DescribePairs(params, regions, r);  // per-pair description against the unscaled table
  return r;
}

}  // namespace posenc
