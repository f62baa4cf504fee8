// posenc/gguf.h: llama.cpp's GGUF model files: the header, the metadata and
// the tensor directory, and the model configuration (RoPE or ALiBi) they
// imply. The tensor data is never read, except one small tensor on request
// (`rope_freqs.weight` and LongRoPE's factor tensors), so a 40 GB model
// inspects in milliseconds.
//
// Format: the GGUF specification, ggml `docs/gguf.md`
// (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md); layout and
// limits are summarised in src/io/gguf.cc. Versions 2 and 3, little-endian
// (version 1 used 32-bit counts; big-endian v3 files are rejected).
//
// Errors: IoError for a file that is not well-formed GGUF (bad magic, unknown
// version, truncation, a count or string length exceeding the file, an unknown
// value type, an absurd count such as 2^40 key/value pairs); ConfigError for
// well-formed metadata that does not describe a model posenc can use (missing
// or mistyped keys, unsupported scaling type). Messages name the file, the
// field and what is allowed:
//   "m.gguf: header.n_kv: got 1099511627776, expected at most 35 (what the 456
//    bytes left in the file can hold)"
// No allocation is ever sized by a count or length before it is checked
// against the bytes left in the file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/model_config.h"

namespace posenc {

// GGUF value types (the numbers are the format's).
enum class GgufType : std::uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
// "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64",
// "i64", "f64" (the names of ggml's gguf_type_name).
std::string_view GgufTypeName(GgufType type);

// Arrays longer than this keep only their type and count (tokenizer vocabularies
// are skipped, not stored).
inline constexpr std::uint64_t kGgufKeptArrayLength = 65536;
// Longest string value or key accepted (a longer one is an IoError).
inline constexpr std::uint64_t kGgufMaxStringBytes = std::uint64_t{1} << 24;

struct GgufValue {
  GgufType type = GgufType::kUint8;
  // Scalars: numbers (and bool: 0/1) in `number`; integers also exactly in
  // `integer` (u64 values above 2^63 - 1 are an IoError); strings in `text`.
  double number = 0.0;
  std::int64_t integer = 0;
  std::string text;
  // Arrays: element type and count; the elements of numeric and bool arrays
  // of at most kGgufKeptArrayLength elements in `numbers`, of string arrays
  // in `strings` (longer arrays: both empty).
  GgufType element_type = GgufType::kUint8;
  std::uint64_t count = 0;
  std::vector<double> numbers;
  std::vector<std::string> strings;

  bool IsInteger() const;  // u8..i64 scalar
  bool IsNumber() const;   // integer or float scalar
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<std::int64_t> shape;  // ggml order: shape[0] is the contiguous dimension
  std::uint32_t ggml_type = 0;      // ggml_type: 0 F32, 1 F16, 30 BF16, ...
  std::uint64_t offset = 0;         // relative to GgufFile::data_offset
};

struct GgufFile {
  std::string source;             // file name for messages
  std::uint32_t version = 0;      // 2 or 3
  std::uint64_t file_size = 0;    // bytes
  std::uint64_t alignment = 32;   // general.alignment or 32
  std::uint64_t data_offset = 0;  // start of the tensor data (aligned)
  std::vector<GgufKeyValue> metadata;
  std::vector<GgufTensorInfo> tensors;

  const GgufValue* Find(std::string_view key) const;  // null when absent
  const GgufTensorInfo* FindTensor(std::string_view name) const;
};

// Parses a GGUF file held in memory (`bytes` is the whole file; `source`
// names it in messages). The entry point for fuzzing: never reads outside
// `bytes`, throws IoError for every malformed input.
GgufFile ParseGguf(std::span<const std::uint8_t> bytes, std::string_view source);

// Reads the header, metadata and tensor directory of the file at `path`
// (sequential buffered reads of the metadata only). Throws IoError.
GgufFile ReadGguf(const std::string& path);

// The float values of one F32, F16 or BF16 tensor (at most 2^24 elements),
// bounds-checked against the file; reads only that tensor's bytes. The span
// form reads from the in-memory file given to ParseGguf. Throws IoError
// (missing tensor, other type, data past the end of the file).
std::vector<float> ReadGgufTensor(const std::string& path, const GgufFile& file,
                                  std::string_view name);
std::vector<float> GgufTensorValues(std::span<const std::uint8_t> bytes, const GgufFile& file,
                                    std::string_view name);

// True when the file at `path` starts with the GGUF magic (false when it is
// shorter or cannot be opened).
bool IsGgufFile(const std::string& path);

// The model configuration a GGUF file describes, with llama.cpp's reading of
// the keys (src/io/gguf_model.cc lists them and the defaults):
//  - RoPE: theta `{arch}.rope.freq_base` (default 10000), rotary dim
//    `{arch}.rope.dimension_count` (default: head dim), head dim
//    `{arch}.attention.key_length` or embedding_length / head_count, context
//    `{arch}.context_length`; scaling `{arch}.rope.scaling.type` none / linear
//    (`.factor`) / yarn (`.factor`, `.original_context_length`,
//    `.yarn_beta_fast`, `.yarn_beta_slow`, `.yarn_attn_factor`,
//    `.yarn_log_multiplier`) / longrope (`rope_factors_long.weight`,
//    `rope_factors_short.weight`, `.attn_factor`); per-pair divisors from a
//    `rope_freqs.weight` tensor (Llama 3: RopeScalingParams::freq_factors);
//    `{arch}.rope.freq_base_swa` adds a sliding_attention layer;
//    `{arch}.rope.dimension_sections` (M-RoPE). Pairing: llama.cpp's rope
//    type of the architecture (NORM = interleaved, NEOX = half_split; the
//    converter permutes Llama's q/k weights so that NORM on GGUF weights
//    equals HF's rotate_half on HF weights).
//  - ALiBi (bloom, mpt, jais, refact, jina-bert-v2, or any file with
//    `{arch}.attention.max_alibi_bias`): ModelConfig::alibi with the head
//    count, max bias (default 8) and slopes (ggml's, = the kReference
//    convention); no rope layers.
// `rope_freqs` etc. come from the file: the path form reads those tensors,
// the span form takes them from the in-memory bytes.
ModelConfig GgufModelConfig(const GgufFile& file, std::span<const std::uint8_t> bytes);
ModelConfig LoadGgufModelConfig(const std::string& path);
// ParseGguf + GgufModelConfig on an in-memory file (fuzzing the whole path).
ModelConfig ParseGgufModelConfig(std::span<const std::uint8_t> bytes, std::string_view source);

}  // namespace posenc
