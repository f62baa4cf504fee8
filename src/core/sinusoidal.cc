// Sinusoidal absolute encodings: validation, frequencies, routing to kernels.
// Formula, paper and conventions: include/posenc/sinusoidal.h.
// Matches HF DistilBERT create_sinusoidal_embeddings (kInterleaved) and GPT-J
// create_sinusoidal_positions (kSplit): tests/golden/sinusoidal.json.
#include "posenc/sinusoidal.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/scalar/sinusoidal.h"
#include "kernels/simd/sinusoidal.h"
#include "posenc/error.h"

namespace posenc {

std::string_view SinusoidalLayoutName(SinusoidalLayout layout) {
  switch (layout) {
    case SinusoidalLayout::kInterleaved:
      return "interleaved";
    case SinusoidalLayout::kSplit:
      return "split";
    case SinusoidalLayout::kSplitTensor2Tensor:
      return "split_t2t";
  }
  return "?";
}

SinusoidalLayout ParseSinusoidalLayout(std::string_view text, std::string_view arg) {
  if (text == "interleaved") return SinusoidalLayout::kInterleaved;
  if (text == "split") return SinusoidalLayout::kSplit;
  if (text == "split_t2t") return SinusoidalLayout::kSplitTensor2Tensor;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "one of interleaved, split, split_t2t"));
}

void ValidateSinusoidalParams(const SinusoidalParams& params) {
  Require(params.dim >= 1 && params.dim <= (1 << 20), "dim", params.dim,
          "a dimension in [1, 2^20]");
  Require(std::isfinite(params.base) && params.base > 1.0, "base", params.base,
          "a finite number > 1");
  if (params.layout == SinusoidalLayout::kSplitTensor2Tensor) {
    Require(params.dim >= 4 && params.dim % 2 == 0, "dim", params.dim,
            "an even dimension >= 4 for layout split_t2t (its frequency denominator is d/2 - 1)");
  }
}

std::vector<double> SinusoidalInvFreq(const SinusoidalParams& params) {
  ValidateSinusoidalParams(params);
  const std::int64_t d = params.dim;
  const std::int64_t n = (d + 1) / 2;
  std::vector<double> inv(static_cast<std::size_t>(n));
  const double log_base = std::log(params.base);
  for (std::int64_t i = 0; i < n; ++i) {
    const double exponent = params.layout == SinusoidalLayout::kSplitTensor2Tensor
                                ? static_cast<double>(i) / static_cast<double>(d / 2 - 1)
                                : static_cast<double>(2 * i) / static_cast<double>(d);
    inv[static_cast<std::size_t>(i)] = std::exp(-exponent * log_base);
  }
  return inv;
}

namespace {

struct Rows {
  std::vector<double> inv_freq;
  kernels::scalar::SinusoidalRowSpec spec;
};

Rows MakeRows(const SinusoidalParams& params) {
  Rows r;
  r.inv_freq = SinusoidalInvFreq(params);
  r.spec.inv_freq = r.inv_freq.data();
  r.spec.num_sin = static_cast<std::int64_t>(r.inv_freq.size());
  r.spec.num_cos = params.dim / 2;
  r.spec.interleaved = params.layout == SinusoidalLayout::kInterleaved;
  return r;
}

void CheckTable(const SinusoidalParams& params, std::int64_t rows, const TensorView& out) {
  ValidateView(out, "out", 2, /*writable=*/true);
  if (out.shape[0] != rows) {
    FailArgument("out.shape[0]", out.shape[0],
                 "the number of positions (" + std::to_string(rows) + ")");
  }
  if (out.shape[1] != params.dim) {
    FailArgument("out.shape[1]", out.shape[1], "dim (" + std::to_string(params.dim) + ")");
  }
}

// Rows are split into tiles of 64 positions, one task each.
constexpr std::int64_t kRowTile = 64;

template <typename PosOf>
void FillRows(const Rows& rows, std::int64_t n, const TensorView& out, PosOf pos_of,
              const Context& ctx) {
  const std::int64_t tiles = (n + kRowTile - 1) / kRowTile;
  const std::size_t elem = DTypeSize(out.dtype);
  ctx.ParallelFor(tiles, [&](std::int64_t tile, int) {
    const std::int64_t end = std::min(n, (tile + 1) * kRowTile);
    for (std::int64_t r = tile * kRowTile; r < end; ++r) {
      void* row =
          static_cast<char*>(out.data) + r * out.strides[0] * static_cast<std::int64_t>(elem);
      kernels::scalar::SinusoidalRow(rows.spec, pos_of(r), row, out.dtype, out.strides[1],
                                     /*add=*/false);
    }
  });
}

}  // namespace

