// Learned absolute position embeddings: initialisation, .npy load/save,
// lookup (gather), backward (scatter-add), SGD step and linear resizing.
// Formulas, conventions and the references matched: include/posenc/learned.h.
// Tests: tests/unit/learned_test.cc (resize checked against torch
// F.interpolate fixtures in tests/golden/npy/).
#include "posenc/learned.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <string>

#include "posenc/error.h"
#include "posenc/npy.h"

namespace posenc {

namespace {

constexpr std::int64_t kMaxLearnedPositions = std::int64_t{1} << 24;
constexpr std::int64_t kMaxLearnedDim = std::int64_t{1} << 20;
// Rows per task in the gather loops, columns per task in the backward.
constexpr std::int64_t kRowTile = 64;
constexpr std::int64_t kColTile = 64;

void CheckSizes(std::int64_t max_positions, std::int64_t dim) {
  Require(max_positions >= 1 && max_positions <= kMaxLearnedPositions, "max_positions",
          max_positions, "a row count in [1, 2^24]");
  Require(dim >= 1 && dim <= kMaxLearnedDim, "dim", dim, "a dimension in [1, 2^20]");
  Require(max_positions * dim <= kMaxLearnedElements, "max_positions * dim", max_positions * dim,
          "at most 2^31 elements");
}

// Uniform double in [0, 1) from the top 53 bits of one 64-bit draw.
double Uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

char* ElemPtr(const TensorView& v, std::int64_t offset) {
  return static_cast<char*>(v.data) + offset * static_cast<std::int64_t>(DTypeSize(v.dtype));
}

}  // namespace

std::string_view ResizeAlignmentName(ResizeAlignment a) {
  switch (a) {
    case ResizeAlignment::kHalfPixel:
      return "half_pixel";
    case ResizeAlignment::kCorners:
      return "corners";
  }
  return "?";
}

ResizeAlignment ParseResizeAlignment(std::string_view text, std::string_view arg) {
  if (text == "half_pixel") return ResizeAlignment::kHalfPixel;
  if (text == "corners") return ResizeAlignment::kCorners;
  throw InvalidArgument(ArgMessage(arg, std::string(text),
                                   "one of half_pixel (align_corners=False), corners "
                                   "(align_corners=True)"));
}

void ValidateLearnedInitParams(const LearnedInitParams& params) {
  CheckSizes(params.max_positions, params.dim);
  // |z| of a Box-Muller draw stays below 9, so values stay far inside the
  // float32 range (3.4e38): a larger stddev would store inf.
  Require(std::isfinite(params.stddev) && params.stddev > 0.0 && params.stddev <= 1e30, "stddev",
          params.stddev, "a finite number in (0, 1e30] (the table is float32)");
}

LearnedTable::LearnedTable(std::int64_t max_positions, std::int64_t dim)
    : max_positions_(max_positions), dim_(dim) {
  CheckSizes(max_positions, dim);
  values_.assign(static_cast<std::size_t>(max_positions * dim), 0.0f);
}

LearnedTable LearnedTable::RandomNormal(const LearnedInitParams& params) {
  ValidateLearnedInitParams(params);
  LearnedTable t(params.max_positions, params.dim);
  std::mt19937_64 rng(params.seed);
  const std::size_t n = t.values_.size();
  // Box-Muller: two uniforms give two independent N(0, 1) values. u1 is
  // taken in (0, 1] so that log(u1) is finite.
  for (std::size_t k = 0; k < n; k += 2) {
    const double u1 = 1.0 - Uniform01(rng);
    const double u2 = Uniform01(rng);
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    t.values_[k] = static_cast<float>(params.stddev * radius * std::cos(angle));
    if (k + 1 < n) t.values_[k + 1] = static_cast<float>(params.stddev * radius * std::sin(angle));
  }
  return t;
}

LearnedTable LearnedTable::FromView(const TensorView& table) {
  ValidateView(table, "table", 2);
  LearnedTable t(table.shape[0], table.shape[1]);
  for (std::int64_t r = 0; r < t.max_positions_; ++r) {
    for (std::int64_t c = 0; c < t.dim_; ++c) {
      t.values_[static_cast<std::size_t>(r * t.dim_ + c)] = static_cast<float>(
          LoadAsDouble(table.data, table.dtype, r * table.strides[0] + c * table.strides[1]));
    }
  }
  return t;
}

LearnedTable LearnedTable::LoadNpy(const std::string& path) {
  const NpyArray arr = ReadNpy(path);
  arr.RequireRank(2);
  if (arr.shape[0] < 1 || arr.shape[0] > kMaxLearnedPositions || arr.shape[1] < 1 ||
      arr.shape[1] > kMaxLearnedDim) {
    throw IoError(path + ": table shape " + arr.ShapeText() +
                  " is outside [1, 2^24] positions x [1, 2^20] dims");
  }
  return FromView(arr.View());
}

void LearnedTable::SaveNpy(const std::string& path) const { WriteNpy(path, View()); }

float LearnedTable::At(std::int64_t position, std::int64_t column) const {
  if (!(position >= 0 && position < max_positions_)) {
    FailArgument("position", position,
                 "a position in [0, " + std::to_string(max_positions_ - 1) +
                     "] (max_positions = " + std::to_string(max_positions_) + ")");
  }
  if (!(column >= 0 && column < dim_)) {
    FailArgument("column", column, "a column in [0, " + std::to_string(dim_ - 1) + "]");
  }
  return values_[static_cast<std::size_t>(position * dim_ + column)];
}

TensorView LearnedTable::View() const {
  return TensorView::Contiguous(values_.data(), DType::kFloat32, {max_positions_, dim_});
}

TensorView LearnedTable::MutableView() {
  return TensorView::Contiguous(static_cast<void*>(values_.data()), DType::kFloat32,
                                {max_positions_, dim_});
}

void LearnedTable::CheckPositions(const Positions& positions, std::int64_t batch,
                                  std::int64_t seq) const {
  const std::string limit =
      "a position in [0, " + std::to_string(max_positions_ - 1) +
      "]: the learned table has max_positions = " + std::to_string(max_positions_) +
      " rows and positions past its end are not wrapped or clamped";
  if (positions.ids == nullptr) {
    Require(positions.count == 0, "positions.count", positions.count, "0 when no ids are given");
    if (!(positions.offset >= 0 && positions.offset <= max_positions_ - seq)) {
      FailArgument("positions.offset", positions.offset,
                   "offset + seq - 1 (seq = " + std::to_string(seq) + ") to be " + limit);
    }
    return;
  }
  if (!(positions.count == seq || positions.count == batch * seq)) {
    FailArgument("positions.count", positions.count,
                 "seq (" + std::to_string(seq) + ", shared by all rows) or batch*seq (" +
                     std::to_string(batch * seq) + ")");
  }
  for (std::int64_t i = 0; i < positions.count; ++i) {
    const std::int64_t p = positions.ids[i];
    if (p < 0 || p >= max_positions_) {
      throw InvalidArgument("positions[" + std::to_string(i) + "]: got " + std::to_string(p) +
                            ", expected " + limit);
    }
  }
}

void LearnedTable::Lookup(const Positions& positions, std::int64_t count, const TensorView& out,
                          const Context& ctx) const {
  Require(count >= 1, "count", count, "at least 1 position");
  CheckPositions(positions, 1, count);
  ValidateView(out, "out", 2, /*writable=*/true);
  if (out.shape[0] != count) {
    FailArgument("out.shape[0]", out.shape[0], "count (" + std::to_string(count) + ")");
  }
  if (out.shape[1] != dim_) {
    FailArgument("out.shape[1]", out.shape[1], "dim (" + std::to_string(dim_) + ")");
  }
  RequireNoOverlap(out, "out", View(), "table", /*inplace_allowed=*/false);
  const std::int64_t tiles = (count + kRowTile - 1) / kRowTile;
  ctx.ParallelFor(tiles, [&](std::int64_t tile, int) {
    const std::int64_t end = std::min(count, (tile + 1) * kRowTile);
    for (std::int64_t r = tile * kRowTile; r < end; ++r) {
      const float* src = values_.data() + positions.At(0, r, count) * dim_;
      char* row = ElemPtr(out, r * out.strides[0]);
      for (std::int64_t c = 0; c < dim_; ++c)
        StoreFromDouble(row, out.dtype, c * out.strides[1], src[c]);
    }
  });
}

void LearnedTable::AddTo(const TensorView& x, const Positions& positions,
                         const Context& ctx) const {
  ValidateView(x, "x", 3, /*writable=*/true);
  if (x.shape[2] != dim_) {
    FailArgument("x.shape[2]", x.shape[2], "dim (" + std::to_string(dim_) + ")");
  }
  const std::int64_t batch = x.shape[0], seq = x.shape[1];
  CheckPositions(positions, batch, seq);
  RequireNoOverlap(x, "x", View(), "table", /*inplace_allowed=*/false);
  ctx.ParallelFor(batch, [&](std::int64_t b, int) {
    for (std::int64_t s = 0; s < seq; ++s) {
      const float* src = values_.data() + positions.At(b, s, seq) * dim_;
      char* row = ElemPtr(x, b * x.strides[0] + s * x.strides[1]);
      for (std::int64_t c = 0; c < dim_; ++c) {
        const std::int64_t i = c * x.strides[2];
        StoreFromDouble(row, x.dtype, i, LoadAsDouble(row, x.dtype, i) + src[c]);
      }
    }
  });
}

void LearnedTable::Backward(const TensorView& d_out, const Positions& positions,
                            const TensorView& grad, const Context& ctx) const {
  ValidateView(d_out, "d_out");
  Require(d_out.rank == 2 || d_out.rank == 3, "d_out.rank", d_out.rank,
          "rank 2 [count, dim] or rank 3 [batch, seq, dim]");
  const bool rank3 = d_out.rank == 3;
  const std::int64_t batch = rank3 ? d_out.shape[0] : 1;
  const std::int64_t seq = rank3 ? d_out.shape[1] : d_out.shape[0];
  const int last = d_out.rank - 1;
  if (d_out.shape[last] != dim_) {
    FailArgument("d_out.shape[" + std::to_string(last) + "]", d_out.shape[last],
                 "dim (" + std::to_string(dim_) + ")");
  }
  CheckPositions(positions, batch, seq);
  ValidateView(grad, "grad", 2, /*writable=*/true);
  if (grad.shape[0] != max_positions_) {
    FailArgument("grad.shape[0]", grad.shape[0],
                 "max_positions (" + std::to_string(max_positions_) + ")");
  }
  if (grad.shape[1] != dim_) {
    FailArgument("grad.shape[1]", grad.shape[1], "dim (" + std::to_string(dim_) + ")");
  }
  RequireNoOverlap(grad, "grad", d_out, "d_out", /*inplace_allowed=*/false);
  RequireNoOverlap(grad, "grad", View(), "table", /*inplace_allowed=*/false);
  const std::int64_t sb = rank3 ? d_out.strides[0] : 0;
  const std::int64_t ss = rank3 ? d_out.strides[1] : d_out.strides[0];
  const std::int64_t sc = d_out.strides[last];
  // One task per column tile: tasks write disjoint columns, so repeated
  // positions need no atomics and the sum order is the token order.
  const std::int64_t tiles = (dim_ + kColTile - 1) / kColTile;
  ctx.ParallelFor(tiles, [&](std::int64_t tile, int) {
    const std::int64_t c0 = tile * kColTile, c1 = std::min(dim_, c0 + kColTile);
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t s = 0; s < seq; ++s) {
        const std::int64_t p = positions.At(b, s, seq);
        for (std::int64_t c = c0; c < c1; ++c) {
          const std::int64_t gi = p * grad.strides[0] + c * grad.strides[1];
          const double g = LoadAsDouble(d_out.data, d_out.dtype, b * sb + s * ss + c * sc);
          StoreFromDouble(grad.data, grad.dtype, gi, LoadAsDouble(grad.data, grad.dtype, gi) + g);
        }
      }
    }
  });
}

