// Shared internals of the fused attention (attention/flash_internal.h):
// validation of one call, float32 row loads, transposes, RoPE on float32
// tiles, the position terms of a tile (TileTerms).
#include "attention/flash_internal.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "posenc/error.h"

namespace posenc::flash_internal {

namespace {

// The validated shapes and positions of a call, as a Problem's fields.
Problem FromShape(const attention_internal::CallShape& shape) {
  Problem p;
  p.qd = shape.qd;
  p.kd = shape.kd;
  p.vd = shape.vd;
  p.dims = shape.dims;
  p.window = shape.window;
  p.query_positions = shape.query_positions;
  p.key_positions = shape.key_positions;
  return p;
}

// `out`: writable, [B, Sq, H, Dv] in the layout, no overlap with q, k, v.
void SetOutput(Problem& p, AttentionLayout layout, const TensorView& out, const TensorView& q,
               const TensorView& k, const TensorView& v) {
  const auto& d = p.dims;
  p.od = attention_internal::CheckAttentionTensor(out, layout, "out", d.batch, d.query_len, d.heads,
                                                  d.value_dim, /*writable=*/true);
  RequireNoOverlap(out, "out", q, "q", /*inplace_allowed=*/false);
  RequireNoOverlap(out, "out", k, "k", /*inplace_allowed=*/false);
  RequireNoOverlap(out, "out", v, "v", /*inplace_allowed=*/false);
}

// q's heads and head dim and the value dim against a decode plan's.
void CheckPlanDims(const PreparedDecode::State& plan, const attention_internal::Dims& d,
                   const char* value_arg) {
  if (d.heads != plan.heads) {
    FailArgument("q heads", d.heads, "the plan's heads (" + std::to_string(plan.heads) + ")");
  }
  if (d.head_dim != plan.head_dim) {
    FailArgument("q head_dim", d.head_dim,
                 "the plan's head_dim (" + std::to_string(plan.head_dim) + ")");
  }
  if (d.value_dim != plan.value_dim) {
    FailArgument(value_arg, d.value_dim,
                 "the plan's value_dim (" + std::to_string(plan.value_dim) + ")");
  }
}

// The plan's mask, scheme, scale and key rotation.
void SetPlan(Problem& p, const PreparedDecode::State& plan) {
  p.mask = plan.mask;
  p.scheme = plan.scheme;
  p.scale = plan.scale;
  p.rope = p.scheme->rotation();
  p.rotate_keys = p.rope != nullptr && plan.rope_keys == FlashRopeKeys::kRotate;
  p.precision = plan.precision;
}

}  // namespace

void CheckPrecisionInputs(FlashPrecision precision,
                          std::initializer_list<std::pair<const char*, const TensorView*>> inputs) {
  if (precision != FlashPrecision::kBFloat16) return;
  for (const auto& [name, view] : inputs) {
    if (view->dtype == DType::kBFloat16) continue;
    throw InvalidArgument(ArgMessage(
        "precision", std::string("bfloat16"),
        std::string("float32 for ") + name + " of dtype " + std::string(DTypeName(view->dtype)) +
            " (bfloat16 rounds P and dS to the precision of bfloat16 inputs: it needs "
            "bfloat16 q, k, v and dout; allowed values: float32, bfloat16)"));
  }
}

Problem SetupInputs(const AttentionParams& params, const TensorView& q, const TensorView& k,
                    const TensorView& v, const FlashAttentionOptions& options) {
  ValidateFlashAttentionOptions(options);
  const SchemeInfo& info = FindScheme(attention_internal::SchemeName(params.scheme), "scheme.name");
  if (!info.Fused()) {
    std::string reference_only;
    for (const SchemeInfo* s : RegisteredSchemes()) {
      if (!s->Fused())
        reference_only += (reference_only.empty() ? "" : ", ") + std::string(s->name);
    }
    throw InvalidArgument(ArgMessage("scheme.name", std::string(info.name),
                                     "one of " + SchemeNames(/*fused_only=*/true) +
                                         " (flash attention; use AttentionReference for " +
                                         reference_only + ")"));
  }
  Problem p = FromShape(attention_internal::ValidateCallShape(params, q, k, v));
  p.mask = params.mask;
  p.scheme = attention_internal::ResolveScheme(params.scheme, {p.dims, p.mask});
  p.scale = static_cast<float>(EffectiveAttentionScale(params, p.qd.head_dim));
  p.rope = p.scheme->rotation();
  p.rotate_keys = p.rope != nullptr && options.rope_keys == FlashRopeKeys::kRotate;
  p.precision = options.precision;
  CheckPrecisionInputs(p.precision, {{"q", &q}, {"k", &k}, {"v", &v}});
  return p;
}

Problem Setup(const AttentionParams& params, const TensorView& q, const TensorView& k,
              const TensorView& v, const TensorView& out, const FlashAttentionOptions& options) {
  Problem p = SetupInputs(params, q, k, v, options);
  SetOutput(p, params.layout, out, q, k, v);
  return p;
}

Problem SetupPrepared(const PreparedDecode::State& plan, const TensorView& q, const TensorView& k,
                      const TensorView& v, const TensorView& out,
                      const std::optional<Positions>& query_positions,
                      const std::optional<Positions>& key_positions) {
  AttentionParams call;  // the shape checks' view of the call (no scheme: the plan has it)
  call.layout = plan.layout;
  call.mask = plan.mask;
  call.sliding_window = plan.sliding_window;
  call.query_positions = query_positions;
  call.key_positions = key_positions;
  const attention_internal::CallShape shape = attention_internal::ValidateCallShape(call, q, k, v);
  CheckPlanDims(plan, shape.dims, "v head_dim");
  Problem p = FromShape(shape);
  SetPlan(p, plan);
  CheckPrecisionInputs(p.precision, {{"q", &q}, {"k", &k}, {"v", &v}});
  SetOutput(p, plan.layout, out, q, k, v);
  return p;
}

Problem SetupPaged(const PreparedDecode::State& plan, const TensorView& q,
                   const PagedKVCache& cache, const TensorView& out,
                   const std::optional<Positions>& query_positions,
                   const std::optional<Positions>& key_positions) {
  const AttentionDims qd = GetAttentionDims(q, plan.layout, "q");
  const AttentionDims kd = GetAttentionDims(cache.k_pages, AttentionLayout::kBSHD, "cache.k_pages");
  const AttentionDims vd = GetAttentionDims(cache.v_pages, AttentionLayout::kBSHD, "cache.v_pages");
  if (kd.head_dim != qd.head_dim) {
    FailArgument("cache.k_pages head_dim", kd.head_dim,
                 "q's head_dim (" + std::to_string(qd.head_dim) + ")");
  }
  if (qd.heads % kd.heads != 0) {
    FailArgument(
        "cache.k_pages heads", kd.heads,
        "a divisor of q's heads (" + std::to_string(qd.heads) + ", grouped-query attention)");
  }
  const auto same = [&](const char* what, std::int64_t got, std::int64_t want) {
    if (got != want) {
      FailArgument(std::string("cache.v_pages ") + what, got,
                   "k_pages' " + std::string(what) + " (" + std::to_string(want) + ")");
    }
  };
  same("num_pages", vd.batch, kd.batch);
  same("page_size", vd.seq, kd.seq);
  same("heads", vd.heads, kd.heads);
  if (cache.block_table == nullptr) {
    FailArgument("cache.block_table", std::string("null"), "[batch, max_pages] page ids");
  }
  if (cache.seq_lens == nullptr) {
    FailArgument("cache.seq_lens", std::string("null"), "[batch] sequence lengths");
  }
  Require(cache.max_pages >= 1 && cache.max_pages <= kMaxPosition + 1, "cache.max_pages",
          cache.max_pages, "a count in [1, 2^24] (entries per block_table row)");
  const std::int64_t batch = qd.batch, sq = qd.seq, page_size = kd.seq, num_pages = kd.batch;
  const std::int64_t capacity = cache.max_pages * page_size;
  std::int64_t longest = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t len = cache.seq_lens[b];
    if (len < sq || len > capacity) {
      FailArgument("cache.seq_lens[" + std::to_string(b) + "]", len,
                   "a length in [Sq, max_pages * page_size] = [" + std::to_string(sq) + ", " +
                       std::to_string(capacity) + "]");
    }
    longest = std::max(longest, len);
    const std::int32_t* row = cache.block_table + b * cache.max_pages;
    for (std::int64_t i = 0; i < (len + page_size - 1) / page_size; ++i) {
      if (row[i] < 0 || row[i] >= num_pages) {
        FailArgument("cache.block_table[" + std::to_string(b) + "][" + std::to_string(i) + "]",
                     row[i],
                     "a page id in [0, num_pages) = [0, " + std::to_string(num_pages) + ")");
      }
    }
  }
  Problem p;
  p.qd = qd;
  p.kd = kd;
  p.vd = vd;
  p.dims =
      attention_internal::Dims{batch, qd.heads, kd.heads, sq, longest, qd.head_dim, vd.head_dim};
  CheckPlanDims(plan, p.dims, "cache.v_pages head_dim");
  if (plan.sliding_window.has_value()) p.window = *plan.sliding_window;
  p.pages.block_table = cache.block_table;
  p.pages.max_pages = cache.max_pages;
  p.pages.page_size = page_size;
  p.pages.seq_lens = cache.seq_lens;
  p.pages.default_queries = !query_positions.has_value();
  if (query_positions.has_value()) {
    p.query_positions = *query_positions;
    ValidatePositions(p.query_positions, batch, sq, "query_positions");
  }
  p.key_positions = key_positions.value_or(Positions::Offset(0));
  ValidatePositions(p.key_positions, batch, longest, "key_positions");
  SetPlan(p, plan);
  CheckPrecisionInputs(
      p.precision,
      {{"q", &q}, {"cache.k_pages", &cache.k_pages}, {"cache.v_pages", &cache.v_pages}});
  SetOutput(p, plan.layout, out, q, cache.k_pages, cache.v_pages);
  return p;
}

