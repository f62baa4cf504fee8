// RoPE core (posenc/rope.h): golden HF fixtures in both numerics, the
// mathematical properties of the rotation (bad input: rope_bad_input_test.cc).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/error.h"
#include "posenc/rope.h"
#include "rope_test_util.h"
#include "test_util.h"

namespace posenc {
namespace {

using test::Golden;

// ---------------------------------------------------------------- helpers --

using test::Tensor4;

using test::InputValue;
using test::MakeInput;

// Float64 reference rotation of a bhsd tensor (values as doubles) with the
// given frequencies; pos(b, s) gives the position.
std::vector<double> ReferenceRope(
    const std::vector<double>& x, std::int64_t batch, std::int64_t heads, std::int64_t seq,
    std::int64_t dim, std::int64_t rotary_dim, const std::vector<long double>& inv,
    RopePairing pairing, const std::function<std::int64_t(std::int64_t, std::int64_t)>& pos) {
  std::vector<double> out = x;
  const std::int64_t half = rotary_dim / 2;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t s = 0; s < seq; ++s) {
        const std::int64_t row = ((b * heads + h) * seq + s) * dim;
        for (std::int64_t j = 0; j < half; ++j) {
          const std::int64_t ia = pairing == RopePairing::kHalfSplit ? j : 2 * j;
          const std::int64_t ib = pairing == RopePairing::kHalfSplit ? j + half : 2 * j + 1;
          const long double a =
              static_cast<long double>(pos(b, s)) * inv[static_cast<std::size_t>(j)];
          const long double c = cosl(a), sn = sinl(a);
          const long double xa = x[static_cast<std::size_t>(row + ia)];
          const long double xb = x[static_cast<std::size_t>(row + ib)];
          out[static_cast<std::size_t>(row + ia)] = static_cast<double>(xa * c - xb * sn);
          out[static_cast<std::size_t>(row + ib)] = static_cast<double>(xb * c + xa * sn);
        }
      }
  return out;
}

std::vector<long double> TrueInvFreq(std::int64_t rotary_dim, double theta) {
  std::vector<long double> inv(static_cast<std::size_t>(rotary_dim / 2));
  for (std::size_t j = 0; j < inv.size(); ++j) {
    inv[j] = powl(static_cast<long double>(theta),
                  -2.0L * static_cast<long double>(j) / static_cast<long double>(rotary_dim));
  }
  return inv;
}

using test::Params;

const nlohmann::json& RopeInitCase(const std::string& name) {
  for (const auto& c : Golden("rope_init.json")["cases"]) {
    if (c["name"] == name) return c;
  }
  throw std::runtime_error("no rope_init case " + name);
}

// cos/sin table for the given ids as float32 [count, rotary_dim], flattened.
void CosSinTable(const RopeParams& p, const std::vector<std::int64_t>& ids,
                 std::vector<double>* cos, std::vector<double>* sin) {
  const std::int64_t n = static_cast<std::int64_t>(ids.size());
  const std::int64_t rd = p.EffectiveRotaryDim();
  std::vector<float> c(static_cast<std::size_t>(n * rd)), s(c.size());
  RopeCosSin(p, Positions::Ids(ids.data(), n), n,
             TensorView::Contiguous(c.data(), DType::kFloat32, {n, rd}),
             TensorView::Contiguous(s.data(), DType::kFloat32, {n, rd}));
  cos->assign(c.begin(), c.end());
  sin->assign(s.begin(), s.end());
}

// Max over elements of |a - b| / (abs_tol + rel_per_pos * |pos of row|):
// <= 1 means within the position-dependent bound.
double MaxScaledErr(const std::vector<double>& a, const std::vector<double>& b,
                    std::int64_t row_len, const std::vector<std::int64_t>& row_pos, double abs_tol,
                    double per_pos) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const std::size_t row = i / static_cast<std::size_t>(row_len);
    const double p = static_cast<double>(std::llabs(row_pos[row % row_pos.size()]));
    const double e = std::fabs(a[i] - b[i]) / (abs_tol + per_pos * p);
    if (!(e <= worst)) worst = e;
  }
  return worst;
}

// ----------------------------------------------------------------- golden --

// rope_apply.json cases whose rope_case is a default-type RoPE or GPT-J.
struct ApplyCase {
  const nlohmann::json* c;
  RopePairing pairing;
  double theta;
};

