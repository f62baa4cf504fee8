// RoPE scaling schemes (posenc/rope_scaling.h): every case of the HF golden
// fixtures (rope_init.json, rope_apply.json) in the hf policy, mathematical
// properties of each scheme, and one test per bad parameter.
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/error.h"
#include "posenc/rope.h"
#include "posenc/rope_scaling.h"
#include "test_util.h"

namespace posenc {
namespace {

using nlohmann::json;
using test::Golden;
using test::ToDoubles;

// RopeScalingParams from a fixture case (its standardised rope parameters).
RopeScalingParams FromCase(const json& c, RopeNumerics numerics = RopeNumerics::kHF) {
  const json& cfg = c["config"];
  const json& rp = c["rope_parameters_standardized"];
  RopeScalingParams p;
  p.type = ParseRopeScalingType(rp["rope_type"].get<std::string>());
  p.head_dim = cfg["head_dim"];
  p.theta = rp["rope_theta"];
  p.numerics = numerics;
  p.max_position_embeddings = cfg["max_position_embeddings"];
  const auto opt = [&](const char* key) -> std::optional<double> {
    if (rp.contains(key) && !rp[key].is_null()) return rp[key].get<double>();
    return std::nullopt;
  };
  if (auto v = opt("partial_rotary_factor")) p.partial_rotary_factor = *v;
  p.factor = opt("factor");
  if (auto v = opt("original_max_position_embeddings")) {
    p.original_max_position_embeddings = static_cast<std::int64_t>(*v);
  }
  p.attention_factor = opt("attention_factor");
  p.beta_fast = opt("beta_fast");
  p.beta_slow = opt("beta_slow");
  p.mscale = opt("mscale");
  p.mscale_all_dim = opt("mscale_all_dim");
  if (rp.contains("truncate")) {
    p.truncate = rp["truncate"].get<bool>() ? YarnTruncate::kTruncate : YarnTruncate::kExact;
  }
  if (auto v = opt("low_freq_factor")) p.low_freq_factor = *v;
  if (auto v = opt("high_freq_factor")) p.high_freq_factor = *v;
  if (rp.contains("short_factor")) p.short_factor = ToDoubles(rp["short_factor"]);
  if (rp.contains("long_factor")) p.long_factor = ToDoubles(rp["long_factor"]);
  return p;
}

double MaxRelErr(const std::vector<double>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]) / std::abs(want[i]));
  }
  return worst;
}

double RelErr(double got, double want) { return std::abs(got - want) / std::abs(want); }

// HF cos/sin tables [positions][rotary_dim] through rope.h with `freq`.
void Tables(std::int64_t rotary_dim, const RopeFrequencies& freq,
            const std::vector<std::int64_t>& ids, std::vector<float>* cos,
            std::vector<float>* sin) {
  RopeParams rp;
  rp.head_dim = rotary_dim;
  rp.numerics = RopeNumerics::kHF;
  rp.frequencies = freq;
  const auto n = static_cast<std::int64_t>(ids.size());
  cos->assign(static_cast<std::size_t>(n * rotary_dim), 0.0f);
  sin->assign(cos->size(), 0.0f);
  RopeCosSin(rp, Positions::Ids(ids.data(), n), n,
             TensorView::Contiguous(cos->data(), DType::kFloat32, {n, rotary_dim}),
             TensorView::Contiguous(sin->data(), DType::kFloat32, {n, rotary_dim}));
}

// max over elements of |got - want| / (abs + per_pos * |pos|); <= 1 passes.
double ScaledErr(const std::vector<float>& got, const json& want, std::int64_t width,
                 const std::vector<std::int64_t>& ids, double abs, double per_pos) {
  const std::vector<double> w = test::FlattenDoubles(want);
  EXPECT_EQ(got.size(), w.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(got.size(), w.size()); ++i) {
    const double pos = static_cast<double>(ids[(i / static_cast<std::size_t>(width)) % ids.size()]);
    worst = std::max(worst, std::abs(got[i] - w[i]) / (abs + per_pos * pos));
  }
  return worst;
}

