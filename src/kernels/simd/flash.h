// SIMD (Highway) tile kernels of the fused attention (src/attention/flash_forward_engine.cc,
// contract in include/posenc/flash_attention.h): the q . k logits of a tile
// (float32 FMAs, or AVX512_BF16 dot products in flash_bf16.cc), the scale +
// position bias + max of a logit row, the exponentials of a softmax row, and
// the P . V accumulation with the online-softmax rescale.
//
// Float32 throughout, FMA where the target has it (AVX3, AVX2); sums are
// reordered relative to a sequential loop (independent accumulators per
// lane), so results differ from the scalar loops by float32 rounding only:
// |error| <= D * 2^-23 * sum |q_x k_x| per logit. exp is the Cephes expf
// polynomial for non-positive arguments (flash-inl.h ExpNonPositive; max
// error ~1 ulp in float32, arguments clamped at -87). Buffers are padded by
// the caller to a multiple of kFlashPad columns (zero padding), so the
// kernels have no tail loops. Runtime dispatch to the best compiled target
// (kernels/simd/targets.h); arguments are not validated here.
#pragma once

#include <cstdint>

#include "kernels/flash_exp.h"

namespace posenc::kernels::simd {

// Column padding of every buffer passed here (>= the widest vector: 16
// float32 lanes of AVX-512).
inline constexpr std::int64_t kFlashPad = 16;

// s[i * ld + j] = sum_x q[i * ldq + x] * kt[x * ld + j], i < nq, j < ld
// (ld a multiple of kFlashPad; kt is the key tile transposed, [dim, ld];
// ldq >= dim is the row stride of q).
void FlashTileLogits(const float* q, std::int64_t ldq, const float* kt, std::int64_t nq,
                     std::int64_t dim, std::int64_t ld, float* s);

// FlashTileLogits over columns j < cols only (cols a multiple of
// kFlashPad, <= ld; columns past cols are not written): the bands of a
// causal diagonal tile.
void FlashTileLogitsCols(const float* q, std::int64_t ldq, const float* kt, std::int64_t nq,
                         std::int64_t dim, std::int64_t ld, std::int64_t cols, float* s);

// row[j] = exp(row[j] - max) for j < n (n a multiple of kFlashPad; -inf
// entries become 0); returns the sum of the new row.
float FlashExpRow(float* row, std::int64_t n, float max, FlashExp exp = FlashExp::kFloat32);

// acc[i * ldv + x] += sum_j p[i * ldp + j] * v[j * ldv + x] for i < nq,
// j < nk, x < ldv (ldv a multiple of kFlashPad).
void FlashAccumulatePV(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                       std::int64_t nk, std::int64_t ldv, float* acc);

// acc[i * ldv + x] = alpha[i] * acc[i * ldv + x] + sum_j p[i * ldp + j] *
// v[j * ldv + x] (the online-softmax rescale fused into the accumulation;
// alpha null: 1).
void FlashAccumulatePVScaled(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                             std::int64_t nk, std::int64_t ldv, const float* alpha, float* acc);

// The backward's transposed accumulation (dV += P^T dO, dK += dS^T Q):
// acc[j * ldv + x] += sum_i p[i * ldp + j] * v[i * ldv + x] for j < nk,
// i < nq, x < ldv (ldv a multiple of kFlashPad); p is read in place.
void FlashAccumulatePTV(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                        std::int64_t nk, std::int64_t ldv, float* acc);

// How a row pass stores its float32 results: as they are, or rounded to
// bfloat16 values kept in float32 (exactly FlashRoundRowsBf16 of them; a
// subnormal value rounds to +-0 where FlashBf16ConvertPreferred(), which
// the engines, under FTZ and DAZ, never produce).
enum class FlashRowRounding : int { kNone = 0, kBFloat16 = 1 };

// The backward's row pass over a logit row s and a dP row dp (ld entries,
// a multiple of kFlashPad): x = s[j] * scale + bias[j] (bias may be null;
// finite or -inf), P = exp(x - lse) (0 where x = -inf and for j >= nk), then
// s[j] = P and dp[j] = P * (dp[j] - delta) (dS), both rounded as `rounding`
// says (dS from the unrounded P: FlashPrecision::kBFloat16 rounds P and dS
// where they enter the products). lse must be finite.
void FlashBackwardRow(float* s, float* dp, std::int64_t nk, std::int64_t ld, float scale,
                      const float* bias, float lse, float delta,
                      FlashRowRounding rounding = FlashRowRounding::kNone,
                      FlashExp exp = FlashExp::kFloat32);

// FlashBackwardRow over the nq rows of a tile in one call (s, dp [nq, ld]):
// row i with lse[i], delta[i] and, from `rows`, its terms, visible keys and
// columns ([cols[i], ld) of both rows set to 0); a row whose lse is -inf
// (no visible key) becomes zeros. The same bits as FlashBackwardRow row by
// row.
struct FlashBackwardRows {
  const float* const* bias = nullptr;     // per row (or null: none)
  const std::int64_t* visible = nullptr;  // per row, <= nk (null: nk)
  const std::int64_t* cols = nullptr;     // per row, multiples of kFlashPad <= ld (null: ld)
  FlashRowRounding rounding = FlashRowRounding::kNone;
  FlashExp exp = FlashExp::kFloat32;
};
void FlashBackwardTile(float* s, float* dp, std::int64_t ld, std::int64_t nq, std::int64_t nk,
                       float scale, const float* lse, const float* delta,
                       const FlashBackwardRows& rows);

// The forward's online-softmax step for a tile of nq rows in one call:
// per row, x = s * scale + bias[i][j] (bias or bias[i] null: no terms;
// finite or -inf, ld entries), -inf for j >= nk; m_new = max(m[i], max x);
// alpha[i] = exp(m[i] - m_new) (0 when m[i] = -inf); s = exp(x - m_new);
// l[i] = l[i] alpha[i] + sum s. A row with no finite x becomes zeros with
// alpha[i] = 1 and m[i], l[i] unchanged. Same exp and sums as
// FlashScaleRow + FlashExpRow row by row. `rows` narrows rows of a causal
// diagonal tile and rounds P (FlashSoftmaxRows).
struct FlashSoftmaxRows {
  // Row i sees its first visible[i] keys (<= nk; the rest are -inf), and
  // only its first cols[i] entries (a multiple of kFlashPad, <= ld) are
  // read and written; the rest of the row is left as it is. Null: nk, ld.
  const std::int64_t* visible = nullptr;
  const std::int64_t* cols = nullptr;
  // kBFloat16: s holds P as bfloat16 values (FlashPrecision::kBFloat16),
  // l sums the unrounded P.
  FlashRowRounding rounding = FlashRowRounding::kNone;
  // Which exp gives P (kernels/flash_exp.h; the rescale alpha always takes
  // the float32 one: it compounds over the key tiles).
  FlashExp exp = FlashExp::kFloat32;
};
void FlashSoftmaxTile(float* s, std::int64_t ld, std::int64_t nq, std::int64_t nk, float scale,
                      const float* const* bias, float* m, float* l, float* alpha,
                      const FlashSoftmaxRows& rows = {});

// dst[j] += src[j], j < n (any n).
void FlashAddRow(float* dst, const float* src, std::int64_t n);

// FlashDecodeLogits for bfloat16 q and k rows read in place (no float32
// copy of the cache): AVX512_BF16 VDPBF16PS along dim (32 products per
// instruction, masked loads for dim % 32), each key row loaded once for up
// to 4 query rows (held in registers for dim <= 128), the same transposing
// lane sum per 16 keys; key rows at or past nk are not read.
// q [rows, ldq] and k [.., ldk_rows] are bfloat16 bits; s rows hold
// Pad(nk) entries, those past nk are zero. Only when
// FlashBf16DotAvailable(). Numerics as FlashTileLogitsBf16.
void FlashDecodeLogitsBf16(const std::uint16_t* q, std::int64_t ldq, std::int64_t rows,
                           const std::uint16_t* k, std::int64_t ldk_rows, std::int64_t nk,
                           std::int64_t dim, float* s, std::int64_t lds);

// lse[i] = m[i] + log(l[i]) where l[i] > 0, -inf elsewhere (i < n; lse may
// be l): the log in float64 rounded to float32, as
// kernels::scalar::FlashLogSumExp (equal bits but for ties closer than
// Highway's 4 float64 ulp). The forward's log-sum-exp of a tile's rows.
void FlashLogSumExp(const float* m, const float* l, std::int64_t n, float* lse);

// out[r] = sum_x a[r * lda + x] * b[r * ldb + x], x < dim, r < n, in
// float64 with the summation order of kernels::scalar::FlashRowDotsF64 (the
// same bits on every target): the backward's D_i = dO_i . O_i.
void FlashRowDotsF64(const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                     std::int64_t n, std::int64_t dim, double* out);

// Storage of the rows FlashLoadRows converts.
enum class FlashStorage : int { kFloat32 = 0, kBFloat16 = 1, kFloat16 = 2 };

// FlashDecodeLogits with the key rows in their storage (a cache read in
// place: unit element stride, row stride ldk_rows elements, any sign, rows
// may overlap), converted exactly in registers and each read once for up to
// 4 query rows; key rows at or past nk are not read (their entries of s, up
// to Pad(nk), are 0). Bit-identical to FlashDecodeLogits on the float32
// copy of the rows.
void FlashDecodeLogitsStored(FlashStorage storage, const float* q, std::int64_t ldq,
                             std::int64_t rows, const void* k, std::int64_t ldk_rows,
                             std::int64_t nk, std::int64_t dim, float* s, std::int64_t lds);

// FlashRowDotsF64 with b's rows in `storage` (unit element stride, row
// stride ldb elements, any sign, rows may overlap), converted exactly in
// registers: the same bits as FlashRowDotsF64 on the converted rows, without
// a float32 copy of them (the backward's O, read once for D).
void FlashRowDotsF64Stored(FlashStorage storage, const float* a, std::int64_t lda, const void* b,
                           std::int64_t ldb, std::int64_t n, std::int64_t dim, double* out);

// n rows of `storage` values (unit element stride, row stride `stride`
// elements) as float32 rows of ld >= dim floats, zeros in [dim, ld); the
// 16-bit conversions are exact.
void FlashLoadRows(FlashStorage storage, const void* src, std::int64_t stride, std::int64_t n,
                   std::int64_t dim, float* dst, std::int64_t ld);

// dst[x * ldk + j] = rows[j * ld_rows + x] for j < n, x < dim (ld_rows >=
// dim, ldk >= n), zeros in [n, ldk) of each of the dim rows of dst: a
// tile's K^T or V^T [dim, ldk] from its rows (exact: values are moved).
void FlashTransposeTile(const float* rows, std::int64_t n, std::int64_t dim, std::int64_t ld_rows,
                        float* dst, std::int64_t ldk);

// The inverse of FlashLoadRows for float32 and bfloat16 storage: n rows of
// dim values src[r * ld + x] * scale (row_scale[r] instead of scale when
// row_scale is not null: the forward's 1 / l) into dst (unit element stride, row
// stride `stride` elements), bfloat16 rounded to nearest even (NaN kept
// quiet), exactly as FloatToBF16 (posenc/dtype.h): VCVTNEPS2BF16 where
// FlashBf16ConvertPreferred(), the integer rounding for vectors with a
// subnormal lane (which the instruction flushes). Not for kFloat16.
void FlashStoreRows(const float* src, std::int64_t ld, std::int64_t n, std::int64_t dim,
                    float scale, FlashStorage storage, void* dst, std::int64_t stride,
                    const float* row_scale = nullptr);

// Reads bytes [p, p + bytes) once, in address order (vector loads, four
// in flight per step), and returns the OR of everything read, as 32-bit
// words, the last bytes singly (a nonzero byte anywhere gives a nonzero
// result; keep it: the loads must not be optimised away). Decode runs it over each block of
// a bshd cache before the per-head kernels read the block in place: one
// sequential stream that the hardware prefetchers follow, instead of Hkv
// streams at the cache's row stride.
std::uint32_t FlashTouch(const void* p, std::int64_t bytes);

// Decode logits against key rows: s[r * lds + j] = sum_x q[r * ldq + x] *
// k[j * ldk_rows + x] for r < rows, j < Pad(nk), x < dim (dim a multiple of
// kFlashPad, both operands zero-padded to it; k must have Pad(nk) readable
// rows, and entries j >= nk of s are whatever those rows give: callers mask
// them). Per query row and group of
// Lanes keys: one vector accumulator per key, then one transposing lane
// sum for the group (log2(Lanes) levels of ConcatEven/ConcatOdd + Add).
void FlashDecodeLogits(const float* q, std::int64_t ldq, std::int64_t rows, const float* k,
                       std::int64_t ldk_rows, std::int64_t nk, std::int64_t dim, float* s,
                       std::int64_t lds);

// FlashAccumulatePVScaled with v rows at stride ldvr (>= ldv; the
// accumulator rows stay at stride ldv): the decode reads one kv head's
// value rows out of a block that holds every kv head.
void FlashAccumulatePVRows(const float* p, std::int64_t ldp, const float* v, std::int64_t ldvr,
                           std::int64_t nq, std::int64_t nk, std::int64_t ldv, const float* alpha,
                           float* acc);

// FlashAccumulatePVRows with the value rows read in place in their storage
// (float32, bfloat16 or float16; converted exactly in registers, no float32
// copy): v holds nk rows of dv values at stride ldvr elements (dv <= ldv;
// nothing past a row's dv values is read), acc rows hold ldv floats whose
// columns [dv, ldv) are left as they are. Same sums, in the same order, as
// FlashAccumulatePVRows over the converted rows, so the results are equal.
void FlashAccumulatePVStored(FlashStorage storage, const float* p, std::int64_t ldp, const void* v,
                             std::int64_t ldvr, std::int64_t nq, std::int64_t nk, std::int64_t dv,
                             std::int64_t ldv, const float* alpha, float* acc);

// row[j] = row[j] * scale (+ bias[j] when bias is non-null; bias holds ld
// entries, finite or -inf) for j < nk and -inf for nk <= j < ld (ld a
// multiple of kFlashPad); returns the max of the first nk entries (-inf if
// none is finite).
float FlashScaleRow(float* row, std::int64_t nk, std::int64_t ld, float scale, const float* bias);

// bfloat16 logits with AVX512_BF16 dot products (kernels/simd/flash_bf16.cc;
// Highway 1.0.3 cannot emit them). Available when the CPU has AVX512_BF16
// and Highway currently dispatches to an AVX-512 target.
bool FlashBf16DotAvailable();

// How the attention engines run products of bfloat16 values where the CPU
// has AVX512_BF16: kAuto (the default) VDPBF16PS unless CpuBf16DotSlow()
// (kernels/simd/x86_features.h), kDot always, kFloat32 never (float32 FMAs
// on operands kept as float32: the same exact products, float32 sums; and
// the row passes round P and dS by integer arithmetic instead of
// VCVTNEPS2BF16, FlashBf16ConvertPreferred). Set by tests, so that each path
// runs on every machine; process-wide.
enum class FlashBf16Dots : int { kAuto = 0, kDot = 1, kFloat32 = 2 };
void SetFlashBf16Dots(FlashBf16Dots mode);

// FlashBf16DotAvailable() and the FlashBf16Dots mode picks VDPBF16PS: the
// engines' choice of bfloat16 dot products for the logits and the
// FlashPrecision::kBFloat16 products.
bool FlashBf16DotPreferred();

// The row passes (FlashBackwardRow, FlashSoftmaxTile) round P and dS to
// bfloat16 with AVX512_BF16's VCVTNEPS2BF16 (3 vector ops instead of 8):
// the CPU has AVX512_BF16 and the mode is not kFloat32 (only the AVX-512
// targets' kernels have the instruction; the others ignore it). Same bits
// as FloatToBF16 except that a subnormal input rounds to +-0, which the
// engines never produce (FTZ and DAZ, kernels/float_mode.h). Used also
// where CpuBf16DotSlow(): the conversion is faster there too
// (docs/PERFORMANCE.md, "The training shape, fifth pass").
bool FlashBf16ConvertPreferred();

// FlashBf16DotPreferred(), or AMX runs the logits (FlashAmxLogitsAvailable)
// and the mode is not kFloat32: the engines' choice for the q . k and
// dO . v logits of bfloat16 inputs (FlashTileLogitsBf16).
bool FlashBf16LogitsPreferred(std::int64_t dim);

// dst[r * ld + j] = the bfloat16 value of src[r * ld + j] (round to
// nearest even, NaN kept quiet, exactly as FloatToBF16; kept as float32),
// r < rows, j < n (n a multiple of kFlashPad; dst == src: in place): P and
// dS of FlashPrecision::kBFloat16 when the products run as float32 FMAs.
void FlashRoundRowsBf16(const float* src, std::int64_t ld, std::int64_t rows, std::int64_t n,
                        float* dst);

// s[i * ld + j] = sum_x q[i, x] * k[j, x] for bfloat16 q and k (dim even),
// with AMX tiles (FlashTileLogitsAmx) where FlashAmxLogitsAvailable(dim),
// else with AVX512_BF16 dot products (FlashTileLogitsAvx512Bf16):
// q_pairs [nq, ldq] (ldq >= dim / 2) holds (q[i, 2p] | q[i, 2p + 1] << 16)
// bit pairs at i * ldq + p;
// kt_pairs [dim / 2, ld, 2] holds k[j, 2p], k[j, 2p + 1] at (p * ld + j) * 2
// (zero columns past the tile). Float32 accumulation; only call when
// FlashBf16DotAvailable().
void FlashTileLogitsBf16(const std::uint32_t* q_pairs, std::int64_t ldq,
                         const std::uint16_t* kt_pairs, std::int64_t nq, std::int64_t dim,
                         std::int64_t ld, float* s);

// bfloat16 products with float32 accumulation, the operands of the
// bfloat16 precision (FlashAttention-2's 16-bit P . V and dS products): for
// r < rows, x < cols,
//   c[r * ldc + x] = (beta ? beta[r] * c[r * ldc + x] : 0)
//                    + sum_{t < pairs} a0(r, t) b0(t, x) + a1(r, t) b1(t, x),
// a[r * a_row + t * a_pair] = a0 | a1 << 16 (bfloat16 bits: elements 2t and
// 2t + 1 of row r along the reduction; rows-major: a_row = lda, a_pair = 1,
// FlashPackPairsRows; pairs-major: a_row = 1, a_pair = lda, FlashPackPairsB
// of the transpose), b[(t * ldb + x) * 2 + {0, 1}] = b0, b1 (rows 2t and
// 2t + 1 of B, column x). cols a multiple of 16, ldb and ldc >= cols.
// VDPBF16PS where `simd` and FlashBf16DotAvailable(), else float32 loops:
// the products of two bfloat16 values are exact in float32, so both differ
// from the exact sum of the products by float32 rounding of the sums only,
// |error| <= 2 pairs * 2^-23 * sum |products| (+ one rounding of the beta
// term). VDPBF16PS flushes inputs and results below 2^-126 to zero.
void FlashMatMulBf16(const std::uint32_t* a, std::int64_t a_row, std::int64_t a_pair,
                     std::int64_t rows, const std::uint16_t* b, std::int64_t pairs,
                     std::int64_t ldb, std::int64_t cols, const float* beta, float* c,
                     std::int64_t ldc, bool simd);

// Operand packing for FlashMatMulBf16, rounding float32 to bfloat16
// (nearest even; VCVTNE(2)PS2BF16 where `simd` and FlashBf16DotAvailable(),
// which also flushes inputs below 2^-126 to zero); a missing odd element of
// the last pair is 0.
// Rows-major A: src [rows, n] (row stride ld) -> a [rows, lda] (lda >=
// (n + 1) / 2), pairs along n.
void FlashPackPairsRows(const float* src, std::int64_t ld, std::int64_t rows, std::int64_t n,
                        std::uint32_t* a, std::int64_t lda, bool simd);
// B: src [n, cols] -> b [(n + 1) / 2, ldb, 2], pairs along n (rows 2t and
// 2t + 1 interleaved), zero for cols <= x < ldb. Read as uint32 [pairs,
// ldb] it is also the pairs-major A of src's transpose (a_row = 1,
// a_pair = ldb): P^T for dV = P^T dO, dS^T for dK = dS^T Q.
void FlashPackPairsB(const float* src, std::int64_t ld, std::int64_t n, std::int64_t cols,
                     std::uint16_t* b, std::int64_t ldb, bool simd);

// AMX runs the bfloat16 logits: the CPU has AMX-BF16, Linux granted the
// tile state (kernels/simd/x86_features.h) and dim % 32 == 0.
bool FlashAmxLogitsAvailable(std::int64_t dim);

// The two implementations of FlashTileLogitsBf16, same arguments (tests run
// each where the CPU has it): AVX512_BF16 (flash_bf16.cc; only when
// FlashBf16DotAvailable()) and AMX (flash_amx.cc; only when
// FlashAmxLogitsAvailable(dim)).
void FlashTileLogitsAvx512Bf16(const std::uint32_t* q_pairs, std::int64_t ldq,
                               const std::uint16_t* kt_pairs, std::int64_t nq, std::int64_t dim,
                               std::int64_t ld, float* s);
void FlashTileLogitsAmx(const std::uint32_t* q_pairs, std::int64_t ldq,
                        const std::uint16_t* kt_pairs, std::int64_t nq, std::int64_t dim,
                        std::int64_t ld, float* s);

}  // namespace posenc::kernels::simd
