// Vega-Lite spec builders (see charts.h).
#include "charts.h"

namespace posenc::report {
namespace {

Json Encode(const Axis& a) {
  Json e = {{"field", a.field}, {"type", a.type}, {"title", a.title}};
  if (a.scale == AxisScale::kLog) e["scale"] = {{"type", "log"}};
  if (a.scale == AxisScale::kSymlog) e["scale"] = {{"type", "symlog"}};
  if (a.type == "quantitative" && a.scale == AxisScale::kLinear) e["scale"] = {{"zero", false}};
  return e;
}

}  // namespace

Json LineSpec(const Axis& x, const Axis& y, const LineStyle& style) {
  Json mark = {{"type", style.mark}, {"tooltip", true}};
  if (style.mark == "line" && style.points) mark["point"] = {{"size", 18}};
  if (style.mark == "line") mark["strokeWidth"] = 1.6;
  if (style.mark == "point") mark["size"] = 22;
  Json enc = {{"x", Encode(x)}, {"y", Encode(y)}};
  Json tooltip = Json::array({{{"field", x.field}, {"type", x.type}, {"title", x.title}},
                              {{"field", y.field}, {"type", y.type}, {"title", y.title}}});
  if (y.type == "quantitative") tooltip[1]["format"] = ".6~g";
  if (!style.color_field.empty()) {
    enc["color"] = {{"field", style.color_field},
                    {"type", "nominal"},
                    {"title", style.color_title},
                    {"sort", nullptr}};
    if (style.stroke_dash_by_color) {
      enc["strokeDash"] = {{"field", style.color_field},
                           {"type", "nominal"},
                           {"title", style.color_title},
                           {"sort", nullptr}};
    }
    tooltip.insert(
        tooltip.begin(),
        Json{{"field", style.color_field}, {"type", "nominal"}, {"title", style.color_title}});
  }
  enc["tooltip"] = tooltip;
  return Json{{"mark", mark}, {"encoding", enc}};
}

Json WithRules(Json spec, const std::string& axis,
               const std::vector<std::pair<double, std::string>>& rules) {
  Json values = Json::array();
  for (const auto& [v, label] : rules) values.push_back({{"rule_value", v}, {"rule", label}});
  Json rule_enc = {{axis, {{"field", "rule_value"}, {"type", "quantitative"}}},
                   {"tooltip", Json::array({{{"field", "rule"}, {"title", "line"}},
                                            {{"field", "rule_value"}, {"title", "at"}}})}};
  Json rule = {{"data", {{"values", values}}},
               {"mark", {{"type", "rule"}, {"strokeDash", {4, 3}}, {"color", "#666"}}},
               {"encoding", rule_enc}};
  Json text = {{"data", {{"values", values}}},
               {"mark",
                {{"type", "text"},
                 {"align", "left"},
                 {"dx", 3},
                 {"dy", -5},
                 {"color", "#444"},
                 {"fontSize", 10}}},
               {"encoding",
                {{axis, {{"field", "rule_value"}, {"type", "quantitative"}}},
                 {"text", {{"field", "rule"}}}}}};
  if (axis == "y") text["encoding"]["x"] = {{"value", 2}};
  if (axis == "x") text["encoding"]["y"] = {{"value", 8}};
  Json layered = {{"layer", Json::array({spec, rule, text})}};
  return layered;
}

Json MatrixSpec(const Axis& x, const Axis& y, const MatrixStyle& s) {
  auto axis = [&](const Axis& a, bool horizontal) {
    Json e = {{"field", a.field}, {"type", "ordinal"}, {"title", a.title}};
    Json ax = Json::object();
    if (horizontal) ax["labelAngle"] = 0;
    if (!s.axis_values.empty()) ax["values"] = s.axis_values;
    e["axis"] = ax;
    return e;
  };
  const Json xe = axis(x, true);
  const Json ye = axis(y, false);
  Json color = {{"field", s.value_field}, {"type", "quantitative"}, {"title", s.value_title}};
  color["scale"] = s.diverging ? Json{{"scheme", "redblue"}, {"reverse", true}, {"domainMid", 0}}
                               : Json{{"scheme", "viridis"}};
  Json tooltip = Json::array({{{"field", y.field}, {"type", "ordinal"}, {"title", y.title}},
                              {{"field", x.field}, {"type", "ordinal"}, {"title", x.title}},
                              {{"field", s.value_field},
                               {"type", "quantitative"},
                               {"title", s.value_title},
                               {"format", ".5~g"}}});
  if (!s.facet_field.empty()) {
    tooltip.insert(tooltip.begin(), Json{{"field", s.facet_field}, {"type", "nominal"}});
  }
  if (!s.label_field.empty() && s.label_field != s.value_field) {
    tooltip.push_back(Json{{"field", s.label_field}, {"type", "nominal"}});
  }
  Json rect = {{"mark", {{"type", "rect"}, {"tooltip", true}}},
               {"encoding", {{"x", xe}, {"y", ye}, {"color", color}, {"tooltip", tooltip}}}};
  Json inner = rect;
  if (!s.label_field.empty()) {
    Json text = {{"mark", {{"type", "text"}, {"fontSize", 10}}},
                 {"encoding", {{"x", xe}, {"y", ye}, {"text", {{"field", s.label_field}}}}}};
    text["encoding"]["color"] = {{"value", "#111"}};
    if (s.light_label_above > 0.0) {
      text["encoding"]["color"]["condition"] = {
          {"test", "abs(datum['" + s.value_field + "']) >= " + std::to_string(s.light_label_above)},
          {"value", "white"}};
    }
    inner = Json{{"layer", Json::array({rect, text})}};
  }
  inner["width"] = s.size;
  inner["height"] = s.size;
  if (s.facet_field.empty()) return inner;
  Json order = nullptr;
  if (!s.facet_order.empty()) order = s.facet_order;
  return Json{
      {"facet",
       {{"field", s.facet_field}, {"type", "nominal"}, {"title", nullptr}, {"sort", order}}},
      {"columns", s.columns},
      {"resolve", {{"scale", {{"color", "shared"}}}}},
      {"spec", inner}};
}

Chart MakeChart(std::string id, std::string title, Json spec) {
  Chart c;
  c.id = std::move(id);
  c.title = std::move(title);
  c.spec = std::move(spec);
  return c;
}

}  // namespace posenc::report