void CheckLse(const TensorView& lse, const attention_internal::Dims& d, std::string_view arg,
              bool writable) {
  ValidateView(lse, arg, 3, writable);
  if (lse.dtype != DType::kFloat32) {
    FailArgument(std::string(arg) + ".dtype", std::string(DTypeName(lse.dtype)), "float32");
  }
  if (!(lse.shape[0] == d.batch && lse.shape[1] == d.heads && lse.shape[2] == d.query_len)) {
    FailArgument(std::string(arg), lse.Describe(),
                 "[batch, heads, Sq] = [" + std::to_string(d.batch) + ", " +
                     std::to_string(d.heads) + ", " + std::to_string(d.query_len) + "]");
  }
}

void SetLseOutput(Problem& p, const TensorView& lse, const TensorView& q, const TensorView& k,
                  const TensorView& v, const TensorView& out) {
  CheckLse(lse, p.dims, "lse", /*writable=*/true);
  RequireNoOverlap(lse, "lse", q, "q", /*inplace_allowed=*/false);
  RequireNoOverlap(lse, "lse", k, "k", /*inplace_allowed=*/false);
  RequireNoOverlap(lse, "lse", v, "v", /*inplace_allowed=*/false);
  RequireNoOverlap(lse, "lse", out, "out", /*inplace_allowed=*/false);
  p.lse = lse;
}

