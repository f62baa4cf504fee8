// Turns a report::Report into one self-contained HTML file (the chart
// library, styles, data and renderer inlined: it opens offline) and writes
// the data behind each figure as CSV beside it.
//
// The chart library is Vega-Lite + Vega + vega-embed, installed by npm at
// set-up time (package.json, scripts/setup.sh). Their minified bundles are
// read from a node_modules directory: $POSENC_NODE_MODULES when set, else
// the installed copy beside the executable (PREFIX/share/posenc/node_modules
// for PREFIX/bin/posenc, installed by `cmake --install`), else the source
// tree's node_modules (compile-time POSENC_NODE_MODULES_DIR, for the build
// tree). The example configs drawn by the report are found the same way
// (PREFIX/share/posenc/configs, else the source tree's examples/configs).
#pragma once

#include <string>

#include "model.h"
#include "playground.h"

namespace posenc::report {

// The three minified bundles, in load order.
struct ChartLibrary {
  std::string vega;
  std::string vega_lite;
  std::string vega_embed;
};

// The node_modules directory in use (see above).
std::string NodeModulesDir();

// The directory of example model configs in use (see above).
std::string ExamplesDir();

// The evidence file of `posenc choose` in use: PREFIX/share/posenc/evidence/
// choose.json beside an installed executable, else the source tree's
// docs/evidence/choose.json.
std::string EvidencePath();

// The committed extrapolation run the report uses without --experiment:
// PREFIX/share/posenc/experiments/extrapolation beside an installed
// executable, else the source tree's docs/experiments/extrapolation.
std::string DefaultExperimentDir();

// Reads the bundles; throws posenc::IoError naming the missing file and
// saying to run scripts/setup.sh.
ChartLibrary LoadChartLibrary();

// The whole page; with `playground`, a last section runs it (playground.h).
std::string RenderHtml(const Report& report, const ChartLibrary& library,
                       const PlaygroundModule* playground = nullptr);

// CSV text of one block's data: a chart's records (one column per key), a
// heatmap's matrix (a header row of column coordinates, then one line per
// row led by its row coordinate), a table's cells.
std::string BlockCsv(const Block& block);

// Writes the figure data inlined in the page as JSON text (exposed for the
// tests: it must be valid JSON and never contain "</").
std::string FigureDataJson(const Report& report);

// Writes DIR/index.html and DIR/data/<block id>.csv: built in a folder
// DIR.tmp-XXXXXX beside DIR, then swapped in place of DIR (cli/atomic_file.h
// AtomicDirectory), so a failure leaves a previous report whole. An existing
// DIR may hold only index.html and data/ (what a previous report wrote).
// Returns the HTML file's path. Throws posenc::IoError.
std::string WriteReport(const Report& report, const ChartLibrary& library, const std::string& dir,
                        const PlaygroundModule* playground = nullptr);

// `posenc playground`: DIR/index.html holding the playground alone (same
// atomic swap; an existing DIR may hold only index.html). Throws IoError when
// the module is unavailable.
std::string WritePlayground(const ChartLibrary& library, const PlaygroundModule& playground,
                            const std::string& dir);

// Writes a single-figure page (posenc plot) to `path`, atomically (a
// temporary file renamed into place). Throws IoError.
void WriteSingleFigure(const Block& block, const std::string& subtitle, const ChartLibrary& library,
                       const std::string& path);

}  // namespace posenc::report
