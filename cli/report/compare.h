// The comparison table the lesson leaves empty, filled with measured values
// per method (cli/report/properties.h describes each measurement). One
// Measure* function per method family, called by the report and by
// tests/unit/report_properties_test.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "properties.h"

namespace posenc::report {

struct CompareSetup {
  std::int64_t length = 256;       // L of bounded / unique checks (bounded also at 4L)
  std::int64_t shift_length = 24;  // i, j < this in the shift check
  int timing_repeats = 2;
  int threads = 1;
  std::int64_t cost_seq = 512;  // S of MeasureCost (at most shape.seq)
  ModelShape shape;
};

struct MethodMeasure {
  std::string method;
  std::string enters;                    // where position enters: input, q/k, scores
  std::int64_t extra_params = 0;         // for shape.layers layers of shape.hidden
  double max_abs_at_l = 0.0;             // max |positional term| for positions/distances < L
  double max_abs_at_4l = 0.0;            // ... < 4L (learned: the whole table)
  std::int64_t length = 0;               // L of these cells when not the setup's (learned: rows)
  bool bounded = false;                  // max_abs_at_4l <= max_abs_at_l * (1 + 1e-9)
  double min_code_distance = -1.0;       // absolute methods; -1 for relative ones
  std::int64_t distinct_distances = -1;  // relative methods; -1 for absolute ones
  double shift_change = 0.0;             // relative score change under a common shift
  PastEnd past_end = PastEnd::kContinues;
  std::string past_end_detail;   // what the API said / did
  double attention_bytes = 0.0;  // extra memory in attention at S = shape.seq
  std::string memory_note;
  std::string used_in;
  std::string params_note;  // how the count is made up ("" for none)
};

// The common shifts t of the relative check, and the largest.
inline const std::vector<std::int64_t> kCompareShifts = {1, 7, 100};
inline constexpr std::int64_t kCompareMaxShift = 100;

MethodMeasure MeasureSinusoidal(const CompareSetup& setup);
MethodMeasure MeasureLearned(const CompareSetup& setup);
MethodMeasure MeasureRope(const CompareSetup& setup);
MethodMeasure MeasureAlibi(const CompareSetup& setup);
// compare_relative.cc: the score-side relative methods.
MethodMeasure MeasureT5(const CompareSetup& setup);
MethodMeasure MeasureShaw(const CompareSetup& setup);
MethodMeasure MeasureTransformerXL(const CompareSetup& setup);
MethodMeasure MeasureDeberta(const CompareSetup& setup);
// compare_fire.cc
MethodMeasure MeasureFire(const CompareSetup& setup);

// compare_cost.cc: every method's cost on one shape, in one unit -- one
// attention layer's forward, q, k, v [1, seq, heads, head_dim] float32,
// causal, with the method's positional work, in ns per token.
struct CostShape {
  std::int64_t seq = 512, heads = 12, head_dim = 64;
};
CostShape CostShapeFor(const CompareSetup& setup);  // S = min(shape.seq, cost_seq), its heads
struct MethodCost {
  double ns_per_token = 0.0;       // the layer with the method
  double none_ns_per_token = 0.0;  // the same kernel without a positional term, alternating
  std::string kernel;              // what ran: fused kernel, table add + fused, reference
};
// `method`: a MethodMeasure::method of the table ("sinusoidal", "RoPE", ...).
MethodCost MeasureCost(const std::string& method, const CompareSetup& setup);

}  // namespace posenc::report
