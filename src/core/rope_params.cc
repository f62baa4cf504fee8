// RoPE parameters (include/posenc/rope.h): the names and parsers of the
// pairing / numerics / direction enums, ValidateRopeParams, and the default
// frequencies inv_freq[j] = theta^(-2j/rotary_dim). kHF computes them as HF
// transformers' compute_default_rope_parameters does, in float32
// (`1.0 / (base ** (arange(0, dim, 2).float() / dim))`); kAccurate in float64.
// The rotation and the cos/sin tables that use them are in rope.cc.
#include "posenc/rope.h"

#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc {

std::string_view RopePairingName(RopePairing p) {
  switch (p) {
    case RopePairing::kHalfSplit:
      return "half_split";
    case RopePairing::kInterleaved:
      return "interleaved";
  }
  return "?";
}

RopePairing ParseRopePairing(std::string_view text, std::string_view arg) {
  if (text == "half_split") return RopePairing::kHalfSplit;
  if (text == "interleaved") return RopePairing::kInterleaved;
  throw InvalidArgument(ArgMessage(arg, std::string(text),
                                   "half_split (NeoX/Llama rotate_half) or interleaved (GPT-J)"));
}

std::string_view RopeNumericsName(RopeNumerics n) {
  switch (n) {
    case RopeNumerics::kAccurate:
      return "accurate";
    case RopeNumerics::kHF:
      return "hf";
  }
  return "?";
}

RopeNumerics ParseRopeNumerics(std::string_view text, std::string_view arg) {
  if (text == "accurate") return RopeNumerics::kAccurate;
  if (text == "hf") return RopeNumerics::kHF;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "accurate or hf"));
}

std::string_view RopeDirectionName(RopeDirection d) {
  switch (d) {
    case RopeDirection::kForward:
      return "forward";
    case RopeDirection::kInverse:
      return "inverse";
  }
  return "?";
}

RopeDirection ParseRopeDirection(std::string_view text, std::string_view arg) {
  if (text == "forward") return RopeDirection::kForward;
  if (text == "inverse") return RopeDirection::kInverse;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "forward or inverse"));
}

namespace {

constexpr std::int64_t kMaxHeadDim = 65536;

void RequireTheta(double theta) {
  Require(std::isfinite(theta) && theta > 1.0, "theta", theta, "a finite base > 1");
}

}  // namespace

void ValidateRopeParams(const RopeParams& params) {
  // Messages are built only on failure (no allocation in a valid call).
  Require(params.head_dim >= 2 && params.head_dim <= kMaxHeadDim, "head_dim", params.head_dim,
          "a head dimension in [2, 65536]");
  const auto allowed_rd = [&] {
    return "0 (meaning head_dim) or an even number in [2, head_dim=" +
           std::to_string(params.head_dim) + "]";
  };
  const std::int64_t rd = params.EffectiveRotaryDim();
  if (params.rotary_dim < 0 || params.rotary_dim > params.head_dim || rd < 2 || rd % 2 != 0) {
    FailArgument("rotary_dim", params.rotary_dim, allowed_rd());
  }
  RequireTheta(params.theta);
  const auto& inv = params.frequencies.inv_freq;
  if (!inv.empty()) {
    if (static_cast<std::int64_t>(inv.size()) != rd / 2) {
      FailArgument(
          "frequencies.inv_freq.size()", inv.size(),
          "rotary_dim/2 = " + std::to_string(rd / 2) + " frequencies (or none for the default)");
    }
    for (std::size_t j = 0; j < inv.size(); ++j) {
      RequireAt(std::isfinite(inv[j]) && inv[j] >= 0.0, "frequencies.inv_freq",
                static_cast<std::int64_t>(j), inv[j],
                "a finite frequency >= 0 (radians per position)");
    }
  }
  const double af = params.frequencies.attention_factor;
  Require(std::isfinite(af) && af > 0.0, "frequencies.attention_factor", af, "a finite factor > 0");
}

RopeFrequencies RopeDefaultFrequencies(std::int64_t rotary_dim, double theta,
                                       RopeNumerics numerics) {
  Require(rotary_dim >= 2 && rotary_dim <= kMaxHeadDim && rotary_dim % 2 == 0, "rotary_dim",
          rotary_dim, "an even number in [2, 65536]");
  RequireTheta(theta);
  RopeFrequencies f;
  const std::int64_t half = rotary_dim / 2;
  f.inv_freq.resize(static_cast<std::size_t>(half));
  for (std::int64_t j = 0; j < half; ++j) {
    double v;
    if (numerics == RopeNumerics::kAccurate) {
      v = std::pow(theta, -static_cast<double>(2 * j) / static_cast<double>(rotary_dim));
    } else {
      // torch: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), all float32.
      const float exponent = static_cast<float>(2 * j) / static_cast<float>(rotary_dim);
      const float power = static_cast<float>(
          std::pow(static_cast<double>(static_cast<float>(theta)), static_cast<double>(exponent)));
      v = 1.0f / power;
    }
    f.inv_freq[static_cast<std::size_t>(j)] = v;
  }
  return f;
}

RopeFrequencies ResolveRopeFrequencies(const RopeParams& params) {
  ValidateRopeParams(params);
  RopeFrequencies f;
  if (params.frequencies.inv_freq.empty()) {
    f = RopeDefaultFrequencies(params.EffectiveRotaryDim(), params.theta, params.numerics);
  } else {
    f.inv_freq = params.frequencies.inv_freq;
    if (params.numerics == RopeNumerics::kHF) {
      for (double& v : f.inv_freq) v = static_cast<float>(v);
    }
  }
  f.attention_factor = params.frequencies.attention_factor;
  return f;
}

}  // namespace posenc