void SetOutCopy(Problem& p, AttentionLayout layout, const TensorView& out_copy, const TensorView& q,
                const TensorView& k, const TensorView& v, const TensorView& out) {
  const auto& d = p.dims;
  p.ocd = attention_internal::CheckAttentionTensor(out_copy, layout, "out_copy", d.batch,
                                                   d.query_len, d.heads, d.value_dim,
                                                   /*writable=*/true);
  RequireNoOverlap(out_copy, "out_copy", q, "q", /*inplace_allowed=*/false);
  RequireNoOverlap(out_copy, "out_copy", k, "k", /*inplace_allowed=*/false);
  RequireNoOverlap(out_copy, "out_copy", v, "v", /*inplace_allowed=*/false);
  RequireNoOverlap(out_copy, "out_copy", out, "out", /*inplace_allowed=*/false);
  if (p.lse.data != nullptr) {
    RequireNoOverlap(out_copy, "out_copy", p.lse, "lse", /*inplace_allowed=*/false);
  }
  p.out_copy = out_copy;
}

// Rows [s0, s0 + n) of head h of batch b of a rank-4 view, converted to
// float32 rows of `ld` >= dim floats (columns >= dim untouched).
std::optional<StoredRows> StoredRowsOf(const TensorView& view, const AttentionDims& ad,
                                       std::int64_t b, std::int64_t h, std::int64_t s0) {
  if (ad.stride_dim != 1 || view.dtype == DType::kFloat64) return std::nullopt;
  using kernels::simd::FlashStorage;
  const FlashStorage storage = view.dtype == DType::kFloat32    ? FlashStorage::kFloat32
                               : view.dtype == DType::kBFloat16 ? FlashStorage::kBFloat16
                                                                : FlashStorage::kFloat16;
  const std::int64_t first = b * ad.stride_batch + h * ad.stride_head + s0 * ad.stride_seq;
  return StoredRows{storage,
                    static_cast<const unsigned char*>(view.data) +
                        first * static_cast<std::int64_t>(DTypeSize(view.dtype)),
                    ad.stride_seq};
}