std::vector<ApplyCase> DefaultApplyCases() {
  std::vector<ApplyCase> out;
  for (const auto& c : Golden("rope_apply.json")["cases"]) {
    const std::string variant = c["variant"];
    if (variant == "gptj_rotate_every_two") {
      out.push_back({&c, RopePairing::kInterleaved, c["theta"].get<double>()});
    } else if (variant == "neox_rotate_half" || variant == "neox_partial_rotate_half" ||
               variant == "deepseek_interleave") {
      const auto& init = RopeInitCase(c["rope_case"]);
      if (init["rope_type"] != "default") continue;  // scaled: rope_scaling tests
      const RopePairing pairing =
          variant == "deepseek_interleave" ? RopePairing::kInterleaved : RopePairing::kHalfSplit;
      out.push_back(
          {&c, pairing, init["rope_parameters_standardized"]["rope_theta"].get<double>()});
    }
  }
  return out;
}

TEST(RopeGolden, ApplyCasesSelected) {
  const auto cases = DefaultApplyCases();
  // Llama-2 (rotate_half), Pythia (partial), GPT-J 6B and full-head GPT-J.
  ASSERT_EQ(cases.size(), 4u);
}

// Fixture cos/sin in HF's full-width layout ([6][rotary_dim]).
std::vector<double> FixtureTable(const ApplyCase& ac, const char* which) {
  const auto& c = *ac.c;
  if (c.contains(which)) return test::FlattenDoubles(c[which]);
  // GPT-J stores half tables; repeat_interleave(2) gives the full layout.
  std::vector<double> out;
  for (const auto& row : c[std::string(which) + "_half"]) {
    for (const auto& v : row) {
      out.push_back(v.get<double>());
      out.push_back(v.get<double>());
    }
  }
  return out;
}

void RunApplyGolden(const ApplyCase& ac, RopeNumerics numerics) {
  const auto& c = *ac.c;
  SCOPED_TRACE(c["name"].get<std::string>() +
               " numerics=" + std::string(RopeNumericsName(numerics)));
  const std::int64_t hd = c["head_dim"], rd = c["rotary_dim"], heads = c["num_heads"];
  const auto ids = c["position_ids"].get<std::vector<std::int64_t>>();
  const std::int64_t seq = static_cast<std::int64_t>(ids.size());
  const double scaling = c["attention_scaling"];
  RopeParams p = Params(hd, rd, ac.pairing, numerics, ac.theta);
  // kHF with the fixture's own frequencies where it has them: tight bounds.
  const bool tight = numerics == RopeNumerics::kHF && c.contains("inv_freq_used");
  if (tight) p.frequencies = {test::ToDoubles(c["inv_freq_used"]), scaling};

  std::vector<double> cos, sin;
  CosSinTable(p, ids, &cos, &sin);
  const double table_per_pos = tight ? 0.0 : 2e-7 * scaling;
  EXPECT_LE(MaxScaledErr(cos, FixtureTable(ac, "cos"), rd, ids, 2e-6, table_per_pos), 1.0);
  EXPECT_LE(MaxScaledErr(sin, FixtureTable(ac, "sin"), rd, ids, 2e-6, table_per_pos), 1.0);

  Tensor4 q = MakeInput(DType::kFloat32, AttentionLayout::kBHSD, 1, heads, seq, hd);
  ApplyRope(p, q.View(), AttentionLayout::kBHSD, Positions::Ids(ids.data(), seq));
  // Rows of q_embed are (head, seq) major: row r has position ids[r % seq].
  const double apply_per_pos = tight ? 0.0 : 4e-7 * scaling;
  EXPECT_LE(
      MaxScaledErr(q.Values(), test::FlattenDoubles(c["q_embed"]), hd, ids, 4e-6, apply_per_pos),
      1.0);
}

TEST(RopeGolden, ApplyHF) {
  for (const auto& ac : DefaultApplyCases()) RunApplyGolden(ac, RopeNumerics::kHF);
}

TEST(RopeGolden, ApplyAccurate) {
  for (const auto& ac : DefaultApplyCases()) RunApplyGolden(ac, RopeNumerics::kAccurate);
}

