// Scalar RoPE kernels; numerics and conventions are in kernels/scalar/rope.h.
#include "kernels/scalar/rope.h"

#include <cmath>
#include <type_traits>

namespace posenc::kernels::scalar {

namespace {

// Arithmetic type of the kHF recipe for a storage type: what torch computes
// an elementwise op in on CPU before rounding to the tensor's dtype.
template <typename T>
struct HfMath {
  using type = float;
};
template <>
struct HfMath<double> {
  using type = double;
};

inline double Load(const float* p, std::int64_t i) { return p[i]; }
inline double Load(const double* p, std::int64_t i) { return p[i]; }
inline double Load(const BFloat16* p, std::int64_t i) { return BF16ToFloat(p[i]); }
inline double Load(const Float16* p, std::int64_t i) { return F16ToFloat(p[i]); }

inline void Store(float* p, std::int64_t i, double v) { p[i] = static_cast<float>(v); }
inline void Store(double* p, std::int64_t i, double v) { p[i] = v; }
// 16-bit stores round from float (HfMath) or from double (kAccurate: the
// double is rounded to float first; the double rounding differs from one
// correct rounding by at most a tie case, far inside the dtype's half ulp).
inline void Store(BFloat16* p, std::int64_t i, double v) {
  p[i] = FloatToBF16(static_cast<float>(v));
}
inline void Store(Float16* p, std::int64_t i, double v) {
  p[i] = FloatToF16(static_cast<float>(v));
}

// Rounds an arithmetic value to storage type T and back.
template <typename T>
inline typename HfMath<T>::type RoundTo(typename HfMath<T>::type v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return BF16ToFloat(FloatToBF16(v));
  } else if constexpr (std::is_same_v<T, Float16>) {
    return F16ToFloat(FloatToF16(v));
  } else {
    return v;
  }
}

inline float RoundToDType(float v, DType dtype) {
  switch (dtype) {
    case DType::kBFloat16:
      return BF16ToFloat(FloatToBF16(v));
    case DType::kFloat16:
      return F16ToFloat(FloatToF16(v));
    case DType::kFloat32:
    case DType::kFloat64:
      return v;
  }
  return v;
}

// Index of the two members of pair j.
inline void PairIndex(RopePairs pairs, std::int64_t half, std::int64_t j, std::int64_t* a,
                      std::int64_t* b) {
  if (pairs == RopePairs::kHalfSplit) {
    *a = j;
    *b = j + half;
  } else {
    *a = 2 * j;
    *b = 2 * j + 1;
  }
}

template <typename T>
void RotateRowT(const RopeRowSpec& spec, const double* cos, const double* sin, const T* in,
                std::int64_t in_stride, T* out, std::int64_t out_stride) {
  using A = typename HfMath<T>::type;
  for (std::int64_t j = 0; j < spec.half; ++j) {
    std::int64_t ia, ib;
    PairIndex(spec.pairs, spec.half, j, &ia, &ib);
    const double x = Load(in, ia * in_stride);
    const double y = Load(in, ib * in_stride);
    if (spec.math == RopeMath::kAccurate) {
      Store(out, ia * out_stride, x * cos[j] - y * sin[j]);
      Store(out, ib * out_stride, y * cos[j] + x * sin[j]);
    } else {
      // q*cos + rotate_half(q)*sin: rotate_half puts -y at a and x at b.
      // cos/sin hold float32 values; HF casts them to the activation dtype.
      const A xa = static_cast<A>(x), ya = static_cast<A>(y);
      const A c = RoundTo<T>(static_cast<A>(cos[j])), s = RoundTo<T>(static_cast<A>(sin[j]));
      const A xc = RoundTo<T>(xa * c), yc = RoundTo<T>(ya * c);
      const A ys = RoundTo<T>(-ya * s), xs = RoundTo<T>(xa * s);
      Store(out, ia * out_stride, static_cast<double>(RoundTo<T>(xc + ys)));
      Store(out, ib * out_stride, static_cast<double>(RoundTo<T>(yc + xs)));
    }
  }
  if (static_cast<const void*>(in) != static_cast<const void*>(out) || in_stride != out_stride) {
    for (std::int64_t k = 2 * spec.half; k < spec.head_dim; ++k) {
      out[k * out_stride] = in[k * in_stride];
    }
  }
}

}  // namespace

void RopeTrig(const RopeTrigSpec& spec, std::int64_t pos, double* cos, double* sin) {
  if (spec.math == RopeMath::kAccurate) {
    const double p = static_cast<double>(pos);
    for (std::int64_t j = 0; j < spec.half; ++j) {
      const double angle = p * spec.inv_freq[j];
      cos[j] = std::cos(angle) * spec.attention_factor;
      sin[j] = std::sin(angle) * spec.attention_factor;
    }
    return;
  }
  const float p = static_cast<float>(pos);  // exact for |pos| < 2^24
  const float factor = static_cast<float>(spec.attention_factor);
  for (std::int64_t j = 0; j < spec.half; ++j) {
    const float angle = p * static_cast<float>(spec.inv_freq[j]);
    const float c = static_cast<float>(std::cos(static_cast<double>(angle))) * factor;
    const float s = static_cast<float>(std::sin(static_cast<double>(angle))) * factor;
    cos[j] = RoundToDType(c, spec.round_to);
    sin[j] = RoundToDType(s, spec.round_to);
  }
}

void RopeRotateRow(const RopeRowSpec& spec, const double* cos, const double* sin, const void* in,
                   std::int64_t in_stride, void* out, std::int64_t out_stride) {
  switch (spec.dtype) {
    case DType::kFloat32:
      RotateRowT(spec, cos, sin, static_cast<const float*>(in), in_stride, static_cast<float*>(out),
                 out_stride);
      break;
    case DType::kFloat64:
      RotateRowT(spec, cos, sin, static_cast<const double*>(in), in_stride,
                 static_cast<double*>(out), out_stride);
      break;
    case DType::kBFloat16:
      RotateRowT(spec, cos, sin, static_cast<const BFloat16*>(in), in_stride,
                 static_cast<BFloat16*>(out), out_stride);
      break;
    case DType::kFloat16:
      RotateRowT(spec, cos, sin, static_cast<const Float16*>(in), in_stride,
                 static_cast<Float16*>(out), out_stride);
      break;
  }
}

}  // namespace posenc::kernels::scalar
