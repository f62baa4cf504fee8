// SIMD ALiBi and T5 bias kernels: per-target code in bias-inl.h, one dynamic
// dispatch per public call here. Design and numerics: kernels/simd/bias.h.
#include "kernels/simd/bias.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/bias.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/simd/bias-inl.h"

#if HWY_ONCE
namespace posenc::kernels::simd {

HWY_EXPORT(AlibiRowsImpl);
HWY_EXPORT(T5BucketRangeImpl);
HWY_EXPORT(T5FillRowsImpl);
HWY_EXPORT(T5TileImpl);

bool BiasSupported(DType dtype, std::int64_t col_stride) {
  (void)dtype;  // every storage dtype has a fast path
  return col_stride == 1;
}

void AlibiRows(const AlibiRowsSpec& spec, void* out, DType dtype, std::int64_t head_stride,
               std::int64_t row_stride, const Context& ctx) {
  HWY_DYNAMIC_DISPATCH(AlibiRowsImpl)(spec, out, dtype, head_stride, row_stride, ctx);
}

void T5BucketRange(const T5BucketSpec& spec, std::int64_t first, std::int64_t count,
                   std::int32_t* out) {
  HWY_DYNAMIC_DISPATCH(T5BucketRangeImpl)(spec, first, count, out);
}

std::int64_t T5BucketFallbacks(const T5BucketSpec& spec, std::int64_t first, std::int64_t count) {
  return HWY_DYNAMIC_DISPATCH(T5BucketRangeImpl)(spec, first, count, nullptr);
}

void T5FillRows(const T5TableSpec& spec, const Positions& query_positions, std::int64_t rows,
                std::int64_t cols, void* out, DType dtype, std::int64_t head_stride,
                std::int64_t row_stride, const Context& ctx) {
  HWY_DYNAMIC_DISPATCH(T5FillRowsImpl)
  (spec, query_positions, rows, cols, out, dtype, head_stride, row_stride, ctx);
}

void T5Tile(const T5TableSpec& spec, std::int64_t head, const std::int64_t* query_pos,
            std::int64_t nq, const std::int64_t* key_pos, std::int64_t nk, void* out, DType dtype,
            std::int64_t ld, TileWrite write) {
  HWY_DYNAMIC_DISPATCH(T5TileImpl)(spec, head, query_pos, nq, key_pos, nk, out, dtype, ld, write);
}

}  // namespace posenc::kernels::simd
#endif  // HWY_ONCE
