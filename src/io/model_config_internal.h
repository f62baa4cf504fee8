// Internals of the config.json loader shared by src/io/model_config.cc
// (the model-level keys) and src/io/model_config_layer.cc (one rope dict per
// layer type): the JSON reader with path-named errors, key scopes
// (text_config before the top level) and the model-level fields a layer
// needs. Internal to src/io; the contract is include/posenc/model_config.h.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/error.h"
#include "posenc/model_config.h"

namespace posenc::model_config_internal {

using json = nlohmann::json;

// Shortest text of a number ("0.3", "4", "1e+06").
inline std::string Num(double d) {
  if (d == std::floor(d) && std::abs(d) < 1e15) return std::to_string(static_cast<std::int64_t>(d));
  return json(d).dump();
}

inline std::string Show(const json& v) {
  std::string text = v.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text + " (" + v.type_name() + ")";
}

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void Fail(const std::string& path, const std::string& got,
                         const std::string& expected) const {
    throw ConfigError(source_ + ": " + path + ": got " + got + ", expected " + expected);
  }

  // Present and non-null.
  static const json* Find(const json& obj, const std::string& key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }

  std::optional<double> Number(const json& obj, const std::string& key, const std::string& path,
                               const std::string& expected = "a number") const {
    const json* v = Find(obj, key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) Fail(path, Show(*v), expected);
    const double d = v->get<double>();
    if (!std::isfinite(d)) Fail(path, Show(*v), expected);
    return d;
  }

  std::optional<std::int64_t> Int(const json& obj, const std::string& key, const std::string& path,
                                  const std::string& expected = "an integer > 0") const {
    const json* v = Find(obj, key);
    if (v == nullptr) return std::nullopt;
    if (v->is_number_integer()) {
      const auto i = v->get<std::int64_t>();
      if (i <= 0) Fail(path, Show(*v), expected);
      return i;
    }
    if (v->is_number_float()) {
      const double d = v->get<double>();
      if (d == std::floor(d) && d > 0 && d < 9e15) return static_cast<std::int64_t>(d);
    }
    Fail(path, Show(*v), expected);
  }

  std::optional<bool> Bool(const json& obj, const std::string& key, const std::string& path) const {
    const json* v = Find(obj, key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) Fail(path, Show(*v), "true or false");
    return v->get<bool>();
  }

  std::vector<double> NumberList(const json& v, const std::string& path) const {
    if (!v.is_array()) Fail(path, Show(v), "a list of numbers");
    std::vector<double> out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string p = path + "[" + std::to_string(i) + "]";
      if (!v[i].is_number()) Fail(p, Show(v[i]), "a number");
      out.push_back(v[i].get<double>());
      if (!std::isfinite(out.back()) || out.back() <= 0.0)
        Fail(p, Show(v[i]), "a finite number > 0");
    }
    return out;
  }

  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

// A key looked up in the text model first, then at the top level.
struct Scope {
  const json* text;
  std::string text_prefix;  // "text_config." or ""
  const json* root;

  std::pair<const json*, std::string> Where(const std::string& key) const {
    if (Reader::Find(*text, key) != nullptr) return {text, text_prefix + key};
    if (text != root && Reader::Find(*root, key) != nullptr) return {root, key};
    return {nullptr, text_prefix + key};
  }
};

// Model-level values every layer's rope dict falls back to.
struct ModelFields {
  std::int64_t head_dim = 0;
  std::int64_t max_pos = 0;
  std::optional<std::int64_t> top_original_max;
  std::optional<double> top_theta, top_prf;
  bool nested = false;
};

// One rope dict (a flat rope_parameters / rope_scaling, or one layer type's
// entry of a nested one) -> LayerRope, with HF's rules and warnings
// (src/io/model_config_layer.cc). `path` names the dict in errors ("" for a
// config without one); theta_override is Gemma 3's rope_local_base_freq.
struct LayerSource {
  const json& dict;
  std::string path;
  std::string layer_type;
  std::optional<double> theta_override;
};
LayerRope ParseLayer(const Reader& rd, const Scope& scope, const ModelFields& m,
                     const LayerSource& source, std::vector<std::string>& warnings);

}  // namespace posenc::model_config_internal