TEST(RopeGolden, InitDefaultFrequenciesAndTables) {
  int checked = 0;
  for (const auto& c : Golden("rope_init.json")["cases"]) {
    if (c["rope_type"] != "default") continue;
    SCOPED_TRACE(c["name"].get<std::string>());
    ++checked;
    const std::int64_t rd = c["rotary_dim"];
    const std::int64_t hd = c["config"]["head_dim"];
    const double theta = c["rope_parameters_standardized"]["rope_theta"];
    const auto want = test::ToDoubles(c["inv_freq"]);
    for (const RopeNumerics n : {RopeNumerics::kHF, RopeNumerics::kAccurate}) {
      const RopeFrequencies f = RopeDefaultFrequencies(rd, theta, n);
      ASSERT_EQ(f.inv_freq.size(), want.size());
      EXPECT_EQ(f.attention_factor, 1.0);
      for (std::size_t j = 0; j < want.size(); ++j) {
        EXPECT_NEAR(f.inv_freq[j], want[j], 1e-6 * want[j]) << "j=" << j;
        if (n == RopeNumerics::kHF) {
          EXPECT_EQ(f.inv_freq[j], static_cast<float>(f.inv_freq[j]));
        }
      }
    }
    EXPECT_NEAR(c["attention_factor"].get<double>(), 1.0, 1e-12);
    for (const auto& ev : c["evaluations"]) {
      const auto ids = ev["position_ids"].get<std::vector<std::int64_t>>();
      const double scaling = ev["attention_scaling"];
      std::vector<double> cos, sin;
      // HF numerics from the fixture's inv_freq_used: absolute 2e-6.
      RopeParams p = Params(hd, rd, RopePairing::kHalfSplit, RopeNumerics::kHF, theta);
      p.frequencies = {test::ToDoubles(ev["inv_freq_used"]), scaling};
      CosSinTable(p, ids, &cos, &sin);
      EXPECT_LE(test::MaxAbsDiff(cos, test::FlattenDoubles(ev["cos"])), 2e-6);
      EXPECT_LE(test::MaxAbsDiff(sin, test::FlattenDoubles(ev["sin"])), 2e-6);
      // End to end in both numerics with our own frequencies.
      for (const RopeNumerics n : {RopeNumerics::kHF, RopeNumerics::kAccurate}) {
        CosSinTable(Params(hd, rd, RopePairing::kHalfSplit, n, theta), ids, &cos, &sin);
        EXPECT_LE(MaxScaledErr(cos, test::FlattenDoubles(ev["cos"]), rd, ids, 2e-6, 2e-7 * scaling),
                  1.0);
        EXPECT_LE(MaxScaledErr(sin, test::FlattenDoubles(ev["sin"]), rd, ids, 2e-6, 2e-7 * scaling),
                  1.0);
      }
    }
  }
  EXPECT_EQ(checked, 5);  // Llama-2, Mistral, Llama-3, TinyLlama, Pythia (partial)
}

TEST(RopeGolden, HfAngleIsOneFloat32Multiply) {
  // At p = 131071 the float32 angle differs from the float64 one by up to
  // ~4e-3 in cos (tests/golden/README.md); kHF must follow the fixture there.
  const auto& ev = RopeInitCase("llama3_8b_default")["evaluations"][0];
  const auto ids = ev["position_ids"].get<std::vector<std::int64_t>>();
  ASSERT_EQ(ids.back(), 131071);
  std::vector<double> hf_cos, hf_sin, acc_cos, acc_sin;
  RopeParams p = Params(128, 0, RopePairing::kHalfSplit, RopeNumerics::kHF, 500000.0);
  p.frequencies.inv_freq = test::ToDoubles(ev["inv_freq_used"]);
  CosSinTable(p, ids, &hf_cos, &hf_sin);
  p.numerics = RopeNumerics::kAccurate;
  CosSinTable(p, ids, &acc_cos, &acc_sin);
  const auto want = test::FlattenDoubles(ev["cos"]);
  EXPECT_LE(test::MaxAbsDiff(hf_cos, want), 2e-6);
  EXPECT_GT(test::MaxAbsDiff(acc_cos, want), 1e-4);  // the two numerics really differ
}

// ------------------------------------------------------------- properties --

constexpr RopePairing kPairings[] = {RopePairing::kHalfSplit, RopePairing::kInterleaved};
constexpr RopeNumerics kNumerics[] = {RopeNumerics::kAccurate, RopeNumerics::kHF};

