// The section builders of `posenc report`. Each computes its figures from
// the public API only (include/posenc/) and returns a Section; sizes depend
// on ReportDetail so that --quick stays within a few seconds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "experiment.h"
#include "model.h"

namespace posenc::report {

enum class ReportDetail : std::uint8_t {
  kFull,   // the report (up to about a minute)
  kQuick,  // smaller figures for tests (a few seconds)
};
std::string_view ReportDetailName(ReportDetail d);  // "full", "quick"

struct ReportOptions {
  ReportDetail detail = ReportDetail::kFull;
  std::vector<std::string> configs;  // HF config.json files (--config)
  int threads = 1;                   // posenc::Context threads
  // `posenc experiment extrapolation` results (--experiment DIR); null: none.
  std::shared_ptr<const ExperimentResults> experiment;
  // True when `experiment` is the committed run (DefaultExperimentDir, no
  // --experiment given).
  bool experiment_is_default = false;
};

// Shaw's clipping distance k, one value for the whole report (section 6's
// figure, the comparison table).
inline constexpr std::int64_t kShawClip = 4;

// Sizes used by the builders.
struct ReportSizes {
  std::int64_t heatmap_positions;  // rows of position heatmaps
  std::int64_t similarity;         // PE(i).PE(j) matrix side
  std::int64_t rope_distance;      // q.k decay: distances [0, N)
  std::int64_t unique_positions;   // L of the uniqueness / boundedness checks
  std::int64_t shift_length;       // L of the shift check
  std::int64_t numerics_samples;   // positions sampled per octave (numerics)
  int timing_repeats;              // best-of repeats of speed measurements
  std::int64_t cost_seq;           // S of the comparison's one-shape cost column
};
ReportSizes SizesFor(ReportDetail detail);

// In report order (section numbers of the page).
Section PermutationSection(const ReportOptions& options);  // 1
Section SinusoidalSection(const ReportOptions& options);   // 2
Section LearnedSection(const ReportOptions& options);      // 3
Section RopeSection(const ReportOptions& options);         // 4
Section AlibiSection(const ReportOptions& options);        // 5
Section RelativeSection(const ReportOptions& options);     // 6
Section AttentionSection(const ReportOptions& options);    // 7
Section NumericsSection(const ReportOptions& options);     // 8
Section ExperimentSection(const ReportOptions& options);   // 9 (train short, test long)
Section CompareSection(const ReportOptions& options);      // 10
Section ChooseSection(const ReportOptions& options);       // 11 (choosing an encoding)

}  // namespace posenc::report
