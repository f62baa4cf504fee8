// Names of the RoPE scaling enums (include/posenc/rope_scaling.h) and their
// parsers: the rope_type strings of HF's rope_scaling dict (default, linear,
// dynamic, ...), the LongRoPE factor switch, the per-pair regions. A parser
// rejects unknown text with an InvalidArgument that lists the accepted names.
#include "posenc/rope_scaling.h"

#include <string>
#include <string_view>

#include "posenc/error.h"

namespace posenc {

std::string_view RopeScalingTypeName(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kDefault:
      return "default";
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kDynamic:
      return "dynamic";
    case RopeScalingType::kNtk:
      return "ntk";
    case RopeScalingType::kYarn:
      return "yarn";
    case RopeScalingType::kLlama3:
      return "llama3";
    case RopeScalingType::kLongRope:
      return "longrope";
    case RopeScalingType::kProportional:
      return "proportional";
  }
  return "?";
}

std::string_view KnownRopeScalingTypes() {
  return "default, linear, dynamic, ntk, yarn, llama3, longrope, proportional";
}

RopeScalingType ParseRopeScalingType(std::string_view text, std::string_view arg) {
  for (auto t : {RopeScalingType::kDefault, RopeScalingType::kLinear, RopeScalingType::kDynamic,
                 RopeScalingType::kNtk, RopeScalingType::kYarn, RopeScalingType::kLlama3,
                 RopeScalingType::kLongRope, RopeScalingType::kProportional}) {
    if (text == RopeScalingTypeName(t)) return t;
  }
  throw InvalidArgument(
      ArgMessage(arg, std::string(text), "one of " + std::string(KnownRopeScalingTypes())));
}

std::string_view LongRopeSwitchName(LongRopeSwitch s) {
  switch (s) {
    case LongRopeSwitch::kSeqLen:
      return "seq_len";
    case LongRopeSwitch::kContext:
      return "context";
    case LongRopeSwitch::kAlwaysLong:
      return "always_long";
  }
  return "?";
}

LongRopeSwitch ParseLongRopeSwitch(std::string_view text, std::string_view arg) {
  if (text == "seq_len") return LongRopeSwitch::kSeqLen;
  if (text == "context") return LongRopeSwitch::kContext;
  if (text == "always_long") return LongRopeSwitch::kAlwaysLong;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "one of seq_len, context, always_long"));
}

std::string_view RopePairRegionName(RopePairRegion r) {
  switch (r) {
    case RopePairRegion::kKept:
      return "kept";
    case RopePairRegion::kInterpolated:
      return "interpolated";
    case RopePairRegion::kBlended:
      return "blended";
    case RopePairRegion::kUnrotated:
      return "unrotated";
  }
  return "?";
}

std::string_view LongRopeFactorsName(LongRopeFactors f) {
  switch (f) {
    case LongRopeFactors::kNotLongRope:
      return "none";
    case LongRopeFactors::kShort:
      return "short_factor";
    case LongRopeFactors::kLong:
      return "long_factor";
  }
  return "?";
}

}  // namespace posenc
