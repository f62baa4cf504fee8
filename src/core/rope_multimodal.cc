// Multi-stream RoPE (M-RoPE, interleaved M-RoPE, 2-D axial) and xPos scales.
// Formulas, papers, conventions and numerics: include/posenc/rope_multimodal.h.
//
// Reference implementations matched: HF transformers (commit c49429ed)
// modeling_qwen2_vl.py (apply_multimodal_rotary_pos_emb, VisionRotaryEmbedding),
// modeling_qwen3_vl.py (apply_interleaved_mrope); FlashAttention
// flash_attn/layers/rotary.py (xPos scale). Scalar code: the angle is formed
// per (token, pair) and the rotation done in float64, rounded once to the
// storage dtype. Valid positions: [0, 2^24) in every stream.
#include "posenc/rope_multimodal.h"

#include <cmath>
#include <string>

#include "posenc/error.h"
#include "posenc/positions.h"

namespace posenc {

namespace {

struct CosSinPair {
  double c, s;
};

CosSinPair AngleCosSin(const MultiStreamRope& rope, std::int64_t pos, std::size_t j) {
  if (rope.numerics == RopeNumerics::kHF) {
    const float a = static_cast<float>(pos) * static_cast<float>(rope.inv_freq[j]);
    const float af = static_cast<float>(rope.attention_factor);
    return {static_cast<double>(static_cast<float>(std::cos(static_cast<double>(a))) * af),
            static_cast<double>(static_cast<float>(std::sin(static_cast<double>(a))) * af)};
  }
  const double a = static_cast<double>(pos) * rope.inv_freq[j];
  return {std::cos(a) * rope.attention_factor, std::sin(a) * rope.attention_factor};
}

// Validates the streams the rule reads for a [batch, seq] set of tokens.
void CheckStreams(const MultiStreamRope& rope, const StreamPositions& positions, std::int64_t batch,
                  std::int64_t seq) {
  std::array<bool, 3> used{};
  for (int s : rope.stream) used[static_cast<std::size_t>(s)] = true;
  for (std::size_t s = 0; s < 3; ++s) {
    if (!used[s]) continue;
    const std::string arg = "positions.ids[" + std::to_string(s) + "]";
    Require(positions.ids[s] != nullptr, arg, "null",
            "position ids for every stream the rule reads");
    ValidatePositions(Positions::Ids(positions.ids[s], positions.count), batch, seq, arg);
  }
}

std::int64_t StreamPos(const StreamPositions& p, int stream, std::int64_t b, std::int64_t s,
                       std::int64_t seq) {
  return Positions::Ids(p.ids[static_cast<std::size_t>(stream)], p.count).At(b, s, seq);
}

// Column pair of frequency j in a row of width d.
std::pair<std::int64_t, std::int64_t> Columns(RopePairing pairing, std::int64_t j, std::int64_t d) {
  return pairing == RopePairing::kHalfSplit ? std::pair{j, j + d / 2} : std::pair{2 * j, 2 * j + 1};
}

}  // namespace

std::string_view MRopeLayoutName(MRopeLayout layout) {
  return layout == MRopeLayout::kSectioned ? "sectioned" : "interleaved";
}

MRopeLayout ParseMRopeLayout(std::string_view text, std::string_view arg) {
  if (text == "sectioned") return MRopeLayout::kSectioned;
  if (text == "interleaved") return MRopeLayout::kInterleaved;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "one of sectioned, interleaved"));
}

