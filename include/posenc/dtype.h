// posenc/dtype.h: element types of tensor views and their conversions.
//
// Storage types: float32, float64, bfloat16, float16. Arithmetic in the
// kernels is float32 (or float64 in the scalar reference); 16-bit types are
// storage only. The conversions below are written by hand because g++ 12 in
// C++20 has no std::bfloat16_t / std::float16_t (C++23) and the public API
// must not expose Highway types; they are exact IEEE conversions with
// round-to-nearest-even, NaN preserved.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace posenc {

enum class DType : std::uint8_t { kFloat32, kFloat64, kBFloat16, kFloat16 };

// "float32", "float64", "bfloat16", "float16".
std::string_view DTypeName(DType dtype);
// Parses the names above (also "f32", "f64", "bf16", "f16"); throws
// InvalidArgument naming `arg` for anything else.
DType ParseDType(std::string_view text, std::string_view arg = "dtype");
// Bytes per element.
constexpr std::size_t DTypeSize(DType dtype) {
  return dtype == DType::kFloat64 ? 8 : dtype == DType::kFloat32 ? 4 : 2;
}

// Bit patterns of the two 16-bit formats.
struct BFloat16 {
  std::uint16_t bits;
};
struct Float16 {
  std::uint16_t bits;
};

inline float BF16ToFloat(BFloat16 v) {
  std::uint32_t u = static_cast<std::uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline BFloat16 FloatToBF16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet, keep sign
    return BFloat16{static_cast<std::uint16_t>((u >> 16) | 0x40u)};
  }
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return BFloat16{static_cast<std::uint16_t>((u + rounding) >> 16)};
}

inline float F16ToFloat(Float16 v) {
  const std::uint32_t sign = static_cast<std::uint32_t>(v.bits & 0x8000u) << 16;
  std::uint32_t exp = (v.bits >> 10) & 0x1fu;
  std::uint32_t man = v.bits & 0x3ffu;
  std::uint32_t u;
  if (exp == 0x1f) {  // inf / NaN
    u = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {  // normal
    u = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {  // zero
    u = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while ((man & 0x400u) == 0);
    u = sign | ((112u - e) << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline Float16 FloatToF16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return Float16{static_cast<std::uint16_t>(sign | 0x7e00u)};
  if (abs >= 0x477ff000u)
    return Float16{static_cast<std::uint16_t>(sign | 0x7c00u)};  // overflow -> inf
  if (abs < 0x38800000u) {                                       // result is subnormal or zero
    if (abs < 0x33000000u) return Float16{sign};  // below half the smallest subnormal
    const std::uint32_t exp = abs >> 23;
    const std::uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - exp;  // 14..24 + 1
    std::uint32_t half = man >> shift;
    const std::uint32_t rem = man & ((1u << shift) - 1u);
    const std::uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return Float16{static_cast<std::uint16_t>(sign | half)};
  }
  std::uint32_t h = ((abs >> 13) - (112u << 10));
  const std::uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return Float16{static_cast<std::uint16_t>(sign | h)};
}

// Loads element i of a buffer of `dtype` as double / stores a double.
inline double LoadAsDouble(const void* data, DType dtype, std::int64_t i) {
  switch (dtype) {
    case DType::kFloat32:
      return static_cast<const float*>(data)[i];
    case DType::kFloat64:
      return static_cast<const double*>(data)[i];
    case DType::kBFloat16:
      return BF16ToFloat(static_cast<const BFloat16*>(data)[i]);
    case DType::kFloat16:
      return F16ToFloat(static_cast<const Float16*>(data)[i]);
  }
  return 0.0;
}

inline void StoreFromDouble(void* data, DType dtype, std::int64_t i, double v) {
  switch (dtype) {
    case DType::kFloat32:
      static_cast<float*>(data)[i] = static_cast<float>(v);
      break;
    case DType::kFloat64:
      static_cast<double*>(data)[i] = v;
      break;
    case DType::kBFloat16:
      static_cast<BFloat16*>(data)[i] = FloatToBF16(static_cast<float>(v));
      break;
    case DType::kFloat16:
      static_cast<Float16*>(data)[i] = FloatToF16(static_cast<float>(v));
      break;
  }
}

}  // namespace posenc
