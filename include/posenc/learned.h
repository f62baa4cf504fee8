// posenc/learned.h: learned absolute position embeddings (BERT, GPT-2).
//
// A learned table E of shape [max_positions, d] (BERT `position_embeddings`,
// GPT-2 `wpe`; Devlin et al. 2018, Radford et al. 2019) is a trainable
// parameter: token s of row b reads E[pos(b, s)] and the model adds it to the
// token embedding. Conventions matched:
//  - initialisation N(0, 0.02^2): HF BertPreTrainedModel / GPT2PreTrainedModel
//    `_init_weights` with initializer_range 0.02 (values differ from torch's
//    RNG; only the distribution is the same);
//  - lookup = torch.nn.Embedding forward (a row gather); its backward is the
//    scatter-add of dOut into a gradient table (Embedding's dense gradient);
//  - positions past the end are an error (HF raises an IndexError from
//    index_select); there is no wrap and no clamp;
//  - Resized(): linear interpolation along the position axis, exactly
//    torch.nn.functional.interpolate(E.T[None], size=new_len, mode='linear',
//    align_corners=False) transposed back (kHalfPixel), or align_corners=True
//    (kCorners). This is the 1-D analogue of ViT's interpolate_pos_encoding and
//    a common way to extend BERT's 512-row table; it is a heuristic starting
//    point for fine-tuning, not an extrapolation the model was trained for.
//
// Storage is float32, row-major. Numerics: lookup and add are exact copies /
// one float32-or-wider add per element; the backward accumulates in float64
// per element before storing to the gradient's dtype; Resized() computes the
// source coordinate in float64 (torch computes it in float32, which moves
// values by at most ~1e-7 relative). Valid positions: [0, max_positions).
//
// Random initialisation is portable: std::mt19937_64 (its output sequence is
// fixed by the C++ standard) feeds a hand-written Box-Muller transform, rather
// than std::normal_distribution whose algorithm is implementation-defined and
// differs between libstdc++, libc++ and MSVC. Element k of the row-major table
// uses normal number k, so the first rows of a longer table equal a shorter
// table with the same seed and dim. Only std::log/cos/sin last-bit
// differences between C libraries could change a value, and those vanish when
// the float64 result is rounded to float32 except in rare ties.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/context.h"
#include "posenc/positions.h"
#include "posenc/tensor.h"

namespace posenc {

// Largest table accepted: max_positions <= 2^24, dim <= 2^20, and at most
// 2^31 elements in all (8 GiB of float32).
inline constexpr std::int64_t kMaxLearnedElements = std::int64_t{1} << 31;

struct LearnedInitParams {
  std::int64_t max_positions = 0;  // rows, in [1, 2^24] (BERT 512, GPT-2 1024)
  std::int64_t dim = 0;            // columns, in [1, 2^20] (hidden size, 768)
  double stddev = 0.02;            // in (0, 1e30] (HF initializer_range)
  std::uint64_t seed = 0;          // std::mt19937_64 seed
};

// Throws InvalidArgument naming the field.
void ValidateLearnedInitParams(const LearnedInitParams& params);

// How Resized() maps new rows onto old ones.
enum class ResizeAlignment : std::uint8_t {
  // torch align_corners=False: src = (i + 0.5) * old/new - 0.5, clamped at 0.
  kHalfPixel,
  // torch align_corners=True: src = i * (old - 1)/(new - 1) (0 when new == 1).
  kCorners,
};
std::string_view ResizeAlignmentName(ResizeAlignment a);  // "half_pixel", "corners"
ResizeAlignment ParseResizeAlignment(std::string_view text, std::string_view arg = "alignment");

class LearnedTable {
 public:
  // A zero-filled table. Throws InvalidArgument for sizes out of range.
  LearnedTable(std::int64_t max_positions, std::int64_t dim);
  // N(0, stddev^2) from the seed (see the header comment for portability).
  static LearnedTable RandomNormal(const LearnedInitParams& params);
  // Copies a [max_positions, dim] view of any float dtype (any strides).
  static LearnedTable FromView(const TensorView& table);
  // Loads a rank-2 float32/float64/float16 .npy file (IoError naming the file
  // for a missing or malformed file, another dtype or rank != 2).
  static LearnedTable LoadNpy(const std::string& path);
  // Saves as a float32 [max_positions, dim] .npy file.
  void SaveNpy(const std::string& path) const;

  std::int64_t max_positions() const { return max_positions_; }
  std::int64_t dim() const { return dim_; }
  // Row-major [max_positions, dim] values.
  const std::vector<float>& values() const { return values_; }
  float At(std::int64_t position, std::int64_t column) const;
  // Contiguous float32 views of the table (the mutable one is for optimisers
  // and for filling the table from trained weights).
  TensorView View() const;
  TensorView MutableView();

  // Forward: out[r, :] = E[pos(0, r)] for r < count; out is [count, dim], any
  // dtype, strided allowed. Throws InvalidArgument naming the first position
  // outside [0, max_positions) and the limit.
  void Lookup(const Positions& positions, std::int64_t count, const TensorView& out,
              const Context& ctx = Context{}) const;
  // Forward, added: x[b, s, :] += E[pos(b, s)]; x is [batch, seq, dim].
  void AddTo(const TensorView& x, const Positions& positions, const Context& ctx = Context{}) const;

  // Backward of Lookup/AddTo: grad[pos(b, s), :] += d_out[b, s, :] for every
  // token (scatter-add; repeated positions accumulate). d_out is [count, dim]
  // (the Lookup case, batch 1) or [batch, seq, dim]; grad is [max_positions,
  // dim] of any dtype, accumulated into (zero it first for a fresh gradient).
  // Deterministic: each column is summed in token order.
  void Backward(const TensorView& d_out, const Positions& positions, const TensorView& grad,
                const Context& ctx = Context{}) const;

  // Plain SGD: E -= learning_rate * grad; grad is [max_positions, dim].
  void SgdStep(const TensorView& grad, double learning_rate);

  // A new table of new_max_positions rows interpolated linearly along the
  // position axis (see ResizeAlignment and the header comment).
  LearnedTable Resized(std::int64_t new_max_positions,
                       ResizeAlignment alignment = ResizeAlignment::kHalfPixel) const;

 private:
  void CheckPositions(const Positions& positions, std::int64_t batch, std::int64_t seq) const;

  std::int64_t max_positions_;
  std::int64_t dim_;
  std::vector<float> values_;
};

}  // namespace posenc