void ValidateMultiStreamRope(const MultiStreamRope& rope) {
  Require(!rope.inv_freq.empty(), "inv_freq", "(empty)", "at least one frequency");
  Require(rope.num_streams == 2 || rope.num_streams == 3, "num_streams", rope.num_streams,
          "2 or 3");
  Require(rope.head_dim >= rope.RotaryDim() && rope.head_dim <= (1 << 16), "head_dim",
          rope.head_dim,
          "an integer in [rotary_dim=" + std::to_string(rope.RotaryDim()) + ", 65536]");
  Require(rope.stream.size() == rope.inv_freq.size(), "stream size", rope.stream.size(),
          "inv_freq size (" + std::to_string(rope.inv_freq.size()) + ")");
  for (std::size_t j = 0; j < rope.inv_freq.size(); ++j) {
    Require(std::isfinite(rope.inv_freq[j]) && rope.inv_freq[j] >= 0.0,
            "inv_freq[" + std::to_string(j) + "]", rope.inv_freq[j], "a finite number >= 0");
    Require(rope.stream[j] >= 0 && rope.stream[j] < rope.num_streams,
            "stream[" + std::to_string(j) + "]", rope.stream[j],
            "a stream index in [0, " + std::to_string(rope.num_streams) + ")");
  }
  Require(std::isfinite(rope.attention_factor) && rope.attention_factor > 0.0, "attention_factor",
          rope.attention_factor, "a finite number > 0");
}

MultiStreamRope MakeMRope(std::int64_t head_dim, const RopeFrequencies& frequencies,
                          const std::vector<std::int64_t>& mrope_section, MRopeLayout layout,
                          RopeNumerics numerics) {
  Require(mrope_section.size() == 3, "mrope_section size", mrope_section.size(),
          "3 (temporal, height, width)");
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    Require(mrope_section[i] >= 0, "mrope_section[" + std::to_string(i) + "]", mrope_section[i],
            "an integer >= 0");
    sum += mrope_section[i];
  }
  const auto pairs = static_cast<std::int64_t>(frequencies.inv_freq.size());
  Require(sum == pairs, "mrope_section sum", sum,
          "rotary_dim/2 = " + std::to_string(pairs) + " (one entry per frequency pair)");
  MultiStreamRope rope;
  rope.head_dim = head_dim;
  rope.inv_freq = frequencies.inv_freq;
  rope.attention_factor = frequencies.attention_factor;
  rope.num_streams = 3;
  rope.numerics = numerics;
  rope.stream.resize(static_cast<std::size_t>(pairs));
  for (std::int64_t j = 0; j < pairs; ++j) {
    int s = 0;
    if (layout == MRopeLayout::kSectioned) {
      s = j < mrope_section[0] ? 0 : j < mrope_section[0] + mrope_section[1] ? 1 : 2;
    } else if (j % 3 == 1 && j < 3 * mrope_section[1]) {
      s = 1;
    } else if (j % 3 == 2 && j < 3 * mrope_section[2]) {
      s = 2;
    }
    rope.stream[static_cast<std::size_t>(j)] = s;
  }
  ValidateMultiStreamRope(rope);
  return rope;
}

MultiStreamRope MakeAxialRope2D(std::int64_t head_dim, std::int64_t rotary_dim, double theta,
                                RopeNumerics numerics) {
  Require(rotary_dim >= 4 && rotary_dim % 4 == 0 && rotary_dim <= head_dim, "rotary_dim",
          rotary_dim, "a multiple of 4 in [4, head_dim=" + std::to_string(head_dim) + "]");
  Require(std::isfinite(theta) && theta > 1.0, "theta", theta, "a finite number > 1");
  const std::int64_t axis_dim = rotary_dim / 2, per_axis = rotary_dim / 4;
  MultiStreamRope rope;
  rope.head_dim = head_dim;
  rope.num_streams = 2;
  rope.numerics = numerics;
  for (int axis = 0; axis < 2; ++axis) {
    for (std::int64_t k = 0; k < per_axis; ++k) {
      double inv;
      if (numerics == RopeNumerics::kHF) {
        const float e = static_cast<float>(2 * k) / static_cast<float>(axis_dim);
        inv = static_cast<double>(
            1.0f / static_cast<float>(std::pow(static_cast<double>(static_cast<float>(theta)),
                                               static_cast<double>(e))));
      } else {
        inv = std::pow(theta, -static_cast<double>(2 * k) / static_cast<double>(axis_dim));
      }
      rope.inv_freq.push_back(inv);
      rope.stream.push_back(axis);
    }
  }
  ValidateMultiStreamRope(rope);
  return rope;
}