TEST(RopeProperties, MatchesFloat64ReferenceAndPreservesNorm) {
  const std::vector<std::int64_t> ids = {0, 1, 7, 4096, 131071, 1000003, 16777215};
  const std::int64_t seq = static_cast<std::int64_t>(ids.size()), hd = 64, heads = 2;
  for (const RopePairing pairing : kPairings) {
    for (const std::int64_t rd : {std::int64_t{64}, std::int64_t{24}}) {
      Tensor4 x = MakeInput(DType::kFloat64, AttentionLayout::kBHSD, 1, heads, seq, hd);
      const auto before = x.Values();
      ApplyRope(Params(hd, rd, pairing, RopeNumerics::kAccurate), x.View(), AttentionLayout::kBHSD,
                Positions::Ids(ids.data(), seq));
      const auto after = x.Values();
      const auto ref = ReferenceRope(before, 1, heads, seq, hd, rd, TrueInvFreq(rd, 1e4), pairing,
                                     [&](std::int64_t, std::int64_t s) { return ids[s]; });
      EXPECT_LE(test::MaxAbsDiff(after, ref), 1e-8);
      for (std::int64_t r = 0; r < heads * seq; ++r) {
        double n0 = 0, n1 = 0;
        for (std::int64_t d = 0; d < hd; ++d) {
          n0 += before[r * hd + d] * before[r * hd + d];
          n1 += after[r * hd + d] * after[r * hd + d];
        }
        EXPECT_NEAR(std::sqrt(n1), std::sqrt(n0), 1e-12 * std::sqrt(n0));
      }
    }
  }
}

// <R_m q, R_n k> = sum_j (qa ka + qb kb) cos((n-m) w_j) + (qb ka - qa kb) sin((n-m) w_j).
TEST(RopeProperties, DotProductDependsOnlyOnRelativePosition) {
  const std::int64_t hd = 64;
  const auto inv = TrueInvFreq(hd, 1e4);
  const std::int64_t big = kMaxPosition;
  // (m, n) pairs, shifted so that the larger one reaches 2^24 - 1.
  const std::vector<std::pair<std::int64_t, std::int64_t>> pairs = {
      {0, 0}, {3, 0}, {0, 3}, {100, 37}, {4096, 1}, {5, 70000}};
  for (const DType dt : {DType::kFloat64, DType::kFloat32}) {
    // Each rotated element is within (Eps + 2^-29 angle error) of exact, so
    // the dot is within 2 * that * |q| |k| (Cauchy-Schwarz).
    for (const auto& [m0, n0] : pairs) {
      for (const std::int64_t shift :
           {std::int64_t{0}, std::int64_t{12345}, big - std::max(m0, n0)}) {
        const std::int64_t m = m0 + shift, n = n0 + shift;
        Tensor4 q = MakeInput(dt, AttentionLayout::kBHSD, 1, 1, 1, hd);
        Tensor4 k = MakeInput(dt, AttentionLayout::kBHSD, 1, 1, 1, hd);
        for (std::int64_t d = 0; d < hd; ++d) k.Set(d, std::cos(0.9 * d + 0.3));
        const auto q0 = q.Values(), k0 = k.Values();
        const RopeParams p = Params(hd, 0, RopePairing::kHalfSplit, RopeNumerics::kAccurate);
        ApplyRope(p, q.View(), AttentionLayout::kBHSD, Positions::Offset(m));
        ApplyRope(p, k.View(), AttentionLayout::kBHSD, Positions::Offset(n));
        double dot = 0, want = 0, qn = 0, kn = 0;
        for (std::int64_t d = 0; d < hd; ++d) {
          dot += q.Get(d) * k.Get(d);
          qn += q0[d] * q0[d];
          kn += k0[d] * k0[d];
        }
        const double tol = (3 * test::Eps(dt) + 5e-9) * std::sqrt(qn * kn);
        for (std::int64_t j = 0; j < hd / 2; ++j) {
          const double a = static_cast<double>((n - m) * 1.0L * inv[static_cast<std::size_t>(j)]);
          const double qa = q0[j], qb = q0[j + hd / 2], ka = k0[j], kb = k0[j + hd / 2];
          want += (qa * ka + qb * kb) * std::cos(a) + (qb * ka - qa * kb) * std::sin(a);
        }
        EXPECT_NEAR(dot, want, tol) << "m=" << m << " n=" << n << " dtype=" << DTypeName(dt);
      }
    }
  }
}