void LoadRows(const TensorView& view, const AttentionDims& ad, std::int64_t b, std::int64_t h,
              std::int64_t s0, std::int64_t n, float* dst, std::int64_t ld) {
  const std::int64_t dim = ad.head_dim;
  if (const std::optional<StoredRows> rows = StoredRowsOf(view, ad, b, h, s0)) {
    // SIMD rows (exact conversions). FlashLoadRows zero-fills [dim, ld): keep
    // this function's contract (columns >= dim untouched) by converting row
    // by row when ld > dim.
    if (ld == dim) {
      kernels::simd::FlashLoadRows(rows->storage, rows->first, rows->stride, n, dim, dst, dim);
    } else {
      const auto* base = static_cast<const unsigned char*>(rows->first);
      const auto bytes = static_cast<std::int64_t>(DTypeSize(view.dtype));
      for (std::int64_t s = 0; s < n; ++s) {
        kernels::simd::FlashLoadRows(rows->storage, base + s * rows->stride * bytes, 0, 1, dim,
                                     dst + s * ld, dim);
      }
    }
    return;
  }
  const std::int64_t first = b * ad.stride_batch + h * ad.stride_head + s0 * ad.stride_seq;
  for (std::int64_t s = 0; s < n; ++s) {
    const std::int64_t base = first + s * ad.stride_seq;
    float* row = dst + s * ld;
    for (std::int64_t x = 0; x < dim; ++x) {
      row[x] = static_cast<float>(LoadAsDouble(view.data, view.dtype, base + x * ad.stride_dim));
    }
  }
}

void TransposeTile(const float* rows, std::int64_t n, std::int64_t dim, std::int64_t ld_rows,
                   float* dst, std::int64_t ldk, bool simd) {
  if (simd) return kernels::simd::FlashTransposeTile(rows, n, dim, ld_rows, dst, ldk);
  for (std::int64_t x = 0; x < dim; ++x) {
    float* col = dst + x * ldk;
    for (std::int64_t j = 0; j < n; ++j) col[j] = rows[j * ld_rows + x];
    std::fill(col + n, col + ldk, 0.0f);
  }
}

