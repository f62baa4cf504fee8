// ALiBi slopes and biases: validation, the slope conventions, bias tiles.
// Formula, paper and conventions: include/posenc/alibi.h.
// Matches the paper's get_slopes (ofirpress/attention_with_linear_biases,
// fairseq/models/transformer.py) and HF Bloom build_alibi_tensor:
// tests/golden/alibi.json (tests/unit/alibi_test.cc).
// Numerics: slopes in float64 (kReference exact to 1 ulp of float64;
// kBloomFloat32 holds float32 values); biases formed in float64 and rounded
// once to the output dtype. Valid positions [0, 2^24).
// Routing: Backend::kScalar runs FillTile below (the reference); kAuto/kSimd
// run the Highway kernels of kernels/simd/bias.h (bit-identical, threaded
// over heads x 64-row tiles) whenever the columns are contiguous.
#include "posenc/alibi.h"

#include <cmath>
#include <limits>
#include <string>

#include "kernels/simd/bias.h"
#include "posenc/error.h"
#include "posenc/positions.h"

namespace posenc {

std::string_view AlibiSlopeConventionName(AlibiSlopeConvention c) {
  switch (c) {
    case AlibiSlopeConvention::kReference:
      return "reference";
    case AlibiSlopeConvention::kBloomFloat32:
      return "bloom_float32";
  }
  return "?";
}

AlibiSlopeConvention ParseAlibiSlopeConvention(std::string_view text, std::string_view arg) {
  if (text == "reference") return AlibiSlopeConvention::kReference;
  if (text == "bloom_float32") return AlibiSlopeConvention::kBloomFloat32;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "one of reference, bloom_float32"));
}

std::string_view AlibiFormName(AlibiForm form) {
  switch (form) {
    case AlibiForm::kCausal:
      return "causal";
    case AlibiForm::kSymmetric:
      return "symmetric";
  }
  return "?";
}

AlibiForm ParseAlibiForm(std::string_view text, std::string_view arg) {
  if (text == "causal") return AlibiForm::kCausal;
  if (text == "symmetric") return AlibiForm::kSymmetric;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "one of causal, symmetric"));
}

void ValidateAlibiParams(const AlibiParams& params) {
  Require(params.num_heads >= 1 && params.num_heads <= kMaxAlibiHeads, "num_heads",
          params.num_heads, "a head count in [1, 65536]");
  Require(std::isfinite(params.max_bias) && params.max_bias > 0.0, "max_bias", params.max_bias,
          "a finite number > 0 (8 is the paper's value)");
  if (params.slopes.empty()) return;
  if (!(static_cast<std::int64_t>(params.slopes.size()) == params.num_heads)) {
    FailArgument("slopes.size()", params.slopes.size(),
                 "one slope per head (num_heads = " + std::to_string(params.num_heads) +
                     ") or none (computed slopes)");
  }
  for (std::size_t h = 0; h < params.slopes.size(); ++h) {
    if (!(std::isfinite(params.slopes[h]) && params.slopes[h] >= 0.0)) {
      FailArgument("slopes[" + std::to_string(h) + "]", params.slopes[h], "a finite slope >= 0");
    }
  }
}

std::vector<double> AlibiSlopes(const AlibiParams& params) {
  ValidateAlibiParams(params);
  if (!params.slopes.empty()) return params.slopes;
  const std::int64_t heads = params.num_heads;
  std::int64_t n = 1;
  while (n * 2 <= heads) n *= 2;
  const double nd = static_cast<double>(n);
  std::vector<double> slopes(static_cast<std::size_t>(heads));
  if (params.convention == AlibiSlopeConvention::kReference) {
    // m0^(h+1) = 2^(-max_bias*(h+1)/n): one exp2 of the exact exponent is
    // correctly rounded to within 1 ulp, unlike repeated multiplication.
    for (std::int64_t h = 0; h < heads; ++h) {
      const double exponent =
          h < n ? static_cast<double>(h + 1) * params.max_bias / nd
                : static_cast<double>(2 * (h - n) + 1) * (params.max_bias / 2.0) / nd;
      slopes[static_cast<std::size_t>(h)] = std::exp2(-exponent);
    }
    return slopes;
  }
  // Bloom: base rounded to float32, torch.pow(base, k) in float32; we take
  // base^k in float64 from the float32 base and round once to float32.
  const double base = static_cast<float>(std::exp2(-params.max_bias / nd));
  const double extra_base = static_cast<float>(std::exp2(-(params.max_bias / 2.0) / nd));
  for (std::int64_t h = 0; h < heads; ++h) {
    const double value = h < n ? std::pow(base, static_cast<double>(h + 1))
                               : std::pow(extra_base, static_cast<double>(2 * (h - n) + 1));
    slopes[static_cast<std::size_t>(h)] = static_cast<float>(value);
  }
  return slopes;
}

