// Comparison-table measurement of FIRE (posenc/fire.h): the learned bias
// at the paper's initialisation (FireInit: torch.nn.Linear defaults, c =
// 0.1, L = 512), evaluated by FireBiasMatrix. The measured properties are
// those of the mechanism: x = psi(d) / psi(max(p, |L|)) lies in [0, 1] for
// every visible pair, so the bias is bounded whatever the length; below |L|
// it is a function of the distance only (relative); past |L| the distances
// of a longer context are mapped back into [0, 1] (interpolation).
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "compare.h"
#include "posenc/fire.h"

namespace posenc::report {
namespace {

constexpr std::int64_t kHidden = 32;  // the paper's f_theta width

// b_0(p, r) for queries 0..n-1 and keys 0..n-1 (one head).
std::vector<double> BiasRows(FireWeights& w, std::int64_t n) {
  std::vector<double> out(static_cast<std::size_t>(n * n));
  FireBiasMatrix(w.View(), {}, 1, 0, n, n,
                 TensorView::Contiguous(out.data(), DType::kFloat64, {1, n, n}));
  return out;
}

// b_0(p, r) for one query at p and keys 0..p.
std::vector<double> BiasRow(FireWeights& w, std::int64_t p) {
  std::vector<double> out(static_cast<std::size_t>(p + 1));
  FireBiasMatrix(w.View(), {}, 1, p, 1, p + 1,
                 TensorView::Contiguous(out.data(), DType::kFloat64, {1, 1, p + 1}));
  return out;
}

// sup over x in [0, 1] of |f_0(x)| (grid of 4097 points): the bound every
// visible pair obeys, since x = psi(p - r) / psi(max(p, |L|)) is in [0, 1].
double BoundOverX(const FireWeights& w) {
  double mx = 0.0;
  for (int g = 0; g <= 4096; ++g) {
    const double x = g / 4096.0;
    double b = w.b2[0];
    for (std::size_t u = 0; u < w.w1.size(); ++u)
      b += w.w2[u] * std::max(0.0, w.w1[u] * x + w.b1[u]);
    mx = std::max(mx, std::abs(b));
  }
  return mx;
}

// max |b_0(p, r)| over visible pairs r <= p < n.
double MaxVisible(const std::vector<double>& rows, std::int64_t n) {
  double mx = 0.0;
  for (std::int64_t p = 0; p < n; ++p)
    for (std::int64_t r = 0; r <= p; ++r)
      mx = std::max(mx, std::abs(rows[static_cast<std::size_t>(p * n + r)]));
  return mx;
}

// The farthest key's bias for a query at 2^24 - 1 (key 0): one pair.
double FarthestAtMax(FireWeights& w) {
  double out = 0.0;
  FireBiasMatrix(w.View(), {}, 1, kMaxPosition, 1, 1,
                 TensorView::Contiguous(&out, DType::kFloat64, {1, 1, 1}));
  return out;
}

}  // namespace

MethodMeasure MeasureFire(const CompareSetup& s) {
  MethodMeasure m;
  m.method = "FIRE";
  m.enters = "scores (a learned function of the normalised distance psi(i - j) / psi(max(i, L)))";
  FireWeights all = FireInit(s.shape.heads, kHidden, 1);
  m.extra_params = ((2 + s.shape.heads) * kHidden + s.shape.heads + 2) * s.shape.layers;
  m.params_note = fmt::format("f: Linear(1, {0}) + Linear({0}, {1}), c and L, per layer", kHidden,
                              s.shape.heads);
  // Head 0 alone (the measures are per head; the bias of every head is bounded alike).
  FireWeights w = all;
  w.w2.resize(static_cast<std::size_t>(kHidden));
  w.b2.resize(1);
  const std::vector<double> at_4l = BiasRows(w, 4 * s.length);
  m.max_abs_at_l = 0.0;
  for (std::int64_t p = 0; p < s.length; ++p)
    for (std::int64_t r = 0; r <= p; ++r)
      m.max_abs_at_l =
          std::max(m.max_abs_at_l, std::abs(at_4l[static_cast<std::size_t>(p * 4 * s.length + r)]));
  m.max_abs_at_4l = MaxVisible(at_4l, 4 * s.length);
  // Bounded by construction: every visible pair, at any length, stays within
  // the bound of f over x in [0, 1] (checked on the pairs measured here).
  const double bound = BoundOverX(w);
  m.bounded = m.max_abs_at_4l <= bound * (1.0 + 1e-12);
  const std::int64_t n = std::max(s.length, s.shift_length + kCompareMaxShift);
  const std::vector<double> rows = BiasRows(w, n);
  auto bias = [&](std::int64_t p, std::int64_t r) {
    return rows[static_cast<std::size_t>(p * n + r)];
  };
  // Distances seen by the last query below L (the bias of key distance k).
  m.distinct_distances = DistinctValues(
      [&](std::int64_t k) { return bias(s.length - 1, s.length - 1 - std::abs(k)); }, s.length);
  m.shift_change =
      ShiftChange([&](std::int64_t i, std::int64_t j) { return j <= i ? bias(i, j) : bias(j, i); },
                  s.shift_length, kCompareShifts);
  m.past_end = PastEnd::kInterpolates;
  m.past_end_detail = fmt::format(
      "past |L| = {:g} the distances of a query at p are rescaled by psi(p), so x stays in [0, 1] "
      "(|bias| <= {:.4f}, the bound of f on [0, 1]): the farthest key's bias is {:.4f} at p = "
      "511, {:.4f} at p = 2047, {:.4f} at p = 2^24 - 1",
      w.threshold, bound, BiasRow(w, 511)[0], BiasRow(w, 2047)[0], FarthestAtMax(w));
  m.attention_bytes = 0.0;
  m.memory_note = fmt::format(
      "posenc's fused kernel computes the bias per tile (the paper's code materialises [1, {}, {}, "
      "{}] float32 per layer: {})",
      s.shape.heads, s.shape.seq, s.shape.seq, Bytes(static_cast<double>(DenseBiasBytes(s.shape))));
  m.used_in = "Li et al. 2024 (FIRE); posenc's extrapolation experiment";
  return m;
}

}  // namespace posenc::report