namespace {

// Units [front, back) of one block, taken one at a time from the front (its
// owner) or the back (a worker whose own block is done); one atomic word, so
// that no unit is taken twice. Unit indices below 2^31.
class UnitBlock {
 public:
  void Reset(std::int64_t front, std::int64_t back) { state_.store(Pack(front, back)); }
  bool TakeFront(std::int64_t& unit) { return Take(true, unit); }
  bool TakeBack(std::int64_t& unit) { return Take(false, unit); }

 private:
  static std::uint64_t Pack(std::int64_t front, std::int64_t back) {
    return static_cast<std::uint64_t>(front) << 32 | static_cast<std::uint64_t>(back);
  }
  bool Take(bool front_end, std::int64_t& unit) {
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    for (;;) {
      const auto front = static_cast<std::int64_t>(s >> 32);
      const auto back = static_cast<std::int64_t>(s & 0xffffffffu);
      if (front >= back) return false;
      const std::uint64_t next = front_end ? Pack(front + 1, back) : Pack(front, back - 1);
      if (state_.compare_exchange_weak(s, next, std::memory_order_relaxed)) {
        unit = front_end ? front : back - 1;
        return true;
      }
    }
  }
  std::atomic<std::uint64_t> state_{0};
};

}  // namespace

void ForEachUnitInBlocks(std::int64_t n, const Context& ctx,
                         const std::function<void(std::int64_t, int)>& f) {
  const int threads = ctx.num_threads();
  if (n >= (std::int64_t{1} << 31)) return ctx.ParallelFor(n, f);  // past UnitBlock's indices
  std::vector<UnitBlock> blocks(static_cast<std::size_t>(threads));
  for (int b = 0; b < threads; ++b) {
    blocks[Z(b)].Reset(n * b / threads, n * (b + 1) / threads);
  }
  ctx.ParallelFor(threads, [&](std::int64_t, int worker) {
    std::int64_t unit = 0;
    while (blocks[Z(worker)].TakeFront(unit)) f(unit, worker);
    for (int k = 1; k < threads; ++k) {
      UnitBlock& other = blocks[Z((worker + k) % threads)];
      while (other.TakeBack(unit)) f(unit, worker);
    }
  });
}

bool DiagonalBands(const Problem& p, const std::int64_t* qpos, std::int64_t nq,
                   const PositionRange& queries, const std::int64_t* kpos, std::int64_t nk,
                   const PositionRange& keys, std::int64_t* cols, std::int64_t* prefixes) {
  if (!keys.consecutive || nk == 0) return false;
  if (queries.consecutive && nq > 0) {
    // Row i at qpos[0] + i: its prefix clamp(qpos[0] + i - kpos[0] + 1, 0,
    // nk) never shrinks, so a band's longest is its last row's, and the last
    // row is the farthest from the first key: its check (mask, window)
    // covers every row.
    if (p.VisiblePrefix(qpos[nq - 1], kpos[0], nk) < 0) return false;
    const std::int64_t first = qpos[0] - kpos[0] + 1;
    const auto prefix = [&](std::int64_t i) { return std::clamp<std::int64_t>(first + i, 0, nk); };
    for (std::int64_t i0 = 0; i0 < nq; i0 += kBandRows) {
      cols[i0 / kBandRows] = Pad(prefix(std::min(i0 + kBandRows, nq) - 1));
    }
    if (prefixes != nullptr) {
      for (std::int64_t i = 0; i < nq; ++i) prefixes[i] = prefix(i);
    }
    return true;
  }
  for (std::int64_t i = 0; i < nq; ++i) {
    const std::int64_t prefix = p.VisiblePrefix(qpos[i], kpos[0], nk);
    if (prefix < 0) return false;
    if (prefixes != nullptr) prefixes[i] = prefix;
    std::int64_t& band = cols[i / kBandRows];
    band = i % kBandRows == 0 ? Pad(prefix) : std::max(band, Pad(prefix));
  }
  return true;
}

