// Vega-Lite spec builders shared by the section builders: line charts over
// records, with optional colour series, log axes and rule layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model.h"

namespace posenc::report {

enum class AxisScale : std::uint8_t { kLinear, kLog, kSymlog };

struct Axis {
  std::string field;
  std::string title;
  AxisScale scale = AxisScale::kLinear;
  std::string type = "quantitative";  // or "nominal", "ordinal"
};

struct LineStyle {
  std::string color_field;  // "" for a single series
  std::string color_title;
  bool points = false;        // draw point marks too
  std::string mark = "line";  // "line", "point", "bar", "rect"
  bool stroke_dash_by_color = false;
};

// A Vega-Lite spec with tooltips on every mark (all encoded fields).
Json LineSpec(const Axis& x, const Axis& y, const LineStyle& style = {});

// Adds horizontal rules at y = values (labelled in the tooltip) as a layer.
Json WithRules(Json spec, const std::string& axis /* "x" or "y" */,
               const std::vector<std::pair<double, std::string>>& rules);

// A matrix drawn as Vega-Lite rect marks over records {x, y, value[, label][,
// facet]} with ordinal axes: `label_field` non-empty writes that field in
// each cell; `facet_field` non-empty draws small multiples (one panel per
// value, `columns` per row). Cells absent from the records stay blank (a
// causal mask).
struct MatrixStyle {
  std::string value_field = "value";
  std::string value_title = "value";
  bool diverging = false;   // blue-white-red centred on 0, else viridis
  std::string label_field;  // "" for no text
  std::string facet_field;  // "" for one panel
  int columns = 4;
  int size = 260;                         // panel width = height (pixels)
  std::vector<std::int64_t> axis_values;  // tick labels shown (empty: all)
  double light_label_above = 0.0;         // > 0: labels white where |value| >= this
  std::vector<std::string> facet_order;   // panel order (empty: data order)
};
Json MatrixSpec(const Axis& x, const Axis& y, const MatrixStyle& style);

// A chart from a spec and an id/title/caption (records added by the caller).
Chart MakeChart(std::string id, std::string title, Json spec);

}  // namespace posenc::report
