// Helpers shared by the RoPE core tests (rope_test.cc, rope_bad_input_test.cc).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "posenc/rope.h"

namespace posenc::test {

// A contiguous rank-4 tensor of any dtype holding [d0, d1, d2, d3].
struct Tensor4 {
  Tensor4(DType dt, std::int64_t d0, std::int64_t d1, std::int64_t d2, std::int64_t d3)
      : dtype(dt),
        shape{d0, d1, d2, d3},
        bytes(static_cast<std::size_t>(d0 * d1 * d2 * d3) * DTypeSize(dt) + 8) {}
  DType dtype;
  std::int64_t shape[4];
  std::vector<unsigned char> bytes;
  std::int64_t Size() const { return shape[0] * shape[1] * shape[2] * shape[3]; }
  std::int64_t Index(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) const {
    return ((a * shape[1] + b) * shape[2] + c) * shape[3] + d;
  }
  double Get(std::int64_t i) const { return LoadAsDouble(bytes.data(), dtype, i); }
  void Set(std::int64_t i, double v) { StoreFromDouble(bytes.data(), dtype, i, v); }
  std::vector<double> Values() const {
    std::vector<double> v(static_cast<std::size_t>(Size()));
    for (std::int64_t i = 0; i < Size(); ++i) v[static_cast<std::size_t>(i)] = Get(i);
    return v;
  }
  TensorView View() {
    return TensorView::Contiguous(bytes.data(), dtype, {shape[0], shape[1], shape[2], shape[3]});
  }
};

inline RopeParams Params(std::int64_t head_dim, std::int64_t rotary_dim, RopePairing pairing,
                         RopeNumerics numerics, double theta = 10000.0) {
  RopeParams p;
  p.head_dim = head_dim;
  p.rotary_dim = rotary_dim;
  p.theta = theta;
  p.pairing = pairing;
  p.numerics = numerics;
  return p;
}

// The rope_apply.json input formula, generalised to batch rows; stored as
// [B, H, S, D] (bhsd) or [B, S, H, D] (bshd).
inline double InputValue(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d) {
  return std::sin(0.37 * static_cast<double>(h * 1000 + s * 100 + d) + 0.11 + 0.7 * b);
}

inline Tensor4 MakeInput(DType dt, AttentionLayout layout, std::int64_t batch, std::int64_t heads,
                         std::int64_t seq, std::int64_t dim) {
  const bool bhsd = layout == AttentionLayout::kBHSD;
  Tensor4 t(dt, batch, bhsd ? heads : seq, bhsd ? seq : heads, dim);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t s = 0; s < seq; ++s)
        for (std::int64_t d = 0; d < dim; ++d)
          t.Set(bhsd ? t.Index(b, h, s, d) : t.Index(b, s, h, d), InputValue(b, h, s, d));
  return t;
}

}  // namespace posenc::test
