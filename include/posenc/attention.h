// posenc/attention.h: the exact reference attention with positional policies.
//
// The executable specification every fast attention in posenc is tested
// against: scalar loops, float64 accumulation, no tiling tricks.
//   logits(i, j) = scale * (q_i . k_j + content position terms) + bias terms
//   P = softmax_j over the keys visible from query i;   out_i = sum_j P_ij v_j (+ a^V terms)
// Shapes (AttentionLayout bshd = [batch, seq, heads, dim] or bhsd):
//   q [B, Sq, H, D]; k [B, Sk, Hkv, D]; v [B, Sk, Hkv, Dv]; out [B, Sq, H, Dv]
//   (out in the same layout as q), H a multiple of Hkv (GQA; Hkv = 1 is MQA):
//   query head h reads kv head h / (H / Hkv). Optional probs [B, H, Sq, Sk].
// Any float dtype in and out; everything is computed in float64 and rounded
// once on store.
//
// Positions: query row i of batch b sits at query_positions(b, i) (default:
// bottom-right alignment, Sk - Sq + i, which needs Sq <= Sk) and key j at
// key_positions(b, j) (default j). Visibility of key j from query i, with
// p = query position and r = key position:
//   kCausal: r <= p;  with a sliding window W >= 1: p - W < r <= p
//            (W keys including the query's own position, Mistral/Gemma).
//   kBidirectional: every key;  with a window: |p - r| < W.
// A query that sees no key (possible with explicit positions) gets an output
// of zeros and a probability row of zeros; never NaN.
//
// Position schemes: params.scheme names a registered scheme with its
// arguments (posenc/scheme.h), usually built by a family's factory; the
// formula, paper and index conventions of each are in its family header
// (sinusoidal.h for "absolute", whose terms the caller added to the inputs;
// rope.h: q and k are rotated by their positions before the dot products;
// alibi.h, t5.h, shaw.h, transformer_xl.h, deberta.h, fire.h). This file
// applies them with the positions above. "deberta" has its own default
// scale, DebertaScale(params) = 1/sqrt(D * (1 + [c2p] + [p2c])).
//
// Numerics: the result is the float64 value of the formula up to rounding of
// float64 sums (relative error ~1e-15 against exact arithmetic), rounded once
// to the output dtype. Positions in [0, 2^24).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/context.h"
#include "posenc/deberta.h"
#include "posenc/positions.h"
#include "posenc/rope.h"
#include "posenc/scheme.h"
#include "posenc/shaw.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5.h"
#include "posenc/tensor.h"
#include "posenc/transformer_xl.h"

namespace posenc {

enum class AttentionMask : std::uint8_t { kCausal, kBidirectional };
std::string_view AttentionMaskName(AttentionMask mask);  // "causal", "bidirectional"
AttentionMask ParseAttentionMask(std::string_view text, std::string_view arg = "mask");

struct AttentionParams {
  AttentionLayout layout = AttentionLayout::kBSHD;  // of q, k, v, out and their grads
  AttentionMask mask = AttentionMask::kCausal;
  std::optional<std::int64_t> sliding_window;  // W >= 1; nullopt: no window
  std::optional<double> scale;                 // finite > 0; default 1/sqrt(D) (DeBERTa: see above)
  std::optional<Positions> query_positions;    // default Offset(Sk - Sq)
  std::optional<Positions> key_positions;      // default Offset(0)
  PositionScheme scheme;
};

// The scale in effect for head dimension D.
double EffectiveAttentionScale(const AttentionParams& params, std::int64_t head_dim);

// Throws InvalidArgument naming the argument for every malformed input:
// ranks/layouts, batch/head/dim mismatches, H % Hkv != 0, Sq > Sk with
// default positions, window 0, bad scale, positions, scheme tables.
void AttentionReference(const AttentionParams& params, const TensorView& q, const TensorView& k,
                        const TensorView& v, const TensorView& out,
                        const TensorView* probs = nullptr, const Context& ctx = Context{});

// Gradients of the reference attention given dOut (same shape as out).
// dq, dk, dv have the shapes of q, k, v (any float dtype) and are
// overwritten. The gradient of a trainable tensor argument of the scheme is
// computed when grads.scheme holds a view under the argument's name with
// non-null data (overwritten, the argument's shape, any float dtype), e.g.
// "table" of t5, "a_key" / "a_value" of shaw, "r_w_bias" / "r_r_bias" / "rw"
// of transformer_xl, "pos_key" / "pos_query" of deberta, "w1" ... of fire
// (`posenc schemes` lists them).
// Recomputes P in float64: dP = dO . V^T (+ dO . a^V), dS = P o (dP -
// rowsum(dP o P)), then dS flows to q, k and the tables; RoPE gradients are
// rotated back with ApplyRope(kInverse). Runs on one thread (the reference).
struct AttentionGrads {
  TensorView dq, dk, dv;
  NamedTensors scheme;  // by trainable argument name
};

void AttentionReferenceBackward(const AttentionParams& params, const TensorView& q,
                                const TensorView& k, const TensorView& v, const TensorView& dout,
                                const AttentionGrads& grads);

}  // namespace posenc
