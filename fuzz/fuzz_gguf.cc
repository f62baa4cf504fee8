// libFuzzer target: the GGUF reader (posenc/gguf.h), added with the recipe
// of docs/RELIABILITY.md. The input is a whole .gguf file in memory.
// Properties: ParseGguf and ParseGgufModelConfig throw only IoError /
// ConfigError (never read outside the buffer: ASan); a model config they
// accept has RoPE layers or ALiBi slopes, and the tensors a parsed file
// lists as F32 / F16 / BF16 can be read back or are refused with IoError.
#include <cstdint>
#include <span>

#include "fuzz_util.h"
#include "posenc/error.h"
#include "posenc/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace posenc;
  const std::span<const std::uint8_t> bytes(data, size);
  try {
    const GgufFile file = ParseGguf(bytes, "fuzz.gguf");
    for (const GgufTensorInfo& t : file.tensors) {
      try {
        (void)GgufTensorValues(bytes, file, t.name);
      } catch (const IoError&) {
      }
    }
  } catch (const IoError&) {
    return 0;
  }
  try {
    const ModelConfig cfg = ParseGgufModelConfig(bytes, "fuzz.gguf");
    FUZZ_CHECK(!cfg.layers.empty() || cfg.alibi.has_value(), "a config with no positions");
  } catch (const IoError&) {
  } catch (const ConfigError&) {
  }
  return 0;
}
