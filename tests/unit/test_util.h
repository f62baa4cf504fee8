// Shared test helpers: golden fixtures and dtype-scaled tolerances.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "posenc/dtype.h"

namespace posenc::test {

// Parses tests/golden/NAME (e.g. "rope_init.json").
const nlohmann::json& Golden(const std::string& name);

// A config.json (text) for a tests/golden/rope_init.json case; `legacy`
// writes rope_scaling with the theta at the top level, as older configs do.
std::string GoldenCaseConfig(const nlohmann::json& golden_case, bool legacy);

// Absolute path of a file in the source tree (e.g. "examples/configs/x.json").
std::string SourcePath(const std::string& relative);

// Unit roundoff of a storage dtype: 2^-24 float32, 2^-8 bfloat16, 2^-11
// float16, 2^-53 float64. Tolerances in tests are multiples of it.
double Eps(DType dtype);

// A json array of numbers as doubles / floats.
std::vector<double> ToDoubles(const nlohmann::json& array);
std::vector<float> ToFloats(const nlohmann::json& array);
// Flattens nested json arrays of numbers (row-major).
std::vector<double> FlattenDoubles(const nlohmann::json& nested);

// Max |a[i] - b[i]|; fails the test if sizes differ.
double MaxAbsDiff(const std::vector<double>& a, const std::vector<double>& b);

// A scratch directory for the test (created fresh; removed when the test
// program exits, unless POSENC_KEEP_TEST_DIRS is set to inspect it).
std::string TempDir(const std::string& name);

}  // namespace posenc::test
