// Report data model helpers (see model.h).
#include "model.h"

#include <cmath>
#include <stdexcept>

namespace posenc::report {
namespace {

void CheckFinite(const Json& value, const std::string& where) {
  if (value.is_number_float() && !std::isfinite(value.get<double>())) {
    throw std::logic_error("report: non-finite value in " + where);
  }
  if (value.is_structured()) {
    for (const auto& item : value) CheckFinite(item, where);
  }
}

}  // namespace

void Chart::Add(Json record) {
  CheckFinite(record, "chart '" + id + "'");
  records.push_back(std::move(record));
}

void Heatmap::Check() const {
  if (rows < 1 || cols < 1 || values.size() != static_cast<std::size_t>(rows * cols)) {
    throw std::logic_error("report: heatmap '" + id + "' has a malformed matrix");
  }
  for (double v : values) {
    if (!std::isfinite(v))
      throw std::logic_error("report: non-finite value in heatmap '" + id + "'");
  }
}

const std::string& BlockId(const Block& block) {
  return std::visit([](const auto& b) -> const std::string& { return b.id; }, block);
}

const std::string& BlockTitle(const Block& block) {
  return std::visit([](const auto& b) -> const std::string& { return b.title; }, block);
}

}  // namespace posenc::report