TEST(RopeProperties, InverseUndoesForward) {
  for (const RopePairing pairing : kPairings)
    for (const RopeNumerics numerics : kNumerics)
      for (const DType dt : {DType::kFloat64, DType::kFloat32}) {
        Tensor4 x = MakeInput(dt, AttentionLayout::kBSHD, 2, 3, 5, 32);
        const auto before = x.Values();
        const RopeParams p = Params(32, 16, pairing, numerics);
        const Positions pos = Positions::Offset(kMaxPosition - 4);
        ApplyRope(p, x.View(), AttentionLayout::kBSHD, pos, RopeDirection::kForward);
        ApplyRope(p, x.View(), AttentionLayout::kBSHD, pos, RopeDirection::kInverse);
        // kHF's cos/sin are float32 values, so cos^2 + sin^2 = 1 only to float32.
        const double tol = dt == DType::kFloat64 && numerics == RopeNumerics::kAccurate
                               ? 1e-14
                               : 4 * test::Eps(DType::kFloat32);
        EXPECT_LE(test::MaxAbsDiff(x.Values(), before), tol) << DTypeName(dt);
      }
}

TEST(RopeProperties, InverseWithNegativePositionIsForward) {
  const std::vector<std::int64_t> neg = {-3, -4096, -kMaxPosition}, posv = {3, 4096, kMaxPosition};
  Tensor4 a = MakeInput(DType::kFloat32, AttentionLayout::kBHSD, 1, 2, 3, 16);
  Tensor4 b = a;
  const RopeParams p = Params(16, 0, RopePairing::kHalfSplit, RopeNumerics::kAccurate);
  ApplyRope(p, a.View(), AttentionLayout::kBHSD, Positions::Ids(neg.data(), 3),
            RopeDirection::kInverse);
  ApplyRope(p, b.View(), AttentionLayout::kBHSD, Positions::Ids(posv.data(), 3));
  EXPECT_EQ(a.Values(), b.Values());
}

// Interleaved pair (2j, 2j+1) is half-split pair (j, j + d/2) after the
// permutation P: dim 2j -> j, 2j+1 -> j + d/2 (tail dims fixed).
TEST(RopeProperties, PairingsArePermutationsOfEachOther) {
  const std::int64_t hd = 40, rd = 32, half = rd / 2, seq = 4, heads = 2;
  auto perm = [&](std::int64_t d) { return d >= rd ? d : (d % 2 == 0 ? d / 2 : d / 2 + half); };
  const std::vector<std::int64_t> ids = {0, 9, 4097, 2000000};
  for (const RopeNumerics numerics : kNumerics)
    for (const DType dt : {DType::kFloat32, DType::kBFloat16}) {
      Tensor4 x = MakeInput(dt, AttentionLayout::kBHSD, 1, heads, seq, hd);
      Tensor4 px = x;
      for (std::int64_t r = 0; r < heads * seq; ++r)
        for (std::int64_t d = 0; d < hd; ++d) px.Set(r * hd + perm(d), x.Get(r * hd + d));
      const Positions pos = Positions::Ids(ids.data(), seq);
      ApplyRope(Params(hd, rd, RopePairing::kInterleaved, numerics), x.View(),
                AttentionLayout::kBHSD, pos);
      ApplyRope(Params(hd, rd, RopePairing::kHalfSplit, numerics), px.View(),
                AttentionLayout::kBHSD, pos);
      for (std::int64_t r = 0; r < heads * seq; ++r)
        for (std::int64_t d = 0; d < hd; ++d)
          ASSERT_EQ(x.Get(r * hd + d), px.Get(r * hd + perm(d))) << "r=" << r << " d=" << d;
    }
}