void MultiStreamRopeCosSin(const MultiStreamRope& rope, const StreamPositions& positions,
                           const TensorView& cos, const TensorView& sin) {
  ValidateMultiStreamRope(rope);
  const std::int64_t n = positions.count, d = rope.RotaryDim();
  Require(n >= 1, "positions.count", n, "at least 1");
  CheckStreams(rope, positions, 1, n);
  for (const auto* t : {&cos, &sin}) {
    const char* name = t == &cos ? "cos" : "sin";
    ValidateView(*t, name, 2, /*writable=*/true);
    Require(t->shape[0] == n && t->shape[1] == d, std::string(name) + ".shape", t->Describe(),
            "[" + std::to_string(n) + ", " + std::to_string(d) + "] (count, rotary_dim)");
  }
  RequireNoOverlap(cos, "cos", sin, "sin", /*inplace_allowed=*/false);
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::size_t j = 0; j < rope.inv_freq.size(); ++j) {
      const std::int64_t pos = StreamPos(positions, rope.stream[j], 0, r, n);
      const CosSinPair cs = AngleCosSin(rope, pos, j);
      const auto [c0, c1] = Columns(rope.pairing, static_cast<std::int64_t>(j), d);
      for (std::int64_t c : {c0, c1}) {
        StoreFromDouble(cos.data, cos.dtype, r * cos.strides[0] + c * cos.strides[1], cs.c);
        StoreFromDouble(sin.data, sin.dtype, r * sin.strides[0] + c * sin.strides[1], cs.s);
      }
    }
  }
}

void ApplyMultiStreamRope(const MultiStreamRope& rope, const TensorView& x, AttentionLayout layout,
                          const StreamPositions& positions, RopeDirection direction,
                          const TensorView* out, const Context& ctx) {
  ValidateMultiStreamRope(rope);
  const AttentionDims dx = GetAttentionDims(x, layout, "x");
  Require(dx.head_dim == rope.head_dim, "x head_dim", dx.head_dim,
          "the rope's head_dim (" + std::to_string(rope.head_dim) + ")");
  ValidateView(x, "x", 4, /*writable=*/out == nullptr);
  AttentionDims dout = dx;
  if (out != nullptr) {
    dout = GetAttentionDims(*out, layout, "out");
    ValidateView(*out, "out", 4, /*writable=*/true);
    Require(out->dtype == x.dtype, "out.dtype", DTypeName(out->dtype),
            "x's dtype (" + std::string(DTypeName(x.dtype)) + ")");
    Require(dout.batch == dx.batch && dout.seq == dx.seq && dout.heads == dx.heads &&
                dout.head_dim == dx.head_dim,
            "out.shape", out->Describe(), "x's shape (" + x.Describe() + ")");
    RequireNoOverlap(*out, "out", x, "x", /*inplace_allowed=*/false);
  }
  CheckStreams(rope, positions, dx.batch, dx.seq);
  const TensorView& dst = out != nullptr ? *out : x;
  const std::int64_t d = rope.RotaryDim(), pairs = d / 2;
  const double sign = direction == RopeDirection::kForward ? 1.0 : -1.0;
  ctx.ParallelFor(dx.batch * dx.seq, [&](std::int64_t task, int) {
    const std::int64_t b = task / dx.seq, s = task % dx.seq;
    std::vector<CosSinPair> cs(static_cast<std::size_t>(pairs));
    for (std::int64_t j = 0; j < pairs; ++j) {
      const auto k = static_cast<std::size_t>(j);
      cs[k] = AngleCosSin(rope, StreamPos(positions, rope.stream[k], b, s, dx.seq), k);
    }
    for (std::int64_t h = 0; h < dx.heads; ++h) {
      const std::int64_t xi = b * dx.stride_batch + s * dx.stride_seq + h * dx.stride_head;
      const std::int64_t oi = b * dout.stride_batch + s * dout.stride_seq + h * dout.stride_head;
      for (std::int64_t j = 0; j < pairs; ++j) {
        const auto [c0, c1] = Columns(rope.pairing, j, d);
        const double a = LoadAsDouble(x.data, x.dtype, xi + c0 * dx.stride_dim);
        const double bv = LoadAsDouble(x.data, x.dtype, xi + c1 * dx.stride_dim);
        const double c = cs[static_cast<std::size_t>(j)].c;
        const double sn = sign * cs[static_cast<std::size_t>(j)].s;
        StoreFromDouble(dst.data, dst.dtype, oi + c0 * dout.stride_dim, a * c - bv * sn);
        StoreFromDouble(dst.data, dst.dtype, oi + c1 * dout.stride_dim, bv * c + a * sn);
      }
      if (out != nullptr) {
        for (std::int64_t c = d; c < dx.head_dim; ++c) {
          StoreFromDouble(dst.data, dst.dtype, oi + c * dout.stride_dim,
                          LoadAsDouble(x.data, x.dtype, xi + c * dx.stride_dim));
        }
      }
    }
  });
}