void TileLogitsBf16(const std::uint32_t* a, std::int64_t dim, const std::uint16_t* bt,
                    std::int64_t nq, std::int64_t ldk, const std::int64_t* band_cols, float* out,
                    bool simd) {
  if (band_cols == nullptr)
    return kernels::simd::FlashTileLogitsBf16(a, dim / 2, bt, nq, dim, ldk, out);
  for (std::int64_t i0 = 0; i0 < nq; i0 += kBandRows) {
    kernels::simd::FlashMatMulBf16(a + i0 * dim / 2, dim / 2, 1, std::min(kBandRows, nq - i0), bt,
                                   dim / 2, ldk, band_cols[i0 / kBandRows], nullptr, out + i0 * ldk,
                                   ldk, simd);
  }
}

void TileOps::LogitsBands(const float* q, std::int64_t ldq, const float* kt, std::int64_t nq,
                          std::int64_t dim, std::int64_t ld, const std::int64_t* band_cols,
                          float* s) const {
  if (band_cols == nullptr || !simd) return Logits(q, ldq, kt, nq, dim, ld, s);
  for (std::int64_t i0 = 0; i0 < nq; i0 += kBandRows) {
    kernels::simd::FlashTileLogitsCols(q + i0 * ldq, ldq, kt, std::min(kBandRows, nq - i0), dim, ld,
                                       band_cols[i0 / kBandRows], s + i0 * ld);
  }
}

void PackPairs(const float* rows, std::int64_t n, std::int64_t dim, std::int64_t ld,
               std::uint32_t* pairs) {
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t x = 0; x < dim / 2; ++x) {
      pairs[i * (dim / 2) + x] =
          ExactBf16Bits(rows[i * ld + 2 * x]) | ExactBf16Bits(rows[i * ld + 2 * x + 1]) << 16;
    }
}

void PackTransposedPairs(const float* rows, std::int64_t n, std::int64_t dim, std::int64_t ld,
                         std::uint16_t* out, std::int64_t ldk) {
  auto* pairs = reinterpret_cast<std::uint32_t*>(out);  // [dim / 2, ldk]
  for (std::int64_t j = 0; j < n; ++j) {
    const float* row = rows + j * ld;
    for (std::int64_t y = 0; y < dim / 2; ++y) {
      pairs[y * ldk + j] = ExactBf16Bits(row[2 * y]) | ExactBf16Bits(row[2 * y + 1]) << 16;
    }
  }
  for (std::int64_t y = 0; y < dim / 2; ++y)
    std::fill(pairs + y * ldk + n, pairs + (y + 1) * ldk, 0u);
}

void StoreRows(const TensorView& view, const AttentionDims& ad, std::int64_t b, std::int64_t h,
               std::int64_t s0, std::int64_t n, const float* src, std::int64_t ld, float scale,
               const float* row_scale) {
  if (ad.stride_dim == 1 && (view.dtype == DType::kFloat32 || view.dtype == DType::kBFloat16)) {
    const std::int64_t first = b * ad.stride_batch + h * ad.stride_head + s0 * ad.stride_seq;
    void* dst = static_cast<unsigned char*>(view.data) +
                first * static_cast<std::int64_t>(DTypeSize(view.dtype));
    kernels::simd::FlashStoreRows(src, ld, n, ad.head_dim, scale,
                                  view.dtype == DType::kFloat32
                                      ? kernels::simd::FlashStorage::kFloat32
                                      : kernels::simd::FlashStorage::kBFloat16,
                                  dst, ad.stride_seq, row_scale);
    return;
  }
  for (std::int64_t s = 0; s < n; ++s) {
    const std::int64_t base = b * ad.stride_batch + h * ad.stride_head + (s0 + s) * ad.stride_seq;
    StoreRow(view, base, ad.stride_dim, src + s * ld, ad.head_dim,
             row_scale != nullptr ? row_scale[s] : scale);
  }
}

