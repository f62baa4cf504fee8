// Private to src/advice/: the pieces of posenc/choose.h shared by its two
// files (choose.cc: request, evidence, rules and ranking; choose_config.cc:
// the exact config change for an existing model, checked by the loader).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "posenc/model_config.h"

namespace posenc::advice {

// snprintf into a std::string (the library does not link fmt).
std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));

// The model given by --from: its loaded config, the raw text of a
// config.json ("" for GGUF) and what choose reads from it.
struct FromModel {
  std::string path;
  ModelConfig config;
  std::string json_text;            // config.json text; empty for GGUF
  std::string scheme;               // "rope", "alibi", "mrope" (what it runs now)
  std::string rope_type;            // the current rope type ("default", "llama3", ...)
  std::int64_t train_length = 0;    // original_max_position_embeddings (0: unknown)
  std::int64_t context_length = 0;  // max_position_embeddings (0: unknown)
};

// Loads and classifies a --from file (IoError / ConfigError from the loader).
FromModel LoadFromModel(const std::string& path);

// The exact change that gives `model` the RoPE frequency scheme `rope_type`
// ("default" = unscaled RoPE, "linear", "dynamic", "ntk", "yarn") for a model
// trained at `train` and used at `target` tokens, checked by loading the
// changed config (config.json) or by posenc's scaling code (GGUF), with the
// wavelengths of a few pairs before and after. Throws ConfigError if the
// change does not load (a bug: the test suite runs it on every golden config).
nlohmann::json SuggestRopeChange(const FromModel& model, const std::string& rope_type,
                                 std::int64_t train, std::int64_t target);

}  // namespace posenc::advice
