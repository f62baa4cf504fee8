// posenc/fire.h: FIRE, Functional Interpolation for Relative Positions.
//
// Li, Zhang, Dong, Gu, Choromanski, Chen, Zhai, Xue, Kumar, Guo 2024,
// "Functional Interpolation for Relative Positions Improves Long Context
// Transformers" (ICLR 2024), https://arxiv.org/abs/2310.04418, eq. (4)-(6):
// a learned bias for key j of query i (positions p >= r, causal):
//   psi(d)  = log(|c d| + 1)
//   x(p, r) = psi(p - r) / (psi(max(p, |L|)) + eps)       (eps = 1e-6)
//   b_h(p, r) = w2[h] . relu(w1 x + b1) + b2[h]
// f_theta = Linear(1, hidden) -> ReLU -> Linear(hidden, H) is shared by the
// layers' heads (one output per head); c (init 0.1) and the threshold L
// (init 512) are learned scalars. "Progressive interpolation": queries up to
// |L| see distances normalised by the constant psi(|L|); past it by
// psi(p), so x stays in [0, 1] however long the context. Conventions follow
// the paper's reference code (appendix): positions are 0-based, |L| is the
// absolute value of the learned threshold (the paper's module learns it as a
// multiplier of its initial value: pass threshold = multiplier * 512), and
// gradients follow torch (relu'(0) = abs'(0) = 0, torch.maximum splits a
// tie). posenc.torch.FIRE is that module.
//
// In attention, FIRE is the registered scheme "fire" (posenc/scheme.h):
// tensor arguments w1 [hidden], b1 [hidden], w2 [H, hidden], b2 [H], c [1]
// and threshold [1], all trainable (AttentionGrads::scheme by these names),
// in the reference attention, the fused forward (per tile, no [S, S] array;
// one evaluation per distance of a tile while the tile's queries are below
// |L|) and the fused backward. Causal masks only (InvalidArgument "mask"
// otherwise). Numerics: the reference in float64; the fused kernels
// evaluate f_theta in float32 (relative error ~1e-6 of the bias) and sum the
// parameter gradients in float64. b2's gradient is exactly 0 in both (b2
// shifts every logit of a head's row alike; softmax ignores the shift), so
// it is returned as 0, not as the rounding noise of a sum of dS that adds
// to 0. Positions [0, 2^24).
#pragma once

#include <cstdint>
#include <vector>

#include "posenc/attention.h"
#include "posenc/tensor.h"

namespace posenc {

inline constexpr std::int64_t kMaxFireHidden = 4096;

// Views of the six tensors (any float dtype; c and threshold of shape [1]).
struct FireTensors {
  TensorView w1, b1, w2, b2, c, threshold;
};

struct FireParams {
  double eps = 1e-6;  // finite, > 0
};

// Owned float64 weights (tests, the report, examples) and their views.
struct FireWeights {
  std::vector<double> w1, b1, w2, b2;  // [hidden], [hidden], [H, hidden], [H]
  double c = 0.1;
  double threshold = 512.0;
  FireTensors View();
};

// The paper's initialisation: torch.nn.Linear's default uniform weights
// and biases (U(-1/sqrt(fan_in), 1/sqrt(fan_in))) from a deterministic
// mt19937_64 stream, c = 0.1, L = 512. heads, hidden in [1, 4096].
FireWeights FireInit(std::int64_t heads, std::int64_t hidden, std::uint64_t seed);

// The attention scheme (PositionScheme::Registered("fire", ...)); the views
// are read when an attention call resolves it, and must outlive that call.
PositionScheme FireScheme(const FireTensors& tensors, const FireParams& params = {});

// b_h(p, r) as a matrix (tests, pictures): out [heads, query_len, key_len]
// (any float dtype), query i at query_offset + i, key j at j; every pair is
// evaluated, including r > p. Validates like the attention scheme.
void FireBiasMatrix(const FireTensors& tensors, const FireParams& params, std::int64_t heads,
                    std::int64_t query_offset, std::int64_t query_len, std::int64_t key_len,
                    const TensorView& out);

}  // namespace posenc
