// `posenc report`: builds every section (cli/report/section_*.cc) with a
// progress bar, then writes the HTML page and the data files.
#pragma once

#include <string>

#include "model.h"
#include "progress.h"
#include "sections.h"

namespace posenc::report {

// Builds the whole report, announcing each section on `progress`.
Report BuildReport(const ReportOptions& options, Progress* progress);

// Number of section builders BuildReport runs (for the progress bar).
int NumReportSteps(const ReportOptions& options);

}  // namespace posenc::report
