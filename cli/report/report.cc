// `posenc report`: runs the section builders in order (see report.h).
#include "report.h"

#include <functional>
#include <utility>

#include <fmt/format.h>

#include "posenc/error.h"

namespace posenc::report {
namespace {

struct Builder {
  const char* label;
  std::function<Section(const ReportOptions&)> build;
};

std::vector<Builder> Builders() {
  return {
      {"permutation", PermutationSection},
      {"sinusoidal", SinusoidalSection},
      {"learned", LearnedSection},
      {"RoPE", RopeSection},
      {"ALiBi", AlibiSection},
      {"relative", RelativeSection},
      {"attention maps", AttentionSection},
      {"numerics", NumericsSection},
      {"train short, test long", ExperimentSection},
      {"comparison", CompareSection},
      {"choosing an encoding", ChooseSection},
  };
}

}  // namespace

std::string_view ReportDetailName(ReportDetail d) {
  return d == ReportDetail::kQuick ? "quick" : "full";
}

ReportSizes SizesFor(ReportDetail detail) {
  if (detail == ReportDetail::kQuick) {
    return ReportSizes{/*heatmap_positions=*/128, /*similarity=*/256,
                       /*rope_distance=*/512,
                       /*unique_positions=*/256,  /*shift_length=*/24,
                       /*numerics_samples=*/8,
                       /*timing_repeats=*/2,      /*cost_seq=*/128};
  }
  return ReportSizes{/*heatmap_positions=*/1024, /*similarity=*/1024,
                     /*rope_distance=*/8192,
                     /*unique_positions=*/1024,  /*shift_length=*/64,
                     /*numerics_samples=*/64,
                     /*timing_repeats=*/5,       /*cost_seq=*/512};
}

int NumReportSteps(const ReportOptions&) { return static_cast<int>(Builders().size()); }

Report BuildReport(const ReportOptions& options, Progress* progress) {
  Require(options.threads >= 1 && options.threads <= 1024, "--threads", options.threads,
          "an integer in [1, 1024]");
  Report report;
  report.subtitle = fmt::format(
      "Positional encodings measured with the posenc library ({} report). Every figure and number "
      "below is computed by the library when the report is built.",
      ReportDetailName(options.detail));
  for (const auto& b : Builders()) {
    if (progress != nullptr) progress->Step(b.label);
    report.sections.push_back(b.build(options));
    for (const auto& line : report.sections.back().summary) report.summary.push_back(line);
  }
  if (progress != nullptr) progress->Finish();
  return report;
}

}  // namespace posenc::report