// ------------------------------------------------------------- golden init --

TEST(RopeScalingGolden, InitInvFreqAndAttentionFactorEveryCase) {
  int cases = 0;
  for (const json& c : Golden("rope_init.json")["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const RopeScaling s = ComputeRopeScaling(FromCase(c));
    EXPECT_EQ(s.rotary_dim, c["rotary_dim"].get<std::int64_t>());
    EXPECT_LE(MaxRelErr(s.frequencies.inv_freq, ToDoubles(c["inv_freq"])), 1e-6);
    EXPECT_LE(RelErr(s.frequencies.attention_factor, c["attention_factor"]), 1e-12);
    ++cases;
  }
  EXPECT_EQ(cases, 15);
}

TEST(RopeScalingGolden, EvaluationsFrequenciesAndTables) {
  int evals = 0;
  for (const json& c : Golden("rope_init.json")["cases"]) {
    const RopeScalingParams p = FromCase(c);
    for (const json& e : c["evaluations"]) {
      SCOPED_TRACE(c["name"].get<std::string>() + " / " + e["label"].get<std::string>());
      const auto ids = e["position_ids"].get<std::vector<std::int64_t>>();
      const RopeScaling s = ComputeRopeScaling(p, e["seq_len_seen_by_forward"].get<std::int64_t>());
      const double af = e["attention_scaling"];
      EXPECT_LE(MaxRelErr(s.frequencies.inv_freq, ToDoubles(e["inv_freq_used"])), 1e-6);
      EXPECT_LE(RelErr(s.frequencies.attention_factor, af), 1e-12);
      if (e.contains("factors_used")) {
        EXPECT_EQ(LongRopeFactorsName(s.longrope_factors), e["factors_used"].get<std::string>());
      }
      if (e.contains("dynamic_update_applied")) {
        EXPECT_EQ(s.effective_theta != p.theta, e["dynamic_update_applied"].get<bool>());
      }
      std::vector<float> cos, sin;
      // From the fixture's own frequencies: tight bound.
      Tables(s.rotary_dim, {ToDoubles(e["inv_freq_used"]), af}, ids, &cos, &sin);
      EXPECT_LE(ScaledErr(cos, e["cos"], s.rotary_dim, ids, 2e-6, 0), 1.0);
      EXPECT_LE(ScaledErr(sin, e["sin"], s.rotary_dim, ids, 2e-6, 0), 1.0);
      // End to end from our own frequencies.
      Tables(s.rotary_dim, s.frequencies, ids, &cos, &sin);
      EXPECT_LE(ScaledErr(cos, e["cos"], s.rotary_dim, ids, 2e-6, 2e-7 * af), 1.0);
      EXPECT_LE(ScaledErr(sin, e["sin"], s.rotary_dim, ids, 2e-6, 2e-7 * af), 1.0);
      ++evals;
    }
  }
  EXPECT_EQ(evals, 18);
}

TEST(RopeScalingGolden, DynamicPythonIntSeqLen) {
  for (const json& c : Golden("rope_init.json")["cases"]) {
    if (c["rope_type"] != "dynamic") continue;
    int n = 0;
    for (const auto& [len, inv] : c["inv_freq_by_seq_len_python_int"].items()) {
      SCOPED_TRACE(len);
      const RopeScaling s = ComputeRopeScaling(FromCase(c), std::stoll(len));
      EXPECT_LE(MaxRelErr(s.frequencies.inv_freq, ToDoubles(inv)), 1e-6);
      // kAccurate is the same formula in float64: within float32 rounding.
      const RopeScaling a =
          ComputeRopeScaling(FromCase(c, RopeNumerics::kAccurate), std::stoll(len));
      EXPECT_LE(MaxRelErr(a.frequencies.inv_freq, ToDoubles(inv)), 1e-6);
      ++n;
    }
    EXPECT_EQ(n, 2);
  }
}

TEST(RopeScalingGolden, AccurateNumericsWithinFloat32OfFixtures) {
  for (const json& c : Golden("rope_init.json")["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const RopeScaling s = ComputeRopeScaling(FromCase(c, RopeNumerics::kAccurate));
    EXPECT_LE(MaxRelErr(s.frequencies.inv_freq, ToDoubles(c["inv_freq"])), 1e-6);
    EXPECT_LE(RelErr(s.frequencies.attention_factor, c["attention_factor"]), 1e-12);
  }
}

TEST(RopeScalingGolden, YarnCorrectionRangeAndDeepSeekSoftmax) {
  int yarn = 0;
  for (const json& c : Golden("rope_init.json")["cases"]) {
    if (c["rope_type"] != "yarn") continue;
    SCOPED_TRACE(c["name"].get<std::string>());
    const RopeScaling s = ComputeRopeScaling(FromCase(c));
    const json& diag = c["derived_diagnostics"]["yarn"];
    EXPECT_NEAR(s.yarn_low, diag["correction_low"].get<double>(), 1e-12);
    EXPECT_NEAR(s.yarn_high, diag["correction_high"].get<double>(), 1e-12);
    if (c["derived_diagnostics"].contains("deepseek_softmax_scale")) {
      const json& ds = c["derived_diagnostics"]["deepseek_softmax_scale"];
      const double scale =
          std::pow(ds["qk_head_dim"].get<double>(), -0.5) * s.deepseek_softmax_factor;
      EXPECT_LE(RelErr(scale, ds["value"]), 1e-12);
      EXPECT_NEAR(s.deepseek_softmax_factor, std::pow(0.1 * std::log(40.0) + 1.0, 2), 1e-12);
    } else {
      EXPECT_EQ(s.deepseek_softmax_factor, 1.0);
    }
    ++yarn;
  }
  EXPECT_EQ(yarn, 5);
}

TEST(RopeScalingGolden, Llama3WavelengthBounds) {
  for (const json& c : Golden("rope_init.json")["cases"]) {
    if (c["rope_type"] != "llama3") continue;
    const RopeScaling s = ComputeRopeScaling(FromCase(c));
    const double lo = c["derived_diagnostics"]["llama3"]["low_freq_wavelen"];
    const double hi = c["derived_diagnostics"]["llama3"]["high_freq_wavelen"];
    for (const RopePairInfo& pi : s.pairs) {
      const double wl = 2 * M_PI / pi.default_inv_freq;
      const RopePairRegion want = wl > lo   ? RopePairRegion::kInterpolated
                                  : wl < hi ? RopePairRegion::kKept
                                            : RopePairRegion::kBlended;
      EXPECT_EQ(pi.region, want) << pi.index;
    }
  }
}

// ------------------------------------------------------------ golden apply --

TEST(RopeScalingGolden, ApplyScaledCasesEndToEnd) {
  std::map<std::string, json> init;
  for (const json& c : Golden("rope_init.json")["cases"]) init[c["name"]] = c;
  int checked = 0;
  for (const json& a : Golden("rope_apply.json")["cases"]) {
    if (a["rope_case"].is_null() || (init[a["rope_case"]]["rope_type"] == "default" &&
                                     a["variant"] != "neox_partial_rotate_half")) {
      continue;  // GPT-J / plain default: rope_test.cc
    }
    SCOPED_TRACE(a["name"].get<std::string>());
    const auto ids = a["position_ids"].get<std::vector<std::int64_t>>();
    const std::int64_t hd = a["head_dim"], heads = a["num_heads"];
    const auto seq = static_cast<std::int64_t>(ids.size());
    const RopeScaling s = ComputeRopeScaling(FromCase(init[a["rope_case"]]),
                                             a["seq_len_seen_by_forward"].get<std::int64_t>());
    EXPECT_LE(MaxRelErr(s.frequencies.inv_freq, ToDoubles(a["inv_freq_used"])), 1e-6);
    EXPECT_LE(RelErr(s.frequencies.attention_factor, a["attention_scaling"]), 1e-12);
    const bool deepseek = a["variant"] == "deepseek_interleave";
    RopeParams rp;
    rp.head_dim = hd;
    rp.rotary_dim = s.rotary_dim;
    rp.numerics = RopeNumerics::kHF;
    rp.pairing = deepseek ? RopePairing::kInterleaved : RopePairing::kHalfSplit;
    rp.frequencies = s.frequencies;
    std::vector<float> q(static_cast<std::size_t>(heads * seq * hd));
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t p = 0; p < seq; ++p)
        for (std::int64_t d = 0; d < hd; ++d)
          q[static_cast<std::size_t>((h * seq + p) * hd + d)] = static_cast<float>(
              std::sin(0.37 * static_cast<double>(h * 1000 + p * 100 + d) + 0.11));
    ApplyRope(rp, TensorView::Contiguous(q.data(), DType::kFloat32, {1, heads, seq, hd}),
              AttentionLayout::kBHSD, Positions::Ids(ids.data(), seq));
    if (deepseek) {  // HF de-interleaves: cat(even outputs, odd outputs)
      for (std::size_t row = 0; row < q.size(); row += static_cast<std::size_t>(hd)) {
        std::vector<float> tmp(
            q.begin() + static_cast<std::ptrdiff_t>(row),
            q.begin() + static_cast<std::ptrdiff_t>(row + static_cast<std::size_t>(hd)));
        for (std::int64_t i = 0; i < hd / 2; ++i) {
          q[row + static_cast<std::size_t>(i)] = tmp[static_cast<std::size_t>(2 * i)];
          q[row + static_cast<std::size_t>(hd / 2 + i)] = tmp[static_cast<std::size_t>(2 * i + 1)];
        }
      }
    }
    const double af = a["attention_scaling"];
    EXPECT_LE(ScaledErr(q, a["q_embed"], hd, ids, 4e-6, 4e-7 * af), 1.0);
    ++checked;
  }
  EXPECT_EQ(checked, 5);  // llama3, yarn (Qwen), partial (Pythia), DeepSeek, gpt-oss
}

// -------------------------------------------------------------- properties --

RopeScalingParams Base(RopeScalingType type, double factor, RopeNumerics numerics) {
  RopeScalingParams p;
  p.type = type;
  p.head_dim = 128;
  p.theta = 500000.0;
  p.factor = factor;
  p.numerics = numerics;
  p.max_position_embeddings = 32768;
  p.original_max_position_embeddings = 8192;
  return p;
}

const RopeNumerics kBoth[] = {RopeNumerics::kHF, RopeNumerics::kAccurate};

TEST(RopeScalingProperties, LinearIsDefaultAtPositionOverFactor) {
  for (RopeNumerics n : kBoth) {
    for (double f : {2.0, 3.0, 8.0}) {
      const RopeScaling lin = ComputeRopeScaling(Base(RopeScalingType::kLinear, f, n));
      const RopeScaling def = ComputeRopeScaling(Base(RopeScalingType::kDefault, f, n));
      for (std::size_t j = 0; j < lin.pairs.size(); ++j) {
        // angle(p, j) = p * inv/f = (p/f) * inv
        EXPECT_NEAR(lin.frequencies.inv_freq[j] * f, def.frequencies.inv_freq[j],
                    2e-7 * def.frequencies.inv_freq[j]);
        EXPECT_EQ(lin.pairs[j].region, RopePairRegion::kInterpolated);
        EXPECT_NEAR(lin.pairs[j].ratio_to_default, 1.0 / f, 1e-6);
      }
      EXPECT_EQ(lin.frequencies.attention_factor, 1.0);
    }
  }
}

TEST(RopeScalingProperties, YarnWithFactorOneIsDefault) {
  for (RopeNumerics n : kBoth) {
    for (YarnTruncate t : {YarnTruncate::kTruncate, YarnTruncate::kExact}) {
      RopeScalingParams p = Base(RopeScalingType::kYarn, 1.0, n);
      p.truncate = t;
      const RopeScaling y = ComputeRopeScaling(p);
      const RopeScaling d = ComputeRopeScaling(Base(RopeScalingType::kDefault, 1.0, n));
      // inter*(1-w) + extra*w with inter == extra: equal up to the rounding
      // of that blend (float32 under kHF).
      EXPECT_LE(MaxRelErr(y.frequencies.inv_freq, d.frequencies.inv_freq),
                n == RopeNumerics::kHF ? 2.4e-7 : 4.5e-16);
      EXPECT_EQ(y.frequencies.attention_factor, 1.0);
      for (const auto& pi : y.pairs) EXPECT_EQ(pi.region, RopePairRegion::kKept);
    }
  }
}

TEST(RopeScalingProperties, YarnRampKeepsHighAndInterpolatesLow) {
  RopeScalingParams p = Base(RopeScalingType::kYarn, 4.0, RopeNumerics::kAccurate);
  p.max_position_embeddings = 32768;
  p.original_max_position_embeddings = 8192;
  const RopeScaling y = ComputeRopeScaling(p);
  for (const RopePairInfo& pi : y.pairs) {
    const double j = static_cast<double>(pi.index);
    if (j <= y.yarn_low) {
      EXPECT_DOUBLE_EQ(pi.ratio_to_default, 1.0);
    }
    if (j >= y.yarn_high) {
      EXPECT_NEAR(pi.ratio_to_default, 0.25, 1e-15);
    }
    EXPECT_GE(pi.ratio_to_default, 0.25 - 1e-15);
    EXPECT_LE(pi.ratio_to_default, 1.0 + 1e-15);
  }
  EXPECT_NEAR(y.frequencies.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-15);
  // mscale ratio and the explicit attention factor take priority.
  p.mscale = 0.707;
  p.mscale_all_dim = 0.707;
  EXPECT_DOUBLE_EQ(ComputeRopeScaling(p).frequencies.attention_factor, 1.0);
  p.mscale_all_dim = 0.0;  // falsy: back to get_mscale(factor)
  EXPECT_NEAR(ComputeRopeScaling(p).frequencies.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-15);
  EXPECT_EQ(ComputeRopeScaling(p).deepseek_softmax_factor, 1.0);
  p.attention_factor = 1.25;
  EXPECT_EQ(ComputeRopeScaling(p).frequencies.attention_factor, 1.25);
}

TEST(RopeScalingProperties, YarnBetaZeroMeansDefaultAndFactorDerived) {
  RopeScalingParams p = Base(RopeScalingType::kYarn, 4.0, RopeNumerics::kHF);
  const RopeScaling ref = ComputeRopeScaling(p);
  p.beta_fast = 0.0;
  p.beta_slow = 0.0;
  EXPECT_EQ(ComputeRopeScaling(p).frequencies.inv_freq, ref.frequencies.inv_freq);
  p.factor.reset();  // derived: 32768 / 8192 = 4
  const RopeScaling derived = ComputeRopeScaling(p);
  EXPECT_EQ(derived.factor, 4.0);
  EXPECT_EQ(derived.frequencies.inv_freq, ref.frequencies.inv_freq);
}

TEST(RopeScalingProperties, Llama3KeepsHighFrequenciesAndDividesLowExactly) {
  for (RopeNumerics n : kBoth) {
    const RopeScaling l = ComputeRopeScaling(Base(RopeScalingType::kLlama3, 8.0, n));
    int kept = 0, interp = 0, blended = 0;
    for (const RopePairInfo& pi : l.pairs) {
      if (pi.wavelength < 8192.0 / 4.0 && pi.region == RopePairRegion::kKept) {
        EXPECT_EQ(pi.inv_freq, pi.default_inv_freq);
        ++kept;
      } else if (pi.region == RopePairRegion::kInterpolated) {
        EXPECT_EQ(pi.inv_freq,
                  n == RopeNumerics::kHF
                      ? static_cast<double>(static_cast<float>(pi.default_inv_freq) / 8.0f)
                      : pi.default_inv_freq / 8.0);
        ++interp;
      } else {
        EXPECT_EQ(pi.region, RopePairRegion::kBlended);
        EXPECT_GT(pi.ratio_to_default, 1.0 / 8.0);
        EXPECT_LT(pi.ratio_to_default, 1.0);
        ++blended;
      }
    }
    EXPECT_GT(kept, 0);
    EXPECT_GT(interp, 0);
    EXPECT_GT(blended, 0);
  }
}

TEST(RopeScalingProperties, DynamicIsDefaultUpToOriginalLengthThenGrows) {
  for (RopeNumerics n : kBoth) {
    RopeScalingParams p = Base(RopeScalingType::kDynamic, 2.0, n);
    p.max_position_embeddings = 4096;
    const RopeScaling def = ComputeRopeScaling(Base(RopeScalingType::kDefault, 1.0, n));
    for (std::int64_t len : {0, 1, 100, 4095, 4096}) {
      const RopeScaling d = ComputeRopeScaling(p, len);
      EXPECT_EQ(d.frequencies.inv_freq, def.frequencies.inv_freq) << len;
      EXPECT_EQ(d.effective_theta, p.theta);
    }
    double prev_theta = p.theta;
    for (std::int64_t len : {4097, 8192, 100000}) {
      const RopeScaling d = ComputeRopeScaling(p, len);
      EXPECT_GT(d.effective_theta, prev_theta) << len;
      prev_theta = d.effective_theta;
      // b' = b * (2L/4096 - 1)^(128/126)
      const double want =
          p.theta * std::pow(2.0 * static_cast<double>(len) / 4096.0 - 1.0, 128.0 / 126.0);
      EXPECT_LE(RelErr(d.effective_theta, want), n == RopeNumerics::kHF ? 3e-7 : 1e-15);
      EXPECT_EQ(d.pairs[0].region, RopePairRegion::kKept);
      EXPECT_EQ(d.pairs[10].region, RopePairRegion::kBlended);
    }
  }
}

TEST(RopeScalingProperties, StaticNtkRescalesBase) {
  const RopeScaling s =
      ComputeRopeScaling(Base(RopeScalingType::kNtk, 4.0, RopeNumerics::kAccurate));
  const double b = 500000.0 * std::pow(4.0, 128.0 / 126.0);
  EXPECT_DOUBLE_EQ(s.effective_theta, b);
  for (const RopePairInfo& pi : s.pairs) {
    EXPECT_NEAR(pi.inv_freq, std::pow(b, -2.0 * static_cast<double>(pi.index) / 128.0), 1e-15);
  }
  // The exponent d/(d-2) makes the lowest frequency (j = d/2-1) exactly
  // interpolated by the factor, while j = 0 is kept (the NTK design goal).
  EXPECT_NEAR(s.pairs.back().ratio_to_default, 0.25, 1e-12);
  EXPECT_EQ(s.pairs.back().region, RopePairRegion::kInterpolated);
  EXPECT_EQ(s.pairs.front().region, RopePairRegion::kKept);
  EXPECT_EQ(s.pairs[20].region, RopePairRegion::kBlended);
}

RopeScalingParams LongRopeParams(LongRopeSwitch sw) {
  RopeScalingParams p;
  p.type = RopeScalingType::kLongRope;
  p.head_dim = 16;
  p.theta = 10000.0;
  p.max_position_embeddings = 131072;
  p.original_max_position_embeddings = 4096;
  p.short_factor = {1, 1, 1.5, 2, 2, 3, 4, 4};
  p.long_factor = {1, 2, 4, 8, 16, 32, 48, 64};
  p.longrope_switch = sw;
  return p;
}

TEST(RopeScalingProperties, LongRopeSwitchPolicies) {
  // seq_len (HF): long strictly past original_max.
  RopeScalingParams p = LongRopeParams(LongRopeSwitch::kSeqLen);
  EXPECT_EQ(ComputeRopeScaling(p, 0).longrope_factors, LongRopeFactors::kShort);
  EXPECT_EQ(ComputeRopeScaling(p, 4096).longrope_factors, LongRopeFactors::kShort);
  EXPECT_EQ(ComputeRopeScaling(p, 4097).longrope_factors, LongRopeFactors::kLong);
  // context (llama.cpp): by the configured context, whatever the sequence.
  p = LongRopeParams(LongRopeSwitch::kContext);
  p.context_length = 4096;
  EXPECT_EQ(ComputeRopeScaling(p, 100000).longrope_factors, LongRopeFactors::kShort);
  p.context_length = 8192;
  EXPECT_EQ(ComputeRopeScaling(p, 10).longrope_factors, LongRopeFactors::kLong);
  p.context_length = 0;  // max_position_embeddings
  EXPECT_EQ(ComputeRopeScaling(p, 10).longrope_factors, LongRopeFactors::kLong);
  // always_long (vLLM).
  p = LongRopeParams(LongRopeSwitch::kAlwaysLong);
  const RopeScaling s = ComputeRopeScaling(p, 1);
  EXPECT_EQ(s.longrope_factors, LongRopeFactors::kLong);
  for (std::size_t j = 0; j < s.pairs.size(); ++j) {
    EXPECT_NEAR(s.pairs[j].ratio_to_default, 1.0 / p.long_factor[j], 1e-15);
  }
  EXPECT_EQ(s.pairs[0].region, RopePairRegion::kKept);
  EXPECT_EQ(s.pairs[5].region, RopePairRegion::kInterpolated);  // 32 == factor
  EXPECT_EQ(s.pairs[3].region, RopePairRegion::kBlended);
  // Attention factor: sqrt(1 + ln 32 / ln 4096) for both lists.
  EXPECT_NEAR(s.frequencies.attention_factor, std::sqrt(1.0 + 5.0 / 12.0), 1e-15);
  EXPECT_EQ(
      ComputeRopeScaling(LongRopeParams(LongRopeSwitch::kSeqLen), 1).frequencies.attention_factor,
      s.frequencies.attention_factor);
}

TEST(RopeScalingProperties, ProportionalRotatesAFractionOverFullHeadDim) {
  RopeScalingParams p;
  p.type = RopeScalingType::kProportional;
  p.head_dim = 256;
  p.partial_rotary_factor = 0.25;
  p.theta = 1e6;
  p.numerics = RopeNumerics::kAccurate;
  const RopeScaling s = ComputeRopeScaling(p);
  ASSERT_EQ(s.rotary_dim, 256);
  ASSERT_EQ(s.pairs.size(), 128u);
  for (const RopePairInfo& pi : s.pairs) {
    if (pi.index < 32) {
      EXPECT_NEAR(pi.inv_freq, std::pow(1e6, -2.0 * static_cast<double>(pi.index) / 256.0), 1e-15);
      EXPECT_EQ(pi.region, RopePairRegion::kKept);
    } else {
      EXPECT_EQ(pi.inv_freq, 0.0);
      EXPECT_EQ(pi.region, RopePairRegion::kUnrotated);
      EXPECT_TRUE(std::isinf(pi.wavelength));
    }
  }
  p.factor = 2.0;
  EXPECT_NEAR(ComputeRopeScaling(p).pairs[3].ratio_to_default, 0.5, 1e-15);
}

TEST(RopeScalingProperties, PartialRotaryUsesPythonIntTruncation) {
  RopeScalingParams p = Base(RopeScalingType::kLinear, 2.0, RopeNumerics::kHF);
  p.head_dim = 96;
  p.partial_rotary_factor = 0.25;
  EXPECT_EQ(p.RotaryDim(), 24);
  EXPECT_EQ(ComputeRopeScaling(p).frequencies.inv_freq.size(), 12u);
}

TEST(RopeScalingProperties, NamesRoundTrip) {
  for (auto t : {RopeScalingType::kDefault, RopeScalingType::kLinear, RopeScalingType::kDynamic,
                 RopeScalingType::kNtk, RopeScalingType::kYarn, RopeScalingType::kLlama3,
                 RopeScalingType::kLongRope, RopeScalingType::kProportional}) {
    EXPECT_EQ(ParseRopeScalingType(RopeScalingTypeName(t)), t);
  }
  for (auto s : {LongRopeSwitch::kSeqLen, LongRopeSwitch::kContext, LongRopeSwitch::kAlwaysLong}) {
    EXPECT_EQ(ParseLongRopeSwitch(LongRopeSwitchName(s)), s);
  }
  EXPECT_EQ(YarnGetMscale(1.0, 5.0), 1.0);
  EXPECT_DOUBLE_EQ(YarnGetMscale(40.0, 1.0), 0.1 * std::log(40.0) + 1.0);
}

// --------------------------------------------------------------- bad input --

void ExpectBad(const RopeScalingParams& p, const std::string& needle, std::int64_t seq_len = 0) {
  try {
    ComputeRopeScaling(p, seq_len);
    ADD_FAILURE() << "no error for " << needle;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(RopeScalingBadInput, UnknownTypeListsKnown) {
  try {
    ParseRopeScalingType("ntk-by-parts");
    ADD_FAILURE();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("longrope"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ParseLongRopeSwitch("sometimes"), InvalidArgument);
}
TEST(RopeScalingBadInput, HeadDim) {
  auto p = Base(RopeScalingType::kDefault, 1, RopeNumerics::kHF);
  p.head_dim = 1;
  ExpectBad(p, "head_dim");
}
TEST(RopeScalingBadInput, Theta) {
  auto p = Base(RopeScalingType::kDefault, 1, RopeNumerics::kHF);
  p.theta = std::numeric_limits<double>::quiet_NaN();
  ExpectBad(p, "rope_theta");
}
TEST(RopeScalingBadInput, PartialFactorOutOfRange) {
  auto p = Base(RopeScalingType::kDefault, 1, RopeNumerics::kHF);
  p.partial_rotary_factor = 1.5;
  ExpectBad(p, "partial_rotary_factor");
}
TEST(RopeScalingBadInput, OddRotaryDim) {
  auto p = Base(RopeScalingType::kDefault, 1, RopeNumerics::kHF);
  p.head_dim = 96;
  p.partial_rotary_factor = 0.3;  // int(28.8) = 28 is fine; 0.01 gives 0
  p.partial_rotary_factor = 0.01;
  ExpectBad(p, "rotary_dim");
}
TEST(RopeScalingBadInput, FactorBelowOne) {
  ExpectBad(Base(RopeScalingType::kLinear, 0.5, RopeNumerics::kHF), "factor: got 0.5");
}
TEST(RopeScalingBadInput, FactorMissing) {
  auto p = Base(RopeScalingType::kLlama3, 1, RopeNumerics::kHF);
  p.factor.reset();
  ExpectBad(p, "factor");
}
TEST(RopeScalingBadInput, DynamicWithoutMaxPosition) {
  auto p = Base(RopeScalingType::kDynamic, 2, RopeNumerics::kHF);
  p.max_position_embeddings = 0;
  ExpectBad(p, "max_position_embeddings");
}
TEST(RopeScalingBadInput, YarnNegativeBeta) {
  auto p = Base(RopeScalingType::kYarn, 2, RopeNumerics::kHF);
  p.beta_fast = -1;
  ExpectBad(p, "beta_fast");
}
TEST(RopeScalingBadInput, AttentionFactorNotPositive) {
  auto p = Base(RopeScalingType::kYarn, 2, RopeNumerics::kHF);
  p.attention_factor = 0.0;
  ExpectBad(p, "attention_factor");
}
TEST(RopeScalingBadInput, Llama3HighNotAboveLow) {
  auto p = Base(RopeScalingType::kLlama3, 8, RopeNumerics::kHF);
  p.high_freq_factor = 1.0;
  ExpectBad(p, "high_freq_factor");
}
TEST(RopeScalingBadInput, LongRopeListLength) {
  auto p = LongRopeParams(LongRopeSwitch::kSeqLen);
  p.long_factor.pop_back();
  ExpectBad(p, "long_factor length");
}
TEST(RopeScalingBadInput, LongRopeFactorNotPositive) {
  auto p = LongRopeParams(LongRopeSwitch::kSeqLen);
  p.short_factor[2] = 0.0;
  ExpectBad(p, "short_factor[2]");
}
TEST(RopeScalingBadInput, SeqLenNegative) {
  ExpectBad(Base(RopeScalingType::kDynamic, 2, RopeNumerics::kHF), "seq_len", -1);
}

}  // namespace
}  // namespace posenc
