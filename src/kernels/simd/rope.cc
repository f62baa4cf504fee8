// SIMD RoPE kernels: per-target code in rope-inl.h, dispatch here.
// Numerics, conventions and coverage: kernels/simd/rope.h.
#include "kernels/simd/rope.h"

#include <algorithm>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/rope.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/simd/rope-inl.h"

#if HWY_ONCE
#include "kernels/thread_scratch.h"

namespace posenc::kernels::simd {

HWY_EXPORT(RopeApplyImpl);
HWY_EXPORT(RopeCosSinImpl);

bool RopeFastDType(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16;
}

namespace {
bool FreqsInRange(const double* inv_freq, std::int64_t half) {
  return std::all_of(inv_freq, inv_freq + half,
                     [](double f) { return f >= 0.0 && f <= kMaxFastInvFreq; });
}
}  // namespace

bool RopeApplySupported(const RopeApplySpec& spec, const RopeTensor* tensors, int num_tensors) {
  if (num_tensors < 1 || num_tensors > 2) return false;
  for (int i = 0; i < num_tensors; ++i) {
    if (!RopeFastDType(tensors[i].dtype)) return false;
  }
  return spec.cache.data != nullptr || FreqsInRange(spec.inv_freq, spec.half);
}

void RopeApply(const RopeApplySpec& spec, const RopeTensor* tensors, int num_tensors,
               const Context& ctx) {
  HWY_DYNAMIC_DISPATCH(RopeApplyImpl)(spec, tensors, num_tensors, ctx);
}

bool RopeCosSinSupported(const RopeTableSpec& spec, const RopeTableOut& cos,
                         const RopeTableOut& sin) {
  return RopeFastDType(cos.dtype) && RopeFastDType(sin.dtype) &&
         FreqsInRange(spec.inv_freq, spec.half);
}

void RopeCosSinTable(const RopeTableSpec& spec, const RopeTableOut& cos, const RopeTableOut& sin,
                     const Context& ctx) {
  HWY_DYNAMIC_DISPATCH(RopeCosSinImpl)(spec, cos, sin, ctx);
}

bool TryRopeApply(const RopeApplySpec& spec, const RopeViews* views, int num_views,
                  const Context& ctx) {
  if (num_views < 1 || num_views > 2) return false;
  RopeTensor tensors[2];
  for (int i = 0; i < num_views; ++i) {
    const RopeViews& v = views[i];
    if (v.din->stride_dim != 1 || v.dout->stride_dim != 1) return false;
    RopeTensor& t = tensors[i];
    t.in = v.in->data;
    t.out = v.out->data;
    t.dtype = v.in->dtype;
    t.heads = v.din->heads;
    t.in_stride_batch = v.din->stride_batch;
    t.in_stride_seq = v.din->stride_seq;
    t.in_stride_head = v.din->stride_head;
    t.out_stride_batch = v.dout->stride_batch;
    t.out_stride_seq = v.dout->stride_seq;
    t.out_stride_head = v.dout->stride_head;
  }
  if (!RopeApplySupported(spec, tensors, num_views)) return false;
  RopeApply(spec, tensors, num_views, ctx);
  return true;
}

bool TryRopeCosSin(const RopeTableSpec& spec, const TensorView& cos, const TensorView& sin,
                   const Context& ctx) {
  const RopeTableOut c{cos.data, cos.dtype, cos.strides[0]};
  const RopeTableOut s{sin.data, sin.dtype, sin.strides[0]};
  if (cos.strides[1] != 1 || sin.strides[1] != 1 || !RopeCosSinSupported(spec, c, s)) {
    return false;
  }
  RopeCosSinTable(spec, c, s, ctx);
  return true;
}

}  // namespace posenc::kernels::simd
#endif  // HWY_ONCE