std::vector<double> XPosZeta(std::int64_t rotary_dim) {
  Require(rotary_dim >= 2 && rotary_dim % 2 == 0 && rotary_dim <= (1 << 16), "rotary_dim",
          rotary_dim, "an even number in [2, 65536]");
  const double d = static_cast<double>(rotary_dim);
  std::vector<double> zeta(static_cast<std::size_t>(rotary_dim / 2));
  for (std::size_t j = 0; j < zeta.size(); ++j) {
    zeta[j] = (2.0 * static_cast<double>(j) + 0.4 * d) / (1.4 * d);
  }
  return zeta;
}

void XPosScales(const XPosParams& params, const std::int64_t* positions, std::int64_t count,
                const TensorView& q_scale, const TensorView& k_scale) {
  const std::vector<double> zeta = XPosZeta(params.rotary_dim);
  Require(std::isfinite(params.scale_base) && params.scale_base > 0.0, "scale_base",
          params.scale_base, "a finite number > 0");
  Require(params.center >= 0 && params.center <= kMaxPosition, "center", params.center,
          "an integer in [0, 2^24 - 1]");
  Require(count >= 1, "count", count, "at least 1 position");
  ValidatePositions(Positions::Ids(positions, count), 1, count, "positions");
  const auto half = static_cast<std::int64_t>(zeta.size());
  for (const auto* t : {&q_scale, &k_scale}) {
    const char* name = t == &q_scale ? "q_scale" : "k_scale";
    ValidateView(*t, name, 2, /*writable=*/true);
    Require(t->shape[0] == count && t->shape[1] == half, std::string(name) + ".shape",
            t->Describe(),
            "[" + std::to_string(count) + ", " + std::to_string(half) + "] (count, rotary_dim/2)");
  }
  RequireNoOverlap(q_scale, "q_scale", k_scale, "k_scale", /*inplace_allowed=*/false);
  for (std::int64_t r = 0; r < count; ++r) {
    const double power = static_cast<double>(positions[r] - params.center) / params.scale_base;
    for (std::int64_t j = 0; j < half; ++j) {
      const double q = std::pow(zeta[static_cast<std::size_t>(j)], power);
      StoreFromDouble(q_scale.data, q_scale.dtype, r * q_scale.strides[0] + j * q_scale.strides[1],
                      q);
      StoreFromDouble(k_scale.data, k_scale.dtype, r * k_scale.strides[0] + j * k_scale.strides[1],
                      1.0 / q);
    }
  }
}

}  // namespace posenc
