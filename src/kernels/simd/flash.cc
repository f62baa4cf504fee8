// SIMD tile kernels of the fused attention: per-target code in
// flash-inl.h, flash_decode-inl.h and flash_transpose-inl.h, dispatch here. Numerics and coverage:
// kernels/simd/flash.h.
#include "kernels/simd/flash.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/flash.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/simd/flash-inl.h"
#include "kernels/simd/flash_decode-inl.h"
#include "kernels/simd/flash_transpose-inl.h"

#if HWY_ONCE
#include "kernels/dassert.h"

namespace posenc::kernels::simd {

HWY_EXPORT(FlashTileLogitsImpl);
HWY_EXPORT(FlashTileLogitsColsImpl);
HWY_EXPORT(FlashExpRowImpl);
HWY_EXPORT(FlashAccumulatePVImpl);
HWY_EXPORT(FlashAccumulatePVScaledImpl);
HWY_EXPORT(FlashAccumulatePVRowsImpl);
HWY_EXPORT(FlashScaleRowImpl);
HWY_EXPORT(FlashAccumulatePTVImpl);
HWY_EXPORT(FlashBackwardRowImpl);
HWY_EXPORT(FlashBackwardTileImpl);
HWY_EXPORT(FlashAddRowImpl);
HWY_EXPORT(FlashSoftmaxTileImpl);
HWY_EXPORT(FlashLoadRowsImpl);
HWY_EXPORT(FlashTransposeTileImpl);
HWY_EXPORT(FlashStoreRowsImpl);
HWY_EXPORT(FlashRowDotsF64Impl);
HWY_EXPORT(FlashRowDotsF64StoredImpl);
HWY_EXPORT(FlashLogSumExpImpl);
HWY_EXPORT(FlashRoundRowsBf16Impl);
HWY_EXPORT(FlashTouchImpl);
HWY_EXPORT(FlashDecodeLogitsImpl);
HWY_EXPORT(FlashDecodeLogitsStoredImpl);
HWY_EXPORT(FlashAccumulatePVStoredImpl);

void FlashTileLogits(const float* q, std::int64_t ldq, const float* kt, std::int64_t nq,
                     std::int64_t dim, std::int64_t ld, float* s) {
  POSENC_DASSERT(ld % kFlashPad == 0 && ldq >= dim && nq >= 0 && dim >= 0);
  HWY_DYNAMIC_DISPATCH(FlashTileLogitsImpl)(q, ldq, kt, nq, dim, ld, s);
}

void FlashTileLogitsCols(const float* q, std::int64_t ldq, const float* kt, std::int64_t nq,
                         std::int64_t dim, std::int64_t ld, std::int64_t cols, float* s) {
  POSENC_DASSERT(ld % kFlashPad == 0 && cols % kFlashPad == 0 && cols <= ld && ldq >= dim &&
                 nq >= 0 && dim >= 0);
  HWY_DYNAMIC_DISPATCH(FlashTileLogitsColsImpl)(q, ldq, kt, nq, dim, ld, cols, s);
}

void FlashAccumulatePTV(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                        std::int64_t nk, std::int64_t ldv, float* acc) {
  POSENC_DASSERT(ldv % kFlashPad == 0 && nk >= 0 && nk <= ldp && nq >= 0);
  HWY_DYNAMIC_DISPATCH(FlashAccumulatePTVImpl)(p, ldp, v, nq, nk, ldv, acc);
}

void FlashBackwardRow(float* s, float* dp, std::int64_t nk, std::int64_t ld, float scale,
                      const float* bias, float lse, float delta, FlashRowRounding rounding,
                      FlashExp exp) {
  POSENC_DASSERT(ld % kFlashPad == 0 && nk >= 0 && nk <= ld);
  HWY_DYNAMIC_DISPATCH(FlashBackwardRowImpl)
  (s, dp, nk, ld, scale, bias, lse, delta, rounding == FlashRowRounding::kBFloat16,
   FlashBf16ConvertPreferred(), exp == FlashExp::kBFloat16);
}

void FlashBackwardTile(float* s, float* dp, std::int64_t ld, std::int64_t nq, std::int64_t nk,
                       float scale, const float* lse, const float* delta,
                       const FlashBackwardRows& rows) {
  POSENC_DASSERT(ld % kFlashPad == 0 && nk >= 0 && nk <= ld && nq >= 0);
  HWY_DYNAMIC_DISPATCH(FlashBackwardTileImpl)
  (s, dp, ld, nq, nk, scale, rows.bias, lse, delta, rows.visible, rows.cols,
   rows.rounding == FlashRowRounding::kBFloat16, FlashBf16ConvertPreferred(),
   rows.exp == FlashExp::kBFloat16);
}

void FlashSoftmaxTile(float* s, std::int64_t ld, std::int64_t nq, std::int64_t nk, float scale,
                      const float* const* bias, float* m, float* l, float* alpha,
                      const FlashSoftmaxRows& rows) {
  POSENC_DASSERT(ld % kFlashPad == 0 && nk >= 0 && nk <= ld && nq >= 0);
  HWY_DYNAMIC_DISPATCH(FlashSoftmaxTileImpl)
  (s, ld, nq, nk, scale, bias, m, l, alpha, rows.visible, rows.cols,
   rows.rounding == FlashRowRounding::kBFloat16, FlashBf16ConvertPreferred(),
   rows.exp == FlashExp::kBFloat16);
}

void FlashAddRow(float* dst, const float* src, std::int64_t n) {
  POSENC_DASSERT(n >= 0);
  HWY_DYNAMIC_DISPATCH(FlashAddRowImpl)(dst, src, n);
}

void FlashLogSumExp(const float* m, const float* l, std::int64_t n, float* lse) {
  POSENC_DASSERT(n >= 0);
  HWY_DYNAMIC_DISPATCH(FlashLogSumExpImpl)(m, l, n, lse);
}

void FlashRowDotsF64(const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                     std::int64_t n, std::int64_t dim, double* out) {
  POSENC_DASSERT(n >= 0 && dim >= 0 && lda >= dim && ldb >= dim);
  HWY_DYNAMIC_DISPATCH(FlashRowDotsF64Impl)(a, lda, b, ldb, n, dim, out);
}

void FlashRowDotsF64Stored(FlashStorage storage, const float* a, std::int64_t lda, const void* b,
                           std::int64_t ldb, std::int64_t n, std::int64_t dim, double* out) {
  POSENC_DASSERT(n >= 0 && dim >= 0 && lda >= dim);  // ldb: a view's stride, any
  HWY_DYNAMIC_DISPATCH(FlashRowDotsF64StoredImpl)
  (static_cast<int>(storage), a, lda, b, ldb, n, dim, out);
}

void FlashLoadRows(FlashStorage storage, const void* src, std::int64_t stride, std::int64_t n,
                   std::int64_t dim, float* dst, std::int64_t ld) {
  POSENC_DASSERT(ld >= dim && dim >= 0 && n >= 0);
  HWY_DYNAMIC_DISPATCH(FlashLoadRowsImpl)(static_cast<int>(storage), src, stride, n, dim, dst, ld);
}

void FlashTransposeTile(const float* rows, std::int64_t n, std::int64_t dim, std::int64_t ld_rows,
                        float* dst, std::int64_t ldk) {
  POSENC_DASSERT(n >= 0 && dim >= 0 && ld_rows >= dim && ldk >= n);
  HWY_DYNAMIC_DISPATCH(FlashTransposeTileImpl)(rows, n, dim, ld_rows, dst, ldk);
}

void FlashStoreRows(const float* src, std::int64_t ld, std::int64_t n, std::int64_t dim,
                    float scale, FlashStorage storage, void* dst, std::int64_t stride,
                    const float* row_scale) {
  POSENC_DASSERT(ld >= dim && dim >= 0 && n >= 0 && storage != FlashStorage::kFloat16);
  HWY_DYNAMIC_DISPATCH(FlashStoreRowsImpl)
  (static_cast<int>(storage), src, ld, n, dim, scale, row_scale, dst, stride,
   storage == FlashStorage::kBFloat16 && FlashBf16ConvertPreferred());
}

void FlashRoundRowsBf16(const float* src, std::int64_t ld, std::int64_t rows, std::int64_t n,
                        float* dst) {
  POSENC_DASSERT(ld >= n && n % kFlashPad == 0 && rows >= 0);
  HWY_DYNAMIC_DISPATCH(FlashRoundRowsBf16Impl)(src, ld, rows, n, dst);
}

std::uint32_t FlashTouch(const void* p, std::int64_t bytes) {
  POSENC_DASSERT(bytes >= 0);
  return HWY_DYNAMIC_DISPATCH(FlashTouchImpl)(p, bytes);
}

void FlashDecodeLogits(const float* q, std::int64_t ldq, std::int64_t rows, const float* k,
                       std::int64_t ldk_rows, std::int64_t nk, std::int64_t dim, float* s,
                       std::int64_t lds) {
  POSENC_DASSERT(dim % kFlashPad == 0 && ldq >= dim && nk >= 0 &&
                 lds >= (nk + kFlashPad - 1) / kFlashPad * kFlashPad);
  HWY_DYNAMIC_DISPATCH(FlashDecodeLogitsImpl)(q, ldq, rows, k, ldk_rows, nk, dim, s, lds);
}

void FlashDecodeLogitsStored(FlashStorage storage, const float* q, std::int64_t ldq,
                             std::int64_t rows, const void* k, std::int64_t ldk_rows,
                             std::int64_t nk, std::int64_t dim, float* s, std::int64_t lds) {
  POSENC_DASSERT(dim % kFlashPad == 0 && ldq >= dim && nk >= 0 &&
                 lds >= (nk + kFlashPad - 1) / kFlashPad * kFlashPad);
  HWY_DYNAMIC_DISPATCH(FlashDecodeLogitsStoredImpl)
  (static_cast<int>(storage), q, ldq, rows, k, ldk_rows, nk, dim, s, lds);
}

float FlashExpRow(float* row, std::int64_t n, float max, FlashExp exp) {
  POSENC_DASSERT(n % kFlashPad == 0);
  return HWY_DYNAMIC_DISPATCH(FlashExpRowImpl)(row, n, max, exp == FlashExp::kBFloat16);
}

void FlashAccumulatePV(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                       std::int64_t nk, std::int64_t ldv, float* acc) {
  POSENC_DASSERT(ldv % kFlashPad == 0 && nk >= 0 && nk <= ldp && nq >= 0);
  HWY_DYNAMIC_DISPATCH(FlashAccumulatePVImpl)(p, ldp, v, nq, nk, ldv, acc);
}

void FlashAccumulatePVRows(const float* p, std::int64_t ldp, const float* v, std::int64_t ldvr,
                           std::int64_t nq, std::int64_t nk, std::int64_t ldv, const float* alpha,
                           float* acc) {
  POSENC_DASSERT(ldv % kFlashPad == 0 && ldvr >= ldv && nk >= 0 && nk <= ldp && nq >= 0);
  HWY_DYNAMIC_DISPATCH(FlashAccumulatePVRowsImpl)(p, ldp, v, ldvr, nq, nk, ldv, alpha, acc);
}

void FlashAccumulatePVScaled(const float* p, std::int64_t ldp, const float* v, std::int64_t nq,
                             std::int64_t nk, std::int64_t ldv, const float* alpha, float* acc) {
  POSENC_DASSERT(ldv % kFlashPad == 0 && nk >= 0 && nk <= ldp && nq >= 0);
  HWY_DYNAMIC_DISPATCH(FlashAccumulatePVScaledImpl)(p, ldp, v, nq, nk, ldv, alpha, acc);
}

void FlashAccumulatePVStored(FlashStorage storage, const float* p, std::int64_t ldp, const void* v,
                             std::int64_t ldvr, std::int64_t nq, std::int64_t nk, std::int64_t dv,
                             std::int64_t ldv, const float* alpha, float* acc) {
  POSENC_DASSERT(ldv % kFlashPad == 0 && dv <= ldv && nk >= 0 && nk <= ldp);
  HWY_DYNAMIC_DISPATCH(FlashAccumulatePVStoredImpl)
  (static_cast<int>(storage), p, ldp, v, ldvr, nq, nk, dv, ldv, alpha, acc);
}

float FlashScaleRow(float* row, std::int64_t nk, std::int64_t ld, float scale, const float* bias) {
  POSENC_DASSERT(ld % kFlashPad == 0 && nk >= 0 && nk <= ld);
  return HWY_DYNAMIC_DISPATCH(FlashScaleRowImpl)(row, nk, ld, scale, bias);
}

}  // namespace posenc::kernels::simd
#endif  // HWY_ONCE
