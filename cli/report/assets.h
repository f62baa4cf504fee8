// The report page's own style sheet and renderer script (inlined by html.cc).
// Their text lives in report/web/report.css and report/web/report.js; the build
// embeds each as the string_view returned below (cmake/embed_text.cmake).
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

// The playground's style (web/playground.css), window.posenc over the wasm
// module (web/posenc_api.js) and its panels (web/playground.js); see
// playground.h.
std::string_view PlaygroundCss();
std::string_view PosencApiScript();
std::string_view PlaygroundScript();

}  // namespace posenc::report