TEST(RopeProperties, AccurateCosSinNear2Pow24) {
  const std::int64_t rd = 128;
  const std::vector<std::int64_t> ids = {kMaxPosition, kMaxPosition - 1, kMaxPosition - 977,
                                         (std::int64_t{1} << 23) + 1};
  for (const double theta : {1e4, 5e5}) {
    const auto inv = TrueInvFreq(rd, theta);
    for (const DType dt : {DType::kFloat32, DType::kFloat64}) {
      const std::int64_t n = static_cast<std::int64_t>(ids.size());
      std::vector<double> c(static_cast<std::size_t>(n * rd)), s(c.size());
      RopeCosSin(Params(rd, 0, RopePairing::kInterleaved, RopeNumerics::kAccurate, theta),
                 Positions::Ids(ids.data(), n), n, TensorView::Contiguous(c.data(), dt, {n, rd}),
                 TensorView::Contiguous(s.data(), dt, {n, rd}));
      double worst = 0;
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t col = 0; col < rd; ++col) {
          const long double a =
              static_cast<long double>(ids[r]) * inv[static_cast<std::size_t>(col / 2)];
          const double got_c = LoadAsDouble(c.data(), dt, r * rd + col);
          const double got_s = LoadAsDouble(s.data(), dt, r * rd + col);
          worst = std::max({worst, std::fabs(got_c - static_cast<double>(cosl(a))),
                            std::fabs(got_s - static_cast<double>(sinl(a)))});
        }
      EXPECT_LE(worst, dt == DType::kFloat32 ? 1e-6 : 1e-8) << "theta=" << theta;
    }
  }
}

TEST(RopeProperties, LayoutsAgree) {
  const std::int64_t b = 2, h = 3, s = 5, d = 16;
  for (const RopeNumerics numerics : kNumerics) {
    Tensor4 x1 = MakeInput(DType::kFloat32, AttentionLayout::kBHSD, b, h, s, d);
    Tensor4 x2 = MakeInput(DType::kFloat32, AttentionLayout::kBSHD, b, h, s, d);
    const RopeParams p = Params(d, 0, RopePairing::kHalfSplit, numerics);
    ApplyRope(p, x1.View(), AttentionLayout::kBHSD, Positions::Offset(77));
    ApplyRope(p, x2.View(), AttentionLayout::kBSHD, Positions::Offset(77));
    for (std::int64_t bi = 0; bi < b; ++bi)
      for (std::int64_t hi = 0; hi < h; ++hi)
        for (std::int64_t si = 0; si < s; ++si)
          for (std::int64_t di = 0; di < d; ++di)
            ASSERT_EQ(x1.Get(x1.Index(bi, hi, si, di)), x2.Get(x2.Index(bi, si, hi, di)));
  }
}

TEST(RopeProperties, InPlaceEqualsOutOfPlaceAndTailIsUntouched) {
  const std::int64_t hd = 48, rd = 16;
  for (const RopePairing pairing : kPairings)
    for (const RopeNumerics numerics : kNumerics) {
      Tensor4 x = MakeInput(DType::kFloat16, AttentionLayout::kBSHD, 1, 2, 3, hd);
      const Tensor4 orig = x;
      Tensor4 out(DType::kFloat16, 1, 3, 2, hd);
      const TensorView ov = out.View();
      const RopeParams p = Params(hd, rd, pairing, numerics);
      ApplyRope(p, x.View(), AttentionLayout::kBSHD, Positions::Offset(5), RopeDirection::kForward,
                &ov);
      EXPECT_EQ(x.bytes, orig.bytes);  // input untouched out of place
      ApplyRope(p, x.View(), AttentionLayout::kBSHD, Positions::Offset(5));
      EXPECT_EQ(x.bytes, out.bytes);
      for (std::int64_t r = 0; r < 6; ++r)
        for (std::int64_t d = rd; d < hd; ++d) ASSERT_EQ(out.Get(r * hd + d), orig.Get(r * hd + d));
      bool changed = false;
      for (std::int64_t d = 0; d < rd; ++d) changed |= out.Get(5 * hd + d) != orig.Get(5 * hd + d);
      EXPECT_TRUE(changed);
    }
}

