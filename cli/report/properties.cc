// Measured properties of the comparison table (see properties.h).
#include "properties.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "posenc/error.h"

namespace posenc::report {

double MaxAbs(const std::vector<double>& values) {
  double m = 0.0;
  for (double v : values) m = std::max(m, std::abs(v));
  return m;
}

double MinRowDistance(const CodeTable& table) {
  Require(table.rows >= 2, "table.rows", table.rows, "at least 2 rows to compare");
  Require(
      table.cols >= 1 && table.values.size() == static_cast<std::size_t>(table.rows * table.cols),
      "table.values.size()", table.values.size(), "rows * cols");
  // |a - b|^2 = |a|^2 + |b|^2 - 2 a.b loses digits when rows are close; use
  // the direct difference (O(rows^2 cols), fine for the report's sizes).
  double best = std::numeric_limits<double>::infinity();
  for (std::int64_t i = 0; i < table.rows; ++i) {
    const double* a = &table.values[static_cast<std::size_t>(i * table.cols)];
    for (std::int64_t j = i + 1; j < table.rows; ++j) {
      const double* b = &table.values[static_cast<std::size_t>(j * table.cols)];
      double s = 0.0;
      for (std::int64_t c = 0; c < table.cols && s < best * best; ++c) {
        const double d = a[c] - b[c];
        s += d * d;
      }
      best = std::min(best, std::sqrt(s));
    }
  }
  return best;
}

std::vector<double> RowGram(const CodeTable& table) {
  std::vector<double> out(static_cast<std::size_t>(table.rows * table.rows));
  for (std::int64_t i = 0; i < table.rows; ++i) {
    for (std::int64_t j = i; j < table.rows; ++j) {
      double s = 0.0;
      for (std::int64_t c = 0; c < table.cols; ++c) s += table.At(i, c) * table.At(j, c);
      out[static_cast<std::size_t>(i * table.rows + j)] = s;
      out[static_cast<std::size_t>(j * table.rows + i)] = s;
    }
  }
  return out;
}

double ShiftChange(const ScoreFn& score, std::int64_t length,
                   const std::vector<std::int64_t>& shifts) {
  Require(length >= 1, "length", length, "at least 1");
  Require(!shifts.empty(), "shifts.size()", shifts.size(), "at least one shift");
  double scale = 0.0;
  std::vector<double> base(static_cast<std::size_t>(length * length));
  for (std::int64_t i = 0; i < length; ++i) {
    for (std::int64_t j = 0; j < length; ++j) {
      const double s = score(i, j);
      base[static_cast<std::size_t>(i * length + j)] = s;
      scale = std::max(scale, std::abs(s));
    }
  }
  double change = 0.0;
  for (std::int64_t t : shifts) {
    Require(t >= 1, "shift", t, "at least 1");
    for (std::int64_t i = 0; i < length; ++i) {
      for (std::int64_t j = 0; j < length; ++j) {
        change = std::max(
            change, std::abs(score(i + t, j + t) - base[static_cast<std::size_t>(i * length + j)]));
      }
    }
  }
  return scale > 0.0 ? change / scale : change;
}

std::int64_t DistinctValues(const std::function<double(std::int64_t)>& f, std::int64_t length) {
  Require(length >= 1, "length", length, "at least 1");
  std::set<double> seen;
  for (std::int64_t k = -length + 1; k < length; ++k) seen.insert(f(k));
  return static_cast<std::int64_t>(seen.size());
}

std::string PastEndName(PastEnd p) {
  switch (p) {
    case PastEnd::kContinues:
      return "continues";
    case PastEnd::kErrors:
      return "errors";
    case PastEnd::kExtrapolates:
      return "defined, values unseen in training";
    case PastEnd::kSaturates:
      return "saturates";
    case PastEnd::kInterpolates:
      return "interpolates";
  }
  return "?";
}

std::int64_t DenseBiasBytes(const ModelShape& shape) {
  return shape.heads * shape.seq * shape.seq * 4;
}

std::string Thousands(std::int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string Bytes(double bytes) {
  if (bytes < 1e3) return fmt::format("{:.0f} B", bytes);
  if (bytes < 1e6) return fmt::format("{:.1f} kB", bytes / 1e3);
  if (bytes < 1e9) return fmt::format("{:.1f} MB", bytes / 1e6);
  return fmt::format("{:.2f} GB", bytes / 1e9);
}

std::string Sci(double v) {
  if (v == 0.0) return "0";
  const double a = std::abs(v);
  if (a >= 1e-3 && a < 1e5) return fmt::format("{:.3g}", v);
  return fmt::format("{:.2e}", v);
}

double NanosPer(const std::function<void()>& fn, double units, int repeats) {
  Require(repeats >= 1, "repeats", repeats, "at least 1");
  Require(units > 0.0, "units", units, "> 0");
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  return best / units;
}

}  // namespace posenc::report