double AlibiBiasValue(double slope, AlibiForm form, std::int64_t query_pos, std::int64_t key_pos) {
  const std::int64_t distance = query_pos - key_pos;
  if (form == AlibiForm::kCausal) {
    if (distance < 0) return -std::numeric_limits<double>::infinity();
    return 0.0 - slope * static_cast<double>(distance);  // +0 on the diagonal, not -0
  }
  return 0.0 - slope * static_cast<double>(distance < 0 ? -distance : distance);
}

namespace {

void ValidateSlopes(const std::vector<double>& slopes) {
  Require(!slopes.empty() && static_cast<std::int64_t>(slopes.size()) <= kMaxAlibiHeads,
          "slopes.size()", slopes.size(), "one slope per head, 1 to 65536 heads");
  for (std::size_t h = 0; h < slopes.size(); ++h) {
    RequireAt(std::isfinite(slopes[h]) && slopes[h] >= 0.0, "slopes", static_cast<std::int64_t>(h),
              slopes[h], "a finite slope >= 0");
  }
}

// "[a, b)" (built by appending: GCC 12's -Wrestrict misfires on "[" + std::string).
std::string RangeText(std::int64_t a, std::int64_t b) {
  std::string s(1, '[');
  s.append(std::to_string(a)).append(", ").append(std::to_string(b)).push_back(')');
  return s;
}

void ValidateGeometry(const AlibiGeometry& g) {
  Require(g.query_len >= 1 && g.query_len <= kMaxPosition + 1, "query_len", g.query_len,
          "a length in [1, 2^24]");
  if (!(g.key_len >= g.query_len && g.key_len <= kMaxPosition + 1)) {
    FailArgument("key_len", g.key_len,
                 "a length in [query_len = " + std::to_string(g.query_len) +
                     ", 2^24] (queries are bottom-right aligned)");
  }
}

// Writes rows x cols cells of head `slope` starting at (row0, col0).
void FillTile(double slope, const AlibiGeometry& g, std::int64_t row0, std::int64_t rows,
              std::int64_t col0, std::int64_t cols, void* data, DType dtype,
              std::int64_t row_stride, std::int64_t col_stride) {
  const std::int64_t shift = g.key_len - g.query_len;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t qpos = shift + row0 + r;
    for (std::int64_t c = 0; c < cols; ++c) {
      StoreFromDouble(data, dtype, r * row_stride + c * col_stride,
                      AlibiBiasValue(slope, g.form, qpos, col0 + c));
    }
  }
}

kernels::simd::BiasMask KernelMask(AlibiForm form) {
  return form == AlibiForm::kCausal ? kernels::simd::BiasMask::kCausal
                                    : kernels::simd::BiasMask::kNone;
}

}  // namespace

void AlibiBiasTile(const std::vector<double>& slopes, const AlibiGeometry& geometry,
                   const AlibiTile& tile, const TensorView& out, const Context& ctx) {
  ValidateSlopes(slopes);
  ValidateGeometry(geometry);
  const auto heads = static_cast<std::int64_t>(slopes.size());
  if (!(tile.head >= 0 && tile.head < heads)) {
    FailArgument("tile.head", tile.head, "a head in [0, " + std::to_string(heads) + ")");
  }
  if (!(tile.row_begin >= 0 && tile.row_begin < tile.row_end &&
        tile.row_end <= geometry.query_len)) {
    FailArgument(
        "tile rows", RangeText(tile.row_begin, tile.row_end),
        "a non-empty range within [0, query_len = " + std::to_string(geometry.query_len) + ")");
  }
  if (!(tile.col_begin >= 0 && tile.col_begin < tile.col_end && tile.col_end <= geometry.key_len)) {
    FailArgument(
        "tile cols", RangeText(tile.col_begin, tile.col_end),
        "a non-empty range within [0, key_len = " + std::to_string(geometry.key_len) + ")");
  }
  ValidateView(out, "out", 2, /*writable=*/true);
  const std::int64_t rows = tile.row_end - tile.row_begin, cols = tile.col_end - tile.col_begin;
  if (!(out.shape[0] == rows && out.shape[1] == cols)) {
    FailArgument("out", out.Describe(),
                 "shape [" + std::to_string(rows) + ", " + std::to_string(cols) + "] (the tile)");
  }
  if (ctx.backend() != Backend::kScalar &&
      kernels::simd::BiasSupported(out.dtype, out.strides[1])) {
    const kernels::simd::AlibiRowsSpec spec{&slopes[static_cast<std::size_t>(tile.head)],
                                            1,
                                            KernelMask(geometry.form),
                                            geometry.key_len - geometry.query_len + tile.row_begin,
                                            rows,
                                            tile.col_begin,
                                            cols};
    kernels::simd::AlibiRows(spec, out.data, out.dtype, 0, out.strides[0], ctx);  // SIMD fast path
    return;
  }
  FillTile(slopes[static_cast<std::size_t>(tile.head)], geometry, tile.row_begin, rows,
           tile.col_begin, cols, out.data, out.dtype, out.strides[0], out.strides[1]);
}