TEST(RopeProperties, PositionIdsEqualOffsetAndPerRowIds) {
  const std::int64_t b = 2, h = 2, s = 20, d = 8;  // s > 16: two token tiles
  const RopeParams p = Params(d, 0, RopePairing::kInterleaved, RopeNumerics::kHF);
  Tensor4 a = MakeInput(DType::kFloat32, AttentionLayout::kBHSD, b, h, s, d);
  Tensor4 c = a, e = a;
  std::vector<std::int64_t> shared(static_cast<std::size_t>(s)),
      per_row(static_cast<std::size_t>(b * s));
  for (std::int64_t i = 0; i < s; ++i) shared[i] = 300 + i;
  for (std::int64_t i = 0; i < b * s; ++i) per_row[i] = 300 + i % s;
  ApplyRope(p, a.View(), AttentionLayout::kBHSD, Positions::Offset(300));
  ApplyRope(p, c.View(), AttentionLayout::kBHSD, Positions::Ids(shared.data(), s));
  ApplyRope(p, e.View(), AttentionLayout::kBHSD, Positions::Ids(per_row.data(), b * s));
  EXPECT_EQ(a.bytes, c.bytes);
  EXPECT_EQ(a.bytes, e.bytes);
  // Per-row ids really are per row: row 1 at offset 0 differs from row 0.
  for (std::int64_t i = s; i < b * s; ++i) per_row[i] = i - s;
  Tensor4 f = MakeInput(DType::kFloat32, AttentionLayout::kBHSD, b, h, s, d);
  Tensor4 g = f;
  ApplyRope(p, f.View(), AttentionLayout::kBHSD, Positions::Ids(per_row.data(), b * s));
  ApplyRope(p, g.View(), AttentionLayout::kBHSD, Positions::Offset(0));
  const std::int64_t row1 = h * s * d;
  EXPECT_TRUE(
      std::equal(f.bytes.begin() + row1 * 4, f.bytes.end() - 8, g.bytes.begin() + row1 * 4));
  EXPECT_FALSE(std::equal(f.bytes.begin(), f.bytes.begin() + row1 * 4, g.bytes.begin()));
}

TEST(RopeProperties, SixteenBitWithinDtypeToleranceOfFloat64) {
  const std::vector<std::int64_t> ids = {0, 1, 2, 5, 100, 1000, 4096};
  const std::int64_t s = static_cast<std::int64_t>(ids.size()), h = 2, d = 64;
  for (const DType dt : {DType::kBFloat16, DType::kFloat16})
    for (const RopeNumerics numerics : kNumerics)
      for (const RopePairing pairing : kPairings) {
        Tensor4 x = MakeInput(dt, AttentionLayout::kBHSD, 1, h, s, d);
        const auto ref = ReferenceRope(x.Values(), 1, h, s, d, d, TrueInvFreq(d, 1e4), pairing,
                                       [&](std::int64_t, std::int64_t si) { return ids[si]; });
        ApplyRope(Params(d, 0, pairing, numerics), x.View(), AttentionLayout::kBHSD,
                  Positions::Ids(ids.data(), s));
        // accurate: one rounding (|x| <= 1.42); hf: cos, sin, 2 products, sum.
        const double tol = (numerics == RopeNumerics::kAccurate ? 1.5 : 6.0) * test::Eps(dt) * 1.42;
        EXPECT_LE(test::MaxAbsDiff(x.Values(), ref), tol)
            << DTypeName(dt) << " " << RopeNumericsName(numerics);
      }
}

TEST(RopeProperties, ThreadsGiveIdenticalResults) {
  for (const std::int64_t seq : {std::int64_t{1}, std::int64_t{70}}) {
    Tensor4 a = MakeInput(DType::kFloat32, AttentionLayout::kBSHD, 2, 6, seq, 32);
    Tensor4 b = a;
    const RopeParams p = Params(32, 0, RopePairing::kHalfSplit, RopeNumerics::kAccurate);
    ApplyRope(p, a.View(), AttentionLayout::kBSHD, Positions::Offset(9), RopeDirection::kForward,
              nullptr, Context(1));
    ApplyRope(p, b.View(), AttentionLayout::kBSHD, Positions::Offset(9), RopeDirection::kForward,
              nullptr, Context(4));
    EXPECT_EQ(a.bytes, b.bytes) << "seq=" << seq;
  }
}

TEST(RopeProperties, QKInOnePassEqualsSeparateCalls) {
  // GQA: 4 query heads, 2 kv heads; q bfloat16, k float32.
  const std::int64_t b = 2, s = 18, d = 32;
  const std::vector<std::int64_t> ids = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3};
  const Positions pos = Positions::Ids(ids.data(), s);
  for (const AttentionLayout layout : {AttentionLayout::kBSHD, AttentionLayout::kBHSD}) {
    Tensor4 q = MakeInput(DType::kBFloat16, layout, b, 4, s, d);
    Tensor4 k = MakeInput(DType::kFloat32, layout, b, 2, s, d);
    Tensor4 q2 = q, k2 = k, q3 = q, k3 = k;
    Tensor4 qo = q, ko = k;
    const RopeParams p = Params(d, 0, RopePairing::kHalfSplit, RopeNumerics::kHF);
    ApplyRopeQK(p, q.View(), k.View(), layout, pos, RopeDirection::kForward, Context(3));
    ApplyRope(p, q2.View(), layout, pos);
    ApplyRope(p, k2.View(), layout, pos);
    EXPECT_EQ(q.bytes, q2.bytes);
    EXPECT_EQ(k.bytes, k2.bytes);
    const TensorView qov = qo.View(), kov = ko.View();
    ApplyRopeQK(p, q3.View(), k3.View(), layout, pos, RopeDirection::kForward, &qov, &kov);
    EXPECT_EQ(qo.bytes, q.bytes);
    EXPECT_EQ(ko.bytes, k.bytes);
  }
}

