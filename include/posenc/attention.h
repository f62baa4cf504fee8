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
// Position schemes (PositionScheme::Kind):
//   kNone, kAbsolute: no term (for kAbsolute the caller has already added
//     sinusoidal/learned encodings to the inputs before the projections);
//   kRope: copies of q and k are rotated by their positions (posenc::ApplyRope)
//     before the dot products; v is not rotated;
//   kAlibi: bias -slope[h] * |p - r| (unscaled), one slope per query head;
//   kT5: bias table[bucket(r - p), h] (unscaled; T5 itself uses scale = 1);
//   kShaw: q_i . a^K[idx] inside the scaled logit, a^V[idx] added to v_j;
//   kTransformerXL: (q_i + u_h) . k_j + (q_i + v_h) . RW[row(p - r), h], scaled;
//   kDeBERTa: q_i . Kr[c2p] + k_j . Qr[p2c], scaled; the default scale is
//     DebertaScale(params) = 1/sqrt(D * (1 + [c2p] + [p2c])).
//   kRegistered: any scheme of the registry by name with named arguments
//     (posenc/scheme.h), e.g. "fire" (posenc/fire.h); the built-in names
//     above work this way too (the Python module and the C API use it).
// Formulas, papers and index conventions of the relative schemes are in
// posenc/t5.h, shaw.h, transformer_xl.h, deberta.h and fire.h; this file
// applies them with the positions above. Every scheme is declared in the
// registry (RegisteredSchemes()); the kinds and typed members below are the
// typed C++ front door of the built-in schemes and map onto it.
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

#include "posenc/context.h"
#include "posenc/deberta.h"
#include "posenc/positions.h"
#include "posenc/rope.h"
#include "posenc/scheme.h"
#include "posenc/shaw.h"
#include "posenc/t5.h"
#include "posenc/tensor.h"

namespace posenc {

enum class AttentionMask : std::uint8_t { kCausal, kBidirectional };
std::string_view AttentionMaskName(AttentionMask mask);  // "causal", "bidirectional"
AttentionMask ParseAttentionMask(std::string_view text, std::string_view arg = "mask");

// Parameters of one positional scheme; only the member named by `kind` is
// read (kRegistered: `name` and `args`).
struct PositionScheme {
  enum class Kind : std::uint8_t {
    kNone,
    kAbsolute,
    kRope,
    kAlibi,
    kT5,
    kShaw,
    kTransformerXL,
    kDeBERTa,
    kRegistered
  };
  Kind kind = Kind::kNone;

  RopeParams rope;  // kRope: head_dim must equal D

  struct Alibi {
    std::vector<double> slopes;  // one per query head, finite, >= 0
  } alibi;

  struct T5 {
    const T5BiasTable* table = nullptr;  // [num_buckets, H]; heads must equal H
  } t5;

  struct Shaw {
    ShawParams params;   // head_dim must equal D (and Dv)
    TensorView a_key;    // [2 clip + 1, D], float32 or float64
    TensorView a_value;  // [2 clip + 1, Dv]
  } shaw;

  struct TransformerXL {
    TensorView r_w_bias;  // u: [H, D]
    TensorView r_r_bias;  // v: [H, D]
    // RW = W_R R: [R, H, D], HF order: row r encodes distance R - 1 - r
    // (R = klen in HF). Every visible pair with p >= r needs p - r < R;
    // pairs with p < r (bidirectional) get the u . k term only.
    TensorView rw;
  } transformer_xl;

  struct DeBERTa {
    DebertaParams params;  // head_dim must equal D
    TensorView pos_key;    // Kr [2 att_span, H, D]; data null when c2p is off
    TensorView pos_query;  // Qr [2 att_span, H, D]; data null when p2c is off
  } deberta;

  // kRegistered: the registered scheme `name` with its named arguments
  // (validated against its declaration when a call resolves it).
  std::string name;
  SchemeArgs args;

  static PositionScheme None() { return {}; }
  static PositionScheme Registered(std::string_view name, SchemeArgs args);
  static PositionScheme Absolute();
  static PositionScheme FromRope(const RopeParams& params);
  static PositionScheme FromAlibi(std::vector<double> slopes);
  static PositionScheme FromT5(const T5BiasTable& table);
  static PositionScheme FromShaw(const ShawParams& params, const TensorView& a_key,
                                 const TensorView& a_value);
  static PositionScheme FromTransformerXL(const TensorView& r_w_bias, const TensorView& r_r_bias,
                                          const TensorView& rw);
  static PositionScheme FromDeBERTa(const DebertaParams& params, const TensorView& pos_key,
                                    const TensorView& pos_query);
};

// "none", "absolute", "rope", "alibi", "t5", "shaw", "transformer_xl",
// "deberta" ("registered" for kRegistered; the scheme's name is in `name`).
std::string_view PositionSchemeKindName(PositionScheme::Kind kind);
PositionScheme::Kind ParsePositionSchemeKind(std::string_view text,
                                             std::string_view arg = "scheme");

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
// overwritten. A table gradient is computed when its view has non-null data
// (overwritten, shape of the table, any float dtype):
//   t5_table [num_buckets, H]; shaw_a_key / shaw_a_value like the tables;
//   xl_r_w_bias / xl_r_r_bias [H, D], xl_rw [R, H, D];
//   deberta_pos_key / deberta_pos_query [2 att_span, H, D].
// Recomputes P in float64: dP = dO . V^T (+ dO . a^V), dS = P o (dP -
// rowsum(dP o P)), then dS flows to q, k and the tables; RoPE gradients are
// rotated back with ApplyRope(kInverse). Runs on one thread (the reference).
struct AttentionGrads {
  TensorView dq, dk, dv;
  TensorView t5_table;
  TensorView shaw_a_key, shaw_a_value;
  TensorView xl_r_w_bias, xl_r_r_bias, xl_rw;
  TensorView deberta_pos_key, deberta_pos_query;
  NamedTensors scheme;
};

void AttentionReferenceBackward(const AttentionParams& params, const TensorView& q,
                                const TensorView& k, const TensorView& v, const TensorView& dout,
                                const AttentionGrads& grads);

}  // namespace posenc