void SinusoidalTable(const SinusoidalParams& params, std::int64_t offset,
                     std::int64_t num_positions, const TensorView& out, const Context& ctx) {
  const Rows rows = MakeRows(params);
  Require(num_positions >= 1, "num_positions", num_positions, "at least 1");
  if (!(offset >= 0 && offset <= kMaxPosition - (num_positions - 1))) {
    FailArgument("offset", offset, "offset >= 0 with offset + num_positions - 1 <= 2^24 - 1");
  }
  CheckTable(params, num_positions, out);
  if (ctx.backend() != Backend::kScalar &&
      kernels::simd::SinusoidalSupported(out.dtype, out.strides[1])) {
    kernels::simd::SinusoidalRows(rows.spec, Positions::Offset(offset), num_positions, out.data,
                                  out.dtype, out.strides[0], ctx);  // SIMD fast path
    return;
  }
  FillRows(
      rows, num_positions, out, [&](std::int64_t r) { return offset + r; }, ctx);
}

void SinusoidalTableAt(const SinusoidalParams& params, const std::int64_t* positions,
                       std::int64_t count, const TensorView& out, const Context& ctx) {
  const Rows rows = MakeRows(params);
  Require(count >= 1, "count", count, "at least 1 position");
  ValidatePositions(Positions::Ids(positions, count), 1, count, "positions");
  CheckTable(params, count, out);
  if (ctx.backend() != Backend::kScalar &&
      kernels::simd::SinusoidalSupported(out.dtype, out.strides[1])) {
    kernels::simd::SinusoidalRows(rows.spec, Positions::Ids(positions, count), count, out.data,
                                  out.dtype, out.strides[0], ctx);  // SIMD fast path
    return;
  }
  FillRows(
      rows, count, out, [&](std::int64_t r) { return positions[r]; }, ctx);
}

void AddSinusoidal(const SinusoidalParams& params, const TensorView& x, const Positions& positions,
                   const Context& ctx) {
  const Rows rows = MakeRows(params);
  ValidateView(x, "x", 3, /*writable=*/true);
  if (x.shape[2] != params.dim) {
    FailArgument("x.shape[2]", x.shape[2], "dim (" + std::to_string(params.dim) + ")");
  }
  const std::int64_t batch = x.shape[0], seq = x.shape[1];
  ValidatePositions(positions, batch, seq, "positions");
  if (ctx.backend() != Backend::kScalar &&
      kernels::simd::SinusoidalSupported(x.dtype, x.strides[2])) {
    kernels::simd::AddSinusoidalRows(rows.spec, positions, batch, seq, x.data, x.dtype,
                                     x.strides[0], x.strides[1], ctx);  // SIMD fast path
    return;
  }
  const std::size_t elem = DTypeSize(x.dtype);
  ctx.ParallelFor(batch, [&](std::int64_t b, int) {
    for (std::int64_t s = 0; s < seq; ++s) {
      void* row = static_cast<char*>(x.data) +
                  (b * x.strides[0] + s * x.strides[1]) * static_cast<std::int64_t>(elem);
      kernels::scalar::SinusoidalRow(rows.spec, positions.At(b, s, seq), row, x.dtype, x.strides[2],
                                     /*add=*/true);
    }
  });
}

}  // namespace posenc