void StoreGradRows(const TensorView& view, const AttentionDims& ad, std::int64_t b, std::int64_t h,
                   std::int64_t s0, std::int64_t n, const float* acc, std::int64_t ld, float scale,
                   const RopeParams* rope, const std::int64_t* pos, float* tmp,
                   const Context& serial) {
  if (rope == nullptr) return StoreRows(view, ad, b, h, s0, n, acc, ld, scale);
  const std::int64_t dim = ad.head_dim;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t x = 0; x < dim; ++x) tmp[i * dim + x] = scale * acc[i * ld + x];
  RotateTile(*rope, tmp, n, dim, pos, serial, RopeDirection::kInverse);
  StoreRows(view, ad, b, h, s0, n, tmp, dim);
}

void RotateTile(const RopeParams& rope, float* tile, std::int64_t n, std::int64_t dim,
                const std::int64_t* pos, const Context& serial, RopeDirection direction) {
  const TensorView view = TensorView::Contiguous(tile, DType::kFloat32, {1, n, 1, dim});
  if (RangeOf(pos, n).consecutive) {
    ApplyRope(rope, view, AttentionLayout::kBSHD, Positions::Offset(pos[0]), direction, nullptr,
              serial);
  } else {
    ApplyRope(rope, view, AttentionLayout::kBSHD, Positions::Ids(pos, n), direction, nullptr,
              serial);
  }
}

PositionRange RangeOf(const std::int64_t* pos, std::int64_t n) {
  PositionRange r;
  for (std::int64_t j = 0; j < n; ++j) {
    r.min = std::min(r.min, pos[j]);
    r.max = std::max(r.max, pos[j]);
    r.consecutive = r.consecutive && pos[j] == pos[0] + j;
  }
  return r;
}

void TileTerms::Reset(const attention_internal::SchemePolicy& scheme, std::int64_t cap,
                      std::int64_t ldk) {
  scheme_ = &scheme;
  active_ = scheme.HasLogitTerms();
  cap_ = cap;
  ldk_ = ldk;
  table_.assign(active_ && scheme.Has(SchemeTerm::kBias) ? static_cast<std::size_t>(cap + ldk) : 0,
                0.0f);
  table_ready_ = false;
}

void TileTerms::Prepare(std::int64_t h, const PositionRange& queries, const std::int64_t* kpos,
                        std::int64_t nk, const PositionRange& keys) {
  h_ = h;
  kpos_ = kpos;
  nk_ = nk;
  keys_consecutive_ = keys.consecutive;
  table_ready_ = false;
  if (!active_ || table_.empty() || !scheme_->DistanceOnly(queries.min, queries.max)) return;
  // Distances r - p of the tile pair: [rmin - pmax, rmax - pmin].
  lo_ = keys.min - queries.max;
  n_ = keys.max - queries.min - lo_ + 1;
  if (n_ > cap_) return;
  scheme_->DistanceBias(h, queries.min, lo_, n_, table_.data());
  table_ready_ = true;
}

const float* TileTerms::Row(std::int64_t qp, const float* qi, float scale, float* scratch) const {
  if (table_ready_) {
    // table_[r - qp - lo_] is the bias of the key at position r.
    if (keys_consecutive_) return table_.data() + (kpos_[0] - qp - lo_);
    for (std::int64_t j = 0; j < nk_; ++j) {
      scratch[j] = table_[static_cast<std::size_t>(kpos_[j] - qp - lo_)];
    }
  } else {
    attention_internal::SchemeRow<float> row;
    row.head = h_;
    row.qpos = qp;
    row.q = qi;
    row.kpos = kpos_;
    row.nk = nk_;
    scheme_->LogitRow(row, scale, scratch);
  }
  std::fill(scratch + nk_, scratch + ldk_, 0.0f);
  return scratch;
}

}  // namespace posenc::flash_internal
