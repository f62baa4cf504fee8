#include "test_util.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>

#include <unistd.h>

namespace posenc::test {

const nlohmann::json& Golden(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, nlohmann::json> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(name);
  if (it == cache.end()) {
    const std::string path = std::string(POSENC_GOLDEN_DIR) + "/" + name;
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open golden file " + path);
    it = cache.emplace(name, nlohmann::json::parse(in)).first;
  }
  return it->second;
}

std::string SourcePath(const std::string& relative) {
  return std::string(POSENC_SOURCE_DIR) + "/" + relative;
}

double Eps(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return std::ldexp(1.0, -24);
    case DType::kFloat64:
      return std::ldexp(1.0, -53);
    case DType::kBFloat16:
      return std::ldexp(1.0, -8);
    case DType::kFloat16:
      return std::ldexp(1.0, -11);
  }
  return 0;
}

std::vector<double> ToDoubles(const nlohmann::json& array) {
  std::vector<double> out;
  out.reserve(array.size());
  for (const auto& v : array) out.push_back(v.get<double>());
  return out;
}

std::vector<float> ToFloats(const nlohmann::json& array) {
  std::vector<float> out;
  out.reserve(array.size());
  for (const auto& v : array) out.push_back(static_cast<float>(v.get<double>()));
  return out;
}

namespace {
void Flatten(const nlohmann::json& j, std::vector<double>& out) {
  if (j.is_array()) {
    for (const auto& v : j) Flatten(v, out);
  } else {
    out.push_back(j.get<double>());
  }
}
}  // namespace

std::vector<double> FlattenDoubles(const nlohmann::json& nested) {
  std::vector<double> out;
  Flatten(nested, out);
  return out;
}

double MaxAbsDiff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::fabs(a[i] - b[i]);
    if (!(d <= m)) m = d;  // NaN propagates as a failure
  }
  return m;
}

namespace {

// The directories TempDir made in this process, removed at exit (the test
// programs do not fork; a forked child would run this too).
class TempDirs {
 public:
  void Add(const std::filesystem::path& dir) {
    const std::lock_guard<std::mutex> lock(mu_);
    for (const auto& d : dirs_)
      if (d == dir) return;
    dirs_.push_back(dir);
  }
  ~TempDirs() {
    if (std::getenv("POSENC_KEEP_TEST_DIRS") != nullptr) return;
    std::error_code ec;
    for (const auto& d : dirs_) std::filesystem::remove_all(d, ec);
  }

 private:
  std::mutex mu_;
  std::vector<std::filesystem::path> dirs_;
};

TempDirs& Made() {
  static TempDirs dirs;
  return dirs;
}

}  // namespace

std::string GoldenCaseConfig(const nlohmann::json& c, bool legacy) {
  using nlohmann::json;
  const json& cfg = c["config"];
  json out = {{"hidden_size", cfg["hidden_size"]},
              {"num_attention_heads", cfg["num_attention_heads"]},
              {"head_dim", cfg["head_dim"]},
              {"max_position_embeddings", cfg["max_position_embeddings"]}};
  if (!cfg["original_max_position_embeddings_top_level"].is_null()) {
    out["original_max_position_embeddings"] = cfg["original_max_position_embeddings_top_level"];
  }
  json rope = cfg["rope_parameters_input"];
  if (legacy) {
    out["rope_theta"] = rope["rope_theta"];
    rope.erase("rope_theta");
    rope["type"] = rope["rope_type"];
    rope.erase("rope_type");
    out["rope_scaling"] = rope;
  } else {
    out["rope_parameters"] = rope;
  }
  return out.dump();
}

std::string TempDir(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("posenc_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  Made().Add(dir);
  return dir.string();
}

}  // namespace posenc::test
