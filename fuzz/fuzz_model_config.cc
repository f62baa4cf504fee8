// libFuzzer target: the Hugging Face config loader (posenc/model_config.h),
// config.json text -> rope per layer type -> frequencies.
// Properties: ParseModelConfig throws only ConfigError or IoError (never
// InvalidArgument, which the CLI would report as a usage error, nor anything
// else, which it would report as an internal error); a config it accepts
// yields, for every layer type and every seq_len in the positional domain,
// RopeParams that ValidateRopeParams accepts, with finite frequencies (the
// numerics alternate with the input's length, to keep executions cheap).
#include <cmath>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "posenc/error.h"
#include "posenc/model_config.h"
#include "posenc/positions.h"
#include "posenc/rope.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace posenc;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ModelConfig cfg;
  try {
    cfg = ParseModelConfig(text, "fuzz.json");
  } catch (const ConfigError&) {
    return 0;
  } catch (const IoError&) {
    return 0;
  }
  // ALiBi models (Bloom, MPT, Falcon-style) carry slopes and no RoPE layer.
  FUZZ_CHECK(!cfg.layers.empty() || cfg.alibi.has_value(), "an accepted config has no positions");
  const RopeNumerics numerics = size % 2 == 0 ? RopeNumerics::kHF : RopeNumerics::kAccurate;
  for (const LayerRope& layer : cfg.layers) {
    for (const std::int64_t seq_len : {std::int64_t{0}, cfg.original_max_position_embeddings,
                                       cfg.max_position_embeddings + 1, kMaxPosition + 1}) {
      if (seq_len < 0 || seq_len > kMaxPosition + 1) continue;
      {
        const RopeParams p = ModelRopeParams(cfg, layer.layer_type, seq_len, numerics);
        ValidateRopeParams(p);  // throws: an accepted config gave invalid parameters
        for (const double f : p.frequencies.inv_freq) {
          FUZZ_CHECK(std::isfinite(f) && f >= 0, "a non-finite or negative inv_freq");
        }
        FUZZ_CHECK(
            std::isfinite(p.frequencies.attention_factor) && p.frequencies.attention_factor > 0,
            "a non-finite attention factor");
      }
    }
  }
  return 0;
}
