// A tiny GGUF writer for tests (and fuzz seeds): the format of
// src/io/gguf.cc (the comment above Parse), little-endian, version 3 by default, metadata
// in call order, F32 tensors laid out after the infos at the alignment. Raw
// setters (Version, RawKv) let a test build malformed files on purpose.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::testing {

class GgufBuilder {
 public:
  GgufBuilder& Version(std::uint32_t v) {
    version_ = v;
    return *this;
  }
  GgufBuilder& Str(std::string_view key, std::string_view value) {
    Key(key, 8);
    String(kv_, value);
    ++n_kv_;
    return *this;
  }
  GgufBuilder& U32(std::string_view key, std::uint32_t value) {
    Key(key, 4);
    Put(kv_, value);
    ++n_kv_;
    return *this;
  }
  GgufBuilder& F32(std::string_view key, float value) {
    Key(key, 6);
    Put(kv_, value);
    ++n_kv_;
    return *this;
  }
  GgufBuilder& Bool(std::string_view key, bool value) {
    Key(key, 7);
    kv_.push_back(value ? 1 : 0);
    ++n_kv_;
    return *this;
  }
  GgufBuilder& I32Array(std::string_view key, const std::vector<std::int32_t>& values) {
    Key(key, 9);
    Put(kv_, std::uint32_t{5});
    Put(kv_, static_cast<std::uint64_t>(values.size()));
    for (const std::int32_t v : values) Put(kv_, v);
    ++n_kv_;
    return *this;
  }
  // Any bytes as one key/value pair: type then payload.
  GgufBuilder& RawKv(std::string_view key, std::uint32_t type,
                     const std::vector<std::uint8_t>& payload) {
    Key(key, type);
    kv_.insert(kv_.end(), payload.begin(), payload.end());
    ++n_kv_;
    return *this;
  }
  GgufBuilder& TensorF32(std::string_view name, const std::vector<float>& values) {
    String(infos_, name);
    Put(infos_, std::uint32_t{1});
    Put(infos_, static_cast<std::int64_t>(values.size()));
    Put(infos_, std::uint32_t{0});  // GGML_TYPE_F32
    Put(infos_, static_cast<std::uint64_t>(data_.size()));
    for (const float v : values) Put(data_, v);
    while (data_.size() % 32 != 0) data_.push_back(0);
    ++n_tensors_;
    return *this;
  }

  std::vector<std::uint8_t> Bytes() const {
    std::vector<std::uint8_t> out = {'G', 'G', 'U', 'F'};
    Put(out, version_);
    Put(out, n_tensors_);
    Put(out, n_kv_);
    out.insert(out.end(), kv_.begin(), kv_.end());
    out.insert(out.end(), infos_.begin(), infos_.end());
    if (n_tensors_ != 0) {
      while (out.size() % 32 != 0) out.push_back(0);
      out.insert(out.end(), data_.begin(), data_.end());
    }
    return out;
  }

  template <typename T>
  static void Put(std::vector<std::uint8_t>& out, T v) {
    std::uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.insert(out.end(), b, b + sizeof(T));
  }
  static void String(std::vector<std::uint8_t>& out, std::string_view s) {
    Put(out, static_cast<std::uint64_t>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
  }

 private:
  void Key(std::string_view key, std::uint32_t type) {
    String(kv_, key);
    Put(kv_, type);
  }

  std::uint32_t version_ = 3;
  std::uint64_t n_kv_ = 0, n_tensors_ = 0;
  std::vector<std::uint8_t> kv_, infos_, data_;
};

}  // namespace posenc::testing