TEST(RopeProperties, StridedViewOfFusedBuffer) {
  // q is the first of three slots of a fused [b, s, 3, h, d] buffer.
  const std::int64_t b = 1, s = 4, h = 2, d = 8;
  Tensor4 plain = MakeInput(DType::kFloat32, AttentionLayout::kBSHD, b, h, s, d);
  std::vector<float> fused(static_cast<std::size_t>(b * s * 3 * h * d), -7.0f);
  for (std::int64_t si = 0; si < s; ++si)
    for (std::int64_t i = 0; i < h * d; ++i)
      fused[static_cast<std::size_t>(si * 3 * h * d + i)] =
          static_cast<float>(plain.Get(si * h * d + i));
  const TensorView qv = TensorView::Strided(fused.data(), DType::kFloat32, {b, s, h, d},
                                            {s * 3 * h * d, 3 * h * d, d, 1});
  const RopeParams p = Params(d, 0, RopePairing::kInterleaved, RopeNumerics::kAccurate);
  ApplyRope(p, qv, AttentionLayout::kBSHD, Positions::Offset(11));
  ApplyRope(p, plain.View(), AttentionLayout::kBSHD, Positions::Offset(11));
  for (std::int64_t si = 0; si < s; ++si)
    for (std::int64_t i = 0; i < 3 * h * d; ++i) {
      const float got = fused[static_cast<std::size_t>(si * 3 * h * d + i)];
      if (i < h * d)
        ASSERT_EQ(got, static_cast<float>(plain.Get(si * h * d + i)));
      else
        ASSERT_EQ(got, -7.0f);  // k and v slots untouched
    }
}

TEST(RopeProperties, ResolveAndNames) {
  RopeParams p = Params(8, 0, RopePairing::kHalfSplit, RopeNumerics::kHF);
  p.frequencies = {{0.1, 0.2, 0.3, 1.0 / 3.0}, 1.25};
  const RopeFrequencies f = ResolveRopeFrequencies(p);
  EXPECT_EQ(f.inv_freq[3],
            static_cast<double>(static_cast<float>(1.0 / 3.0)));  // float32 under kHF
  EXPECT_EQ(f.attention_factor, 1.25);
  p.frequencies.inv_freq.clear();
  EXPECT_EQ(ResolveRopeFrequencies(p).inv_freq,
            RopeDefaultFrequencies(8, 1e4, RopeNumerics::kHF).inv_freq);
  EXPECT_EQ(ResolveRopeFrequencies(p).attention_factor, 1.25);
  for (const RopePairing x : kPairings) EXPECT_EQ(ParseRopePairing(RopePairingName(x)), x);
  for (const RopeNumerics x : kNumerics) EXPECT_EQ(ParseRopeNumerics(RopeNumericsName(x)), x);
  for (const RopeDirection x : {RopeDirection::kForward, RopeDirection::kInverse})
    EXPECT_EQ(ParseRopeDirection(RopeDirectionName(x)), x);
}

TEST(RopeProperties, AttentionFactorScalesTable) {
  RopeParams p = Params(4, 0, RopePairing::kHalfSplit, RopeNumerics::kAccurate);
  p.frequencies.attention_factor = 1.5;
  std::vector<double> c, s;
  CosSinTable(p, {0, 2}, &c, &s);
  EXPECT_EQ(c[0], 1.5);
  EXPECT_EQ(s[0], 0.0);
  EXPECT_EQ(c[4], static_cast<float>(std::cos(2.0) * 1.5));         // column 0: frequency 1
  EXPECT_EQ(c[6], c[4]);                                            // column 2: the same frequency
  EXPECT_EQ(s[7], static_cast<float>(std::sin(2.0 * 0.01) * 1.5));  // column 3: 10000^-0.5
}

}  // namespace
}  // namespace posenc
