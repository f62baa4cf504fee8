// posenc/rope_multimodal.h: RoPE with several position streams, and xPos.
//
// A multi-stream rope gives each frequency pair j its own position stream
// s(j): angle(token, j) = pos[s(j)][token] * inv_freq[j]. Rules:
//  - M-RoPE (Qwen2-VL, Wang et al. 2024; HF modeling_qwen2_vl.py
//    apply_multimodal_rotary_pos_emb): mrope_section = [t, h, w] pair counts
//    summing to rotary_dim/2; pairs [0, t) follow stream 0 (temporal),
//    [t, t+h) stream 1 (height), the rest stream 2 (width). HF doubles the
//    sections over its cat(freqs, freqs) layout, so pair j + d/2 follows the
//    same stream as j (kSectioned).
//  - interleaved M-RoPE (Qwen3-VL, HF apply_interleaved_mrope): start from
//    stream t; pairs j = 1, 4, 7, ... < 3*h take stream h, j = 2, 5, 8, ...
//    < 3*w take stream w (kInterleaved).
//  - 2-D axial RoPE for image patches (HF Qwen2-VL VisionRotaryEmbedding,
//    ggml VISION): rotary_dim/4 frequencies theta^(-2k/(rotary_dim/2)); pairs
//    [0, d/4) rotate by the row (stream 0), [d/4, d/2) by the column (stream 1)
//    with the same frequencies.
// With equal streams every rule is plain RoPE (posenc/rope.h).
//
// xPos (Sun et al. 2022, "A Length-Extrapolatable Transformer"; FlashAttention
// RotaryEmbedding(scale_base=...)): zeta_j = (2j + 0.4 d)/(1.4 d),
// power = (pos - center)/scale_base; q's cos/sin are multiplied by
// zeta_j^power, k's divided by it, so q.k decays as zeta^(m-n).
//
// Numerics: kAccurate forms the angle in float64 and rotates in float64,
// rounding once to the storage dtype (cos/sin within 1e-6 of float64 truth
// for positions in [0, 2^24)); kHF forms the angle as one float32 multiply
// and takes float32 cos/sin times the float32 attention factor (the HF
// Qwen2-VL rotary forward), then rotates in float64. Scalar implementation.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/context.h"
#include "posenc/rope.h"
#include "posenc/tensor.h"

namespace posenc {

enum class MRopeLayout : std::uint8_t { kSectioned, kInterleaved };
std::string_view MRopeLayoutName(MRopeLayout layout);  // "sectioned", "interleaved"
MRopeLayout ParseMRopeLayout(std::string_view text, std::string_view arg = "mrope_layout");

// Per-pair angle rule: inv_freq[j] and the stream it reads.
struct MultiStreamRope {
  std::int64_t head_dim = 0;      // >= rotary_dim
  std::vector<double> inv_freq;   // rotary_dim/2 entries, >= 0
  std::vector<int> stream;        // same size, each in [0, num_streams)
  int num_streams = 3;            // 2 or 3
  double attention_factor = 1.0;  // > 0, multiplies cos and sin
  RopePairing pairing = RopePairing::kHalfSplit;
  RopeNumerics numerics = RopeNumerics::kAccurate;

  std::int64_t RotaryDim() const { return 2 * static_cast<std::int64_t>(inv_freq.size()); }
};

// Throws InvalidArgument naming the field.
void ValidateMultiStreamRope(const MultiStreamRope& rope);

// M-RoPE over `frequencies` (rotary_dim/2 entries) with a 3-entry section.
MultiStreamRope MakeMRope(std::int64_t head_dim, const RopeFrequencies& frequencies,
                          const std::vector<std::int64_t>& mrope_section, MRopeLayout layout,
                          RopeNumerics numerics = RopeNumerics::kAccurate);

// 2-D axial RoPE (row, column) over rotary_dim (a multiple of 4).
MultiStreamRope MakeAxialRope2D(std::int64_t head_dim, std::int64_t rotary_dim, double theta,
                                RopeNumerics numerics = RopeNumerics::kAccurate);

// Position streams: ids[s] points at `count` ids of stream s (count == seq or
// batch*seq, as in Positions). Unused streams may be null.
struct StreamPositions {
  std::array<const std::int64_t*, 3> ids{};
  std::int64_t count = 0;
};

// cos/sin [count, rotary_dim] (any dtype) for token r of every stream, in the
// pairing's layout (half-split: cat(freqs, freqs), HF's), attention factor
// folded in.
void MultiStreamRopeCosSin(const MultiStreamRope& rope, const StreamPositions& positions,
                           const TensorView& cos, const TensorView& sin);

// Rotates x (rank 4, `layout`) in place or into `out` (x's shape and dtype,
// disjoint from x). Dims >= rotary_dim pass through.
void ApplyMultiStreamRope(const MultiStreamRope& rope, const TensorView& x, AttentionLayout layout,
                          const StreamPositions& positions,
                          RopeDirection direction = RopeDirection::kForward,
                          const TensorView* out = nullptr, const Context& ctx = Context{});

struct XPosParams {
  std::int64_t rotary_dim = 0;  // even, >= 2
  double scale_base = 512.0;    // finite, > 0
  std::int64_t center = 0;      // FA: seqlen // 2 of the cached table
};

// zeta_j = (2j + 0.4 d)/(1.4 d), j < d/2.
std::vector<double> XPosZeta(std::int64_t rotary_dim);

// Per-pair scales [count, rotary_dim/2] (any dtype): q_scale = zeta^power,
// k_scale = zeta^-power with power = (pos - center)/scale_base. Positions may
// be negative relative to center; ids in [0, 2^24).
void XPosScales(const XPosParams& params, const std::int64_t* positions, std::int64_t count,
                const TensorView& q_scale, const TensorView& k_scale);

}  // namespace posenc
