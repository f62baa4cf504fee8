// posenc/sinusoidal.h: fixed sinusoidal absolute encodings.
//
// Vaswani et al. 2017, "Attention Is All You Need", section 3.5:
//   PE(pos, 2i)   = sin(pos / base^(2i/d))
//   PE(pos, 2i+1) = cos(pos / base^(2i/d)),   base = 10000.
// Conventions in real use differ only in where the sines and cosines go and
// in the frequency denominator; each is a named SinusoidalLayout:
//  - kInterleaved: the formula above (sin, cos, sin, cos, ...). HF DistilBERT
//    create_sinusoidal_embeddings. Odd d: the last column is a sine.
//  - kSplit: all sines then all cosines, frequency i = base^(-2i/d), i <
//    ceil(d/2). GPT-J create_sinusoidal_positions, Transformer-XL. Odd d: the
//    sines use all ceil(d/2) frequencies, the cosines the first floor(d/2).
//  - kSplitTensor2Tensor: [sin | cos] with frequency i = base^(-i/(d/2 - 1))
//    (tensor2tensor get_timing_signal_1d, gemma.cpp
//    AddAbsolutePositionalEmbeddings). Needs even d >= 4.
//
// Numerics (every output dtype): the table is computed in float64 (angle =
// pos * inv_freq in float64, std::sin/std::cos) and rounded once to the
// output dtype, so a float32 table is within 1e-6 (in fact 6e-8 + 2^-24) of
// float64 truth for every position in [0, 2^24). Valid positions: [0, 2^24).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/context.h"
#include "posenc/positions.h"
#include "posenc/scheme.h"
#include "posenc/tensor.h"

namespace posenc {

enum class SinusoidalLayout : std::uint8_t { kInterleaved, kSplit, kSplitTensor2Tensor };

std::string_view SinusoidalLayoutName(
    SinusoidalLayout layout);  // "interleaved", "split", "split_t2t"
SinusoidalLayout ParseSinusoidalLayout(std::string_view text, std::string_view arg = "layout");

struct SinusoidalParams {
  std::int64_t dim = 0;   // d >= 1
  double base = 10000.0;  // finite, > 1
  SinusoidalLayout layout = SinusoidalLayout::kInterleaved;
};

// Throws InvalidArgument if a field is out of range.
void ValidateSinusoidalParams(const SinusoidalParams& params);

// Frequencies (radians per position) of column pairs, in float64.
std::vector<double> SinusoidalInvFreq(const SinusoidalParams& params);

// out[r, :] = PE(offset + r) for r < num_positions; out is [num_positions,
// dim] of any dtype (strided allowed).
void SinusoidalTable(const SinusoidalParams& params, std::int64_t offset,
                     std::int64_t num_positions, const TensorView& out,
                     const Context& ctx = Context{});

// out[r, :] = PE(positions[r]); out is [count, dim].
void SinusoidalTableAt(const SinusoidalParams& params, const std::int64_t* positions,
                       std::int64_t count, const TensorView& out, const Context& ctx = Context{});

// x[b, s, :] += PE(pos(b, s)) in place; x is [batch, seq, dim].
void AddSinusoidal(const SinusoidalParams& params, const TensorView& x, const Positions& positions,
                   const Context& ctx = Context{});

// The attention scheme of absolute encodings ("absolute"): sinusoidal or
// learned encodings were added to the inputs before the projections, so
// attention adds no positional term.
PositionScheme AbsoluteScheme();

}  // namespace posenc