void AlibiBiasMatrix(const std::vector<double>& slopes, const AlibiGeometry& geometry,
                     const TensorView& out, const Context& ctx) {
  ValidateSlopes(slopes);
  ValidateGeometry(geometry);
  ValidateView(out, "out", 3, /*writable=*/true);
  const auto heads = static_cast<std::int64_t>(slopes.size());
  if (!(out.shape[0] == heads && out.shape[1] == geometry.query_len &&
        out.shape[2] == geometry.key_len)) {
    FailArgument("out", out.Describe(),
                 "shape [heads = " + std::to_string(heads) +
                     ", query_len = " + std::to_string(geometry.query_len) +
                     ", key_len = " + std::to_string(geometry.key_len) + "]");
  }
  if (ctx.backend() != Backend::kScalar &&
      kernels::simd::BiasSupported(out.dtype, out.strides[2])) {
    const kernels::simd::AlibiRowsSpec spec{
        slopes.data(),      heads, KernelMask(geometry.form), geometry.key_len - geometry.query_len,
        geometry.query_len, 0,     geometry.key_len};
    kernels::simd::AlibiRows(spec, out.data, out.dtype, out.strides[0], out.strides[1],
                             ctx);  // SIMD fast path
    return;
  }
  const std::size_t elem = DTypeSize(out.dtype);
  ctx.ParallelFor(heads, [&](std::int64_t h, int) {
    void* base =
        static_cast<char*>(out.data) + h * out.strides[0] * static_cast<std::int64_t>(elem);
    FillTile(slopes[static_cast<std::size_t>(h)], geometry, 0, geometry.query_len, 0,
             geometry.key_len, base, out.dtype, out.strides[1], out.strides[2]);
  });
}

void BloomAlibiTensor(const std::vector<double>& slopes, const std::int64_t* attention_mask,
                      std::int64_t batch, std::int64_t seq, const TensorView& out) {
  ValidateSlopes(slopes);
  Require(attention_mask != nullptr, "attention_mask", "null", "a [batch, seq] 0/1 mask");
  Require(batch >= 1, "batch", batch, "at least 1");
  Require(seq >= 1 && seq <= kMaxPosition + 1, "seq", seq, "a length in [1, 2^24]");
  for (std::int64_t i = 0; i < batch * seq; ++i) {
    if (!(attention_mask[i] == 0 || attention_mask[i] == 1)) {
      FailArgument("attention_mask[" + std::to_string(i) + "]", attention_mask[i], "0 or 1");
    }
  }
  ValidateView(out, "out", 3, /*writable=*/true);
  const auto heads = static_cast<std::int64_t>(slopes.size());
  if (!(out.shape[0] == batch * heads && out.shape[1] == 1 && out.shape[2] == seq)) {
    FailArgument("out", out.Describe(),
                 "shape [batch*heads = " + std::to_string(batch * heads) +
                     ", 1, seq = " + std::to_string(seq) + "]");
  }
  for (std::int64_t b = 0; b < batch; ++b) {
    std::int64_t cumsum = 0;
    for (std::int64_t j = 0; j < seq; ++j) {
      const std::int64_t m = attention_mask[b * seq + j];
      cumsum += m;
      const double key_index = static_cast<double>((cumsum - 1) * m);
      for (std::int64_t h = 0; h < heads; ++h) {
        StoreFromDouble(out.data, out.dtype, (b * heads + h) * out.strides[0] + j * out.strides[2],
                        slopes[static_cast<std::size_t>(h)] * key_index);
      }
    }
  }
}

}  // namespace posenc
