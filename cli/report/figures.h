// Computations behind the report's sections on learned tables, attention
// maps and RoPE numerics, as plain functions the unit tests call
// (tests/unit/report_properties_test.cc). Public API only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "posenc/attention.h"
#include "posenc/dtype.h"
#include "posenc/learned.h"
#include "posenc/rope.h"

namespace posenc::report {

// Positions 1 .. max_position spaced evenly in log2 with `per_octave` samples
// per octave, rounded to integers, strictly increasing, first 1 and last
// max_position. max_position in [1, kMaxPosition], per_octave in [1, 1024]
// (InvalidArgument otherwise).
std::vector<std::int64_t> LogSpacedPositions(std::int64_t max_position, int per_octave);

// For each position p: max over the cos and sin columns of |RopeCosSin value -
// truth|, the table computed by posenc::RopeCosSin with `numerics` and stored
// as `storage`, truth = cos/sin(p * theta^(-2j/head_dim)) in long double.
// head_dim even in [2, 1024]; positions in [0, kMaxPosition].
std::vector<double> RopeCosSinError(RopeNumerics numerics, DType storage, std::int64_t head_dim,
                                    const std::vector<std::int64_t>& positions);

// Euclidean norm of every row of the table.
std::vector<double> LearnedRowNorms(const LearnedTable& table);

// The InvalidArgument message LearnedTable::Lookup gives for the position
// one past the table's end ("" if, against its contract, it succeeds).
std::string LearnedPastEndMessage(const LearnedTable& table);

// One attention map: deterministic random q, k, v (N(0, 1), one head,
// float64) of `tokens` tokens and head dim `dim`, run through
// posenc::AttentionReference with the scheme; returns the probabilities
// [tokens, tokens] row-major. Scheme tables (T5, Shaw, Transformer-XL,
// DeBERTa) are random with the same seed.
struct AttentionMapSetup {
  std::int64_t tokens = 32;  // in [2, 512]
  std::int64_t dim = 32;     // even, in [2, 256]
  AttentionMask mask = AttentionMask::kCausal;
  std::uint64_t seed = 2017;
  double alibi_slope = 0.5;  // head 1 of 8 in the reference slopes
  std::int64_t shaw_clip = 4;
};
// The panels, in the order drawn (9: a 3 x 3 grid). kSinusoidal and
// kLearned add their code to q_i and k_i (the identity projection of
// x + PE); kLearned's table is at its initialisation (N(0, 0.02^2), BERT's
// and GPT-2's), i.e. before any training.
enum class AttentionPanel {
  kNone,
  kSinusoidal,
  kLearned,
  kRope,
  kAlibi,
  kT5,
  kShaw,
  kTransformerXL,
  kDeBERTa
};
std::string AttentionPanelName(
    AttentionPanel panel);  // "none", "sinusoidal", "learned", "rope", ...
const std::vector<AttentionPanel>& AttentionPanels();
std::vector<double> AttentionMap(AttentionPanel panel, const AttentionMapSetup& setup);

}  // namespace posenc::report
