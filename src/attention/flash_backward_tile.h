// The backward's per-tile state and its (query tile, key tile) step, shared
// by the engine's phases (src/attention/flash_backward_engine.cc) and the
// step itself (src/attention/flash_backward_tile.cc). Internal to
// src/attention.
#pragma once

#include <cstdint>
#include <vector>

#include "attention/flash_backward_engine.h"

namespace posenc::flash_internal {

using attention_internal::SchemeGradSums;
using Index = std::int64_t;

// Geometry shared by every phase.
struct Layout {
  Index D = 0, Dv = 0, ldd = 0, ldv = 0, ldk = 0, G = 1, Sq = 0, chunks = 1;
  Index q_tiles = 0, half_bq = 0;  // query tiles per head, (bq + 1) / 2
  bool bf16_qk = false;            // S = Q K^T with bfloat16 dot products (q, k bfloat16 values)
  bool bf16_dv = false;            // dP = dO V^T with bfloat16 dot products (dout, v bfloat16)
  // FlashPrecision::kBFloat16: P^T dO, dS^T Q, dS K with P and dS rounded
  // to bfloat16; bf16_pairs: as bfloat16 pairs (FlashMatMulBf16: VDPBF16PS
  // where FlashBf16DotPreferred, or the scalar backend), otherwise rounded
  // into float32 copies (Scratch::p16, ds16) for the float32 kernels;
  // simd: VDPBF16PS allowed.
  bool bf16_products = false, bf16_pairs = false, simd = true;
  // Floats of one unit: q rows, dO rows, lse, chunk partials of dQ.
  Index RowsFloats() const { return G * Sq * (ldd + ldv + 1); }
  Index UnitFloats() const { return RowsFloats() + chunks * G * Sq * ldd; }
  // Pairs of one query tile as B operands (bf16_pairs): Q then dO.
  Index TileBPairs() const { return bf16_pairs ? half_bq * (ldd + ldv) : 0; }
  Index UnitPairs() const {
    return (bf16_qk ? G * Sq * D / 2 : 0) + (bf16_dv ? G * Sq * Dv / 2 : 0) +
           G * q_tiles * TileBPairs();
  }
};

// The packed query side of one unit, inside the group's buffers.
struct UnitView {
  float* q = nullptr;                   // [G, Sq, ldd] rotated q rows (zero padding)
  float* dout = nullptr;                // [G, Sq, ldv]
  float* lse = nullptr;                 // [G, Sq]
  float* dq = nullptr;                  // [chunks, G, Sq, ldd] partial sums of dS K
  double* delta = nullptr;              // [G, Sq] D_i = dO_i . O_i
  std::uint32_t* q_pairs = nullptr;     // [G, Sq, D / 2] (bf16_qk)
  std::uint32_t* dout_pairs = nullptr;  // [G, Sq, Dv / 2] (bf16_dv)
  // [G, q_tiles] query tiles as FlashMatMulBf16 B operands (bf16_pairs):
  // Q [half_bq, ldd, 2] then dO [half_bq, ldv, 2] bfloat16 pairs along the rows.
  std::uint32_t* tile_b = nullptr;
  const std::uint16_t* QB(const Layout& L, Index hl, Index t) const {
    return reinterpret_cast<const std::uint16_t*>(tile_b + (hl * L.q_tiles + t) * L.TileBPairs());
  }
  const std::uint16_t* DoutB(const Layout& L, Index hl, Index t) const {
    return QB(L, hl, t) + 2 * L.half_bq * L.ldd;
  }
};

// Per-worker buffers: O((Bq + Bk) (D + Dv) + Bq Bk) floats, never an
// [Sq, Sk] array.
struct Scratch {
  std::vector<float> rows, kt, krows, vt, s, dp, bias, dk, dv, dist;
  std::vector<std::uint16_t> kt_pairs, vt_pairs;
  // bf16_pairs: K rows as B [(bk + 1) / 2, ldd, 2]; P^T, dS^T as pairs-major A [half_bq,
  // ldk, 2]; dS as rows-major A [bq, ldk / 2]; ones (beta of the accumulating products).
  std::vector<std::uint16_t> k_b, pt_a, dst_a;
  std::vector<std::uint32_t> ds_a;
  std::vector<float> ones;
  std::vector<float> p16, ds16;  // bf16_products without bf16_pairs: P, dS rounded [bq, ldk]
  std::vector<Index> band_cols;  // DiagonalBands of the current pair
  // The row pass of a whole tile (FlashBackwardTile): per query row its
  // terms, delta, visible keys (a banded tile's from DiagonalBands) and
  // columns.
  std::vector<const float*> bias_rows;
  std::vector<float> delta_rows;
  std::vector<Index> visible_rows, cols_rows;
  std::vector<double> dist64;
  TileTerms tile_terms;
  SchemeGradSums sums;
  Context serial{1};
};

// The head a key-tile task runs: batch b, query head h (local head hl of
// its kv group), its dQ partial `chunk`.
struct TileTask {
  Index b, h, hl, chunk;
};

// One (query tile t, key tile ku) pair of a key-tile task:
//   S = Q K^T, dP = dO V^T               (register-blocked SIMD tiles)
//   P = exp(S scale + T - lse), dS = P (dP - D)   (one SIMD row pass)
//   dV += P^T dO, dK += dS^T Q           (transposed SIMD accumulation)
//   dQ_part += dS K                      (SIMD accumulation)
// into w.dv, w.dk and the chunk's dQ partial; a causal diagonal tile
// computes each band's visible keys only (DiagonalBands). Position terms T
// come from the scheme through TileTerms (the forward's code), value terms
// through ValueGradRow, parameter gradients through SchemeGrads.
// Numerics: float32 tiles, dot products and accumulation through the SIMD
// tile kernels of kernels/simd/flash.h (Highway, or plain loops for
// Backend::kScalar), with AVX512_BF16 dot products for S and dP when both
// operands are bfloat16 inputs (exact products, float32 sums); a value
// term's dO . a_ij - D_i is rounded once (the scheme combines it in
// float64); every gradient is rounded once to its dtype. Error against the
// float64 reference: within 2x a plain float32 backward's error
// (tests/unit/flash_backward_test.cc).
void RunTilePair(const BackwardCall& c, const Layout& L, const TileOps& ops, const UnitView& u,
                 Scratch& w, const TileTask& task, Index t, Index ku, const PositionRange& qr,
                 const PositionRange& kr);

}  // namespace posenc::flash_internal
