// The measured properties behind the report's comparison table, as plain
// functions the unit tests call (tests/unit/report_properties_test.cc).
//
// Each method family is measured the same way, from the public API only:
//  - bounded: the largest |value| its positional term takes for positions
//    (or distances) below L, measured at L and at 4L: a method is bounded
//    when the two agree;
//  - unique: the smallest Euclidean distance between the codes of two
//    different positions p != q < L (absolute methods), or how many distinct
//    values the bias takes over distances in (-L, L) (relative methods);
//  - relative: how far the position-only score s(i, j) moves under a common
//    shift (i, j) -> (i + t, j + t), as max |s(i+t, j+t) - s(i, j)| over
//    max |s|; 0 means the score depends on i - j only;
//  - past the trained length: what the public API does one position past it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace posenc::report {

// A code table: row p is the code of position p (row-major [rows, cols]).
struct CodeTable {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<double> values;
  double At(std::int64_t r, std::int64_t c) const {
    return values[static_cast<std::size_t>(r * cols + c)];
  }
};

// Max |v| over the table (0 for an empty one).
double MaxAbs(const std::vector<double>& values);

// Smallest Euclidean distance between two different rows (needs rows >= 2;
// throws InvalidArgument otherwise).
double MinRowDistance(const CodeTable& table);

// Dot products of rows: out[i * rows + j] = row_i . row_j.
std::vector<double> RowGram(const CodeTable& table);

// Position-only score of query position i and key position j.
using ScoreFn = std::function<double(std::int64_t i, std::int64_t j)>;

// max over i, j < length and t in shifts of |s(i+t, j+t) - s(i, j)|,
// divided by max |s(i, j)| over i, j < length (absolute when that is 0).
// length >= 1; shifts non-empty and >= 1.
double ShiftChange(const ScoreFn& score, std::int64_t length,
                   const std::vector<std::int64_t>& shifts);

// Number of distinct values of f(k) for distances k in (-length, length).
std::int64_t DistinctValues(const std::function<double(std::int64_t k)>& f, std::int64_t length);

// How the positional term behaves past the trained/extended length.
enum class PastEnd : std::uint8_t {
  kContinues,     // defined and bounded for every position (fixed functions)
  kErrors,        // the API rejects positions past the table
  kExtrapolates,  // defined, but with values never seen in training
  kSaturates,     // distances past the range share the last value
  kInterpolates,  // longer contexts are mapped back into the trained range (FIRE)
};
std::string PastEndName(PastEnd p);  // "continues", "errors", "defined, values unseen in training",
                                     // "saturates", "interpolates"

// Sizes used by the comparison table (a BERT-base / GPT-2-small shape).
struct ModelShape {
  std::int64_t layers = 12;
  std::int64_t hidden = 768;
  std::int64_t heads = 12;
  std::int64_t max_positions = 512;  // a learned table's rows
  std::int64_t seq = 4096;           // S for the attention-memory column
};

// Bytes of a float32 [heads, S, S] bias materialised for one layer.
std::int64_t DenseBiasBytes(const ModelShape& shape);

// Human-readable count / size: 393216 -> "393,216"; bytes -> "805.3 MB".
std::string Thousands(std::int64_t n);
std::string Bytes(double bytes);
// A number in 3 significant digits, scientific when tiny/huge ("1.2e-16").
std::string Sci(double v);

// Wall time of fn() per unit (ns), best of `repeats` runs (repeats >= 1).
double NanosPer(const std::function<void()>& fn, double units, int repeats);

}  // namespace posenc::report