void LearnedTable::SgdStep(const TensorView& grad, double learning_rate) {
  Require(std::isfinite(learning_rate) && learning_rate > 0.0, "learning_rate", learning_rate,
          "a finite number > 0");
  ValidateView(grad, "grad", 2);
  if (grad.shape[0] != max_positions_) {
    FailArgument("grad.shape[0]", grad.shape[0],
                 "max_positions (" + std::to_string(max_positions_) + ")");
  }
  if (grad.shape[1] != dim_) {
    FailArgument("grad.shape[1]", grad.shape[1], "dim (" + std::to_string(dim_) + ")");
  }
  RequireNoOverlap(MutableView(), "table", grad, "grad", /*inplace_allowed=*/false);
  for (std::int64_t r = 0; r < max_positions_; ++r) {
    for (std::int64_t c = 0; c < dim_; ++c) {
      float& v = values_[static_cast<std::size_t>(r * dim_ + c)];
      const double g =
          LoadAsDouble(grad.data, grad.dtype, r * grad.strides[0] + c * grad.strides[1]);
      v = static_cast<float>(static_cast<double>(v) - learning_rate * g);
    }
  }
}

LearnedTable LearnedTable::Resized(std::int64_t new_max_positions,
                                   ResizeAlignment alignment) const {
  Require(new_max_positions >= 1 && new_max_positions <= kMaxLearnedPositions, "new_max_positions",
          new_max_positions, "a row count in [1, 2^24]");
  LearnedTable t(new_max_positions, dim_);
  const std::int64_t in = max_positions_;
  for (std::int64_t i = 0; i < new_max_positions; ++i) {
    double src = 0.0;
    if (alignment == ResizeAlignment::kHalfPixel) {
      const double scale = static_cast<double>(in) / static_cast<double>(new_max_positions);
      src = std::max(0.0, (static_cast<double>(i) + 0.5) * scale - 0.5);
    } else if (new_max_positions > 1) {
      src = static_cast<double>(i) * static_cast<double>(in - 1) /
            static_cast<double>(new_max_positions - 1);
    }
    const std::int64_t i0 = std::min(static_cast<std::int64_t>(std::floor(src)), in - 1);
    const std::int64_t i1 = std::min(i0 + 1, in - 1);
    const double w1 = std::clamp(src - static_cast<double>(i0), 0.0, 1.0);
    const double w0 = 1.0 - w1;
    const float* a = values_.data() + i0 * dim_;
    const float* b = values_.data() + i1 * dim_;
    float* dst = t.values_.data() + i * dim_;
    for (std::int64_t c = 0; c < dim_; ++c) {
      dst[c] = static_cast<float>(w0 * static_cast<double>(a[c]) + w1 * static_cast<double>(b[c]));
    }
  }
  return t;
}

}  // namespace posenc
