// posenc/alibi.h: ALiBi, attention with linear biases.
//
// Press, Smith, Lewis 2022, "Train Short, Test Long: Attention with Linear
// Biases Enables Input Length Extrapolation", https://arxiv.org/abs/2108.12409.
// Head h adds  -slope[h] * |i - j|  to the (already scaled) score of query
// position i and key position j; no embedding is added to the tokens.
//
// Slopes (AlibiSlopeConvention), n = the largest power of two <= H:
//  - kReference: m0 = 2^(-max_bias/n), m1 = 2^(-(max_bias/2)/n);
//      slope[h] = m0^(h+1)            for h < n
//      slope[h] = m1^(2(h-n)+1)       for n <= h < H
//    With max_bias = 8 this is the paper's get_slopes (the geometric series
//    2^(-8k/n), then every other slope of the 2n-head series), HF Bloom's
//    build_alibi_tensor, MPT, TransformerEngine, x-transformers; the max_bias
//    generalisation is ggml's (ggml_soft_max_ext). Values are exact float64
//    (each slope is exp2 of an exact exponent, correctly rounded to 1 ulp).
//    float32(slope) matches the paper's torch.Tensor(get_slopes(n)) within
//    2.5e-7 relative and Bloom's float32 slopes within 4e-6 relative.
//  - kBloomFloat32: Bloom's float32 recipe: base = float32(m0) (and float32(m1)),
//    slope = float32(base^k) with base^k evaluated in float64 from the float32
//    base. Reproduces HF Bloom within 1 ulp of float32 for every H
//    (tests/golden/alibi.json, README section "Bloom vs paper").
//  - Explicit slopes (AlibiParams::slopes, one per head) override both.
//
// Bias forms (AlibiForm), positions bottom-right aligned: with query length
// Sq and key length Sk, query row i sits at position Sk - Sq + i and key j at
// j (the KV-cache / FlashAttention-2 / TransformerEngine convention):
//  - kCausal: bias = -slope * (i' - j) for visible keys j <= i' (i' the query
//    position); keys in the future are masked: -infinity.
//  - kSymmetric (encoders): bias = -slope * |i' - j| for every key.
// The bias is formed in float64 (slope * distance, one rounding when the
// output is float32/16-bit) and is exact for float64 output. Valid positions
// [0, 2^24). Masked cells hold -infinity in every dtype.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/context.h"
#include "posenc/scheme.h"
#include "posenc/tensor.h"

namespace posenc {

enum class AlibiSlopeConvention : std::uint8_t { kReference, kBloomFloat32 };
enum class AlibiForm : std::uint8_t { kCausal, kSymmetric };

std::string_view AlibiSlopeConventionName(AlibiSlopeConvention c);  // "reference", "bloom_float32"
AlibiSlopeConvention ParseAlibiSlopeConvention(std::string_view text,
                                               std::string_view arg = "convention");
std::string_view AlibiFormName(AlibiForm form);  // "causal", "symmetric"
AlibiForm ParseAlibiForm(std::string_view text, std::string_view arg = "form");

// Largest number of heads accepted.
inline constexpr std::int64_t kMaxAlibiHeads = 65536;

struct AlibiParams {
  std::int64_t num_heads = 0;  // H in [1, kMaxAlibiHeads]
  double max_bias = 8.0;       // finite, > 0 (8 is the paper's value)
  AlibiSlopeConvention convention = AlibiSlopeConvention::kReference;
  // Explicit per-head slopes: empty = computed from max_bias/convention;
  // otherwise exactly num_heads finite values >= 0 (0 leaves a head unbiased,
  // as x-transformers does for heads past `heads`).
  std::vector<double> slopes;
};

// Throws InvalidArgument naming the field (num_heads, max_bias, slopes).
void ValidateAlibiParams(const AlibiParams& params);

// The H slopes in effect (explicit, or computed as documented above).
std::vector<double> AlibiSlopes(const AlibiParams& params);

// Bias of one cell: -slope*(query_pos - key_pos) (kCausal, -infinity when
// key_pos > query_pos) or -slope*|query_pos - key_pos| (kSymmetric), float64.
// Unchecked (an inline formula for kernels and tests).
double AlibiBiasValue(double slope, AlibiForm form, std::int64_t query_pos, std::int64_t key_pos);

// Shape of the [Sq, Sk] score matrix the bias applies to.
struct AlibiGeometry {
  std::int64_t query_len = 0;  // Sq >= 1
  std::int64_t key_len = 0;    // Sk >= Sq (bottom-right alignment), <= 2^24
  AlibiForm form = AlibiForm::kCausal;
};

// Rows [row_begin, row_end) x cols [col_begin, col_end) of head `head`.
struct AlibiTile {
  std::int64_t head = 0;
  std::int64_t row_begin = 0, row_end = 0;
  std::int64_t col_begin = 0, col_end = 0;
};

// Computes one tile of the bias on demand: out is [rows, cols] (any dtype,
// strided allowed), out[r, c] = bias of query row row_begin + r and key
// col_begin + c of head tile.head. slopes has one entry per head.
// ctx.backend(): kScalar = the reference loops; kAuto/kSimd = the Highway
// kernel (bit-identical; used when out's columns are contiguous), split
// into 64-row tasks over ctx's threads.
void AlibiBiasTile(const std::vector<double>& slopes, const AlibiGeometry& geometry,
                   const AlibiTile& tile, const TensorView& out, const Context& ctx = Context{});

// Fills the whole bias, out is [H, Sq, Sk] (any dtype). Only for callers
// that want it materialised (pictures, the CLI, comparisons, HF-style
// materialised masks); attention computes tiles on demand. Backend and
// threads as AlibiBiasTile (tasks: heads x 64-row tiles).
void AlibiBiasMatrix(const std::vector<double>& slopes, const AlibiGeometry& geometry,
                     const TensorView& out, const Context& ctx = Context{});

// HF Bloom's build_alibi_tensor: with a padding mask [batch, seq] (0/1),
// out[b*H + h, 0, j] = slope[h] * ((cumsum(mask[b])[j] - 1) * mask[b][j]),
// the key-index form (a +slope*key_index bias that equals -slope*(i - j)
// after the softmax's shift invariance). out is [batch*H, 1, seq], any
// dtype; the product is formed in float64 and rounded once, so with
// kBloomFloat32 slopes and float32 output it is Bloom's tensor bit for bit.
void BloomAlibiTensor(const std::vector<double>& slopes, const std::int64_t* attention_mask,
                      std::int64_t batch, std::int64_t seq, const TensorView& out);

// The attention scheme "alibi": bias -slope[h] * |p - r| (unscaled), one
// slope per query head (finite, >= 0), e.g. AlibiSlopes(params). The scheme
// owns its copy of the slopes.
PositionScheme AlibiScheme(std::vector<double> slopes);

}  // namespace posenc
