// Per-target sinusoidal table kernels (included once per Highway target by
// sinusoidal.cc). Numerics and coverage: kernels/simd/sinusoidal.h.

#if defined(POSENC_KERNELS_SIMD_SINUSOIDAL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_KERNELS_SIMD_SINUSOIDAL_INL_H_
#undef POSENC_KERNELS_SIMD_SINUSOIDAL_INL_H_
#else
#define POSENC_KERNELS_SIMD_SINUSOIDAL_INL_H_
#endif

#include <algorithm>
#include <cstring>
#include <vector>

#include <hwy/highway.h>

#include "kernels/simd/simd_math-inl.h"
#include "kernels/simd/sinusoidal.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::kernels::simd {
namespace HWY_NAMESPACE {

namespace sin_detail {

struct Columns {
  std::vector<double> freq, wc, ws, small_cos, small_sin;
  TrigCols cols;
};

// Column c of a row is wc[c] cos(p f[c]) + ws[c] sin(p f[c]).
void MakeColumns(const scalar::SinusoidalRowSpec& spec, Columns& t) {
  const std::int64_t ncols = spec.num_sin + spec.num_cos, pad = PadCols(ncols);
  for (auto* v : {&t.freq, &t.wc, &t.ws}) v->assign(pad, 0.0);
  for (std::int64_t i = 0; i < spec.num_sin; ++i) {
    const std::int64_t sc = spec.interleaved ? 2 * i : i;
    t.freq[sc] = spec.inv_freq[i];
    t.ws[sc] = 1.0;
    if (i < spec.num_cos) {
      const std::int64_t cc = spec.interleaved ? 2 * i + 1 : spec.num_sin + i;
      t.freq[cc] = spec.inv_freq[i];
      t.wc[cc] = 1.0;
    }
  }
  t.cols = TrigCols{t.freq.data(), t.wc.data(), t.ws.data(), nullptr, nullptr,
                    ncols,         pad,         nullptr,     nullptr};
  AttachSmallTable(t.cols, t.small_cos, t.small_sin);
}

constexpr std::int64_t kRowTile = 64;

// Stores (or adds to) the first min(cols, lanes) columns at p.
template <Store S, bool kAdd, class DD>
HWY_INLINE void PutChunk(DD dd, hn::Vec<DD> v, char* p, std::int64_t cols) {
  const hn::Rebind<float, DD> dfh;
  const std::int64_t nl = static_cast<std::int64_t>(hn::Lanes(dd));
  alignas(64) char tmp[kPadLanes * 4];
  const bool full = cols >= nl;
  char* dst = full ? p : tmp;
  if constexpr (kAdd) {
    if (!full) std::memcpy(tmp, p, static_cast<std::size_t>(cols * kStoreBytes<S>));
    v = hn::Add(hn::PromoteTo(dd, LoadF<S>(dfh, dst)), v);
  }
  StoreF<S>(dfh, hn::DemoteTo(dfh, v), dst);
  if (!full) std::memcpy(p, tmp, static_cast<std::size_t>(cols * kStoreBytes<S>));
}

template <Store S, bool kAdd, class PosOf>
HWY_INLINE void Rows(const TrigCols& cols, std::int64_t n, bool consecutive, PosOf pos_of,
                     char* base, std::int64_t row_stride) {
  const hn::ScalableTag<double> dd;
  const std::int64_t ncols = cols.ncols;  // a local: the stores below may alias `cols`
  TrigRows<false>(cols, n, consecutive, pos_of,
                  [&](std::int64_t r, std::int64_t c, hn::Vec<decltype(dd)> v0,
                      hn::Vec<decltype(dd)>) HWY_ATTR {
                    if (c >= ncols) return;
                    char* p = base + (r * row_stride + c) * kStoreBytes<S>;
                    PutChunk<S, kAdd>(dd, v0, p, ncols - c);
                  });
}

template <Store S>
void TableTyped(const scalar::SinusoidalRowSpec& spec, const Positions& positions,
                std::int64_t rows, void* out, std::int64_t row_stride, const Context& ctx) {
  Columns t;
  MakeColumns(spec, t);
  const std::int64_t tiles = (rows + kRowTile - 1) / kRowTile;
  ctx.ParallelFor(tiles, [&](std::int64_t tile, int) {
    const std::int64_t r0 = tile * kRowTile, n = std::min(rows, r0 + kRowTile) - r0;
    auto pos_of = [&](std::int64_t r) { return positions.At(0, r0 + r, rows); };
    char* base = static_cast<char*>(out) + r0 * row_stride * kStoreBytes<S>;
    // Consecutive ids take the same (angle-addition) path as an offset, so
    // the two forms of one table are bit-identical.
    bool consecutive = true;
    for (std::int64_t r = 1; r < n && consecutive; ++r) consecutive = pos_of(r) == pos_of(0) + r;
    Rows<S, false>(t.cols, n, consecutive, pos_of, base, row_stride);
  });
}

template <Store S>
void AddTyped(const scalar::SinusoidalRowSpec& spec, const Positions& positions, std::int64_t batch,
              std::int64_t seq, void* x, std::int64_t stride_batch, std::int64_t stride_seq,
              const Context& ctx) {
  Columns t;
  MakeColumns(spec, t);
  const std::int64_t tiles = (seq + kRowTile - 1) / kRowTile;
  ctx.ParallelFor(batch * tiles, [&](std::int64_t task, int) {
    const std::int64_t b = task / tiles, s0 = (task % tiles) * kRowTile;
    const std::int64_t n = std::min(seq, s0 + kRowTile) - s0;
    auto pos_of = [&](std::int64_t r) { return positions.At(b, s0 + r, seq); };
    bool consecutive = true;
    for (std::int64_t r = 1; r < n && consecutive; ++r) consecutive = pos_of(r) == pos_of(0) + r;
    char* base = static_cast<char*>(x) + (b * stride_batch + s0 * stride_seq) * kStoreBytes<S>;
    Rows<S, true>(t.cols, n, consecutive, pos_of, base, stride_seq);
  });
}

}  // namespace sin_detail

void SinusoidalRowsImpl(const scalar::SinusoidalRowSpec& spec, const Positions& positions,
                        std::int64_t rows, void* out, DType dtype, std::int64_t row_stride,
                        const Context& ctx) {
  using sin_detail::TableTyped;
  switch (dtype) {
    case DType::kFloat32:
      TableTyped<Store::kF32>(spec, positions, rows, out, row_stride, ctx);
      break;
    case DType::kBFloat16:
      TableTyped<Store::kBF16>(spec, positions, rows, out, row_stride, ctx);
      break;
    case DType::kFloat16:
      TableTyped<Store::kF16>(spec, positions, rows, out, row_stride, ctx);
      break;
    case DType::kFloat64:
      break;  // not supported: SinusoidalSupported is false
  }
}

void AddSinusoidalRowsImpl(const scalar::SinusoidalRowSpec& spec, const Positions& positions,
                           std::int64_t batch, std::int64_t seq, void* x, DType dtype,
                           std::int64_t stride_batch, std::int64_t stride_seq, const Context& ctx) {
  using sin_detail::AddTyped;
  switch (dtype) {
    case DType::kFloat32:
      AddTyped<Store::kF32>(spec, positions, batch, seq, x, stride_batch, stride_seq, ctx);
      break;
    case DType::kBFloat16:
      AddTyped<Store::kBF16>(spec, positions, batch, seq, x, stride_batch, stride_seq, ctx);
      break;
    case DType::kFloat16:
      AddTyped<Store::kF16>(spec, positions, batch, seq, x, stride_batch, stride_seq, ctx);
      break;
    case DType::kFloat64:
      break;  // not supported: SinusoidalSupported is false
  }
}

void SinCosBatchImpl(const double* angles, std::int64_t n, double* sin, double* cos) {
  const hn::ScalableTag<double> dd;
  const std::int64_t nd = static_cast<std::int64_t>(hn::Lanes(dd));
  alignas(64) double a[kPadLanes] = {}, s[kPadLanes], c[kPadLanes];
  for (std::int64_t i = 0; i < n; i += nd) {
    const std::int64_t m = std::min(nd, n - i);
    std::copy(angles + i, angles + i + m, a);
    hn::Vec<decltype(dd)> vs, vc;
    SinCos(dd, hn::Load(dd, a), vs, vc);
    hn::Store(vs, dd, s);
    hn::Store(vc, dd, c);
    std::copy(s, s + m, sin + i);
    std::copy(c, c + m, cos + i);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace posenc::kernels::simd
HWY_AFTER_NAMESPACE();

#endif  // POSENC_KERNELS_SIMD_SINUSOIDAL_INL_H_ toggle
