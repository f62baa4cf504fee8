// The report page's own style sheet and renderer script (inlined by html.cc).
#pragma once

#include <string_view>

namespace posenc::report {

// CSS of the page.
std::string_view ReportCss();

// The renderer: reads the JSON in <script id="posenc-figures">, builds each
// figure's Vega-Lite spec (heatmaps: rect marks up to 128x128 cells, else a
// full-resolution image drawn on a canvas plus hoverable blocks), embeds it
// with vega-embed (export actions: PNG, SVG) and records per-figure render
// times and errors in window.posencReport for the browser test.
std::string_view ReportScript();

}  // namespace posenc::report
