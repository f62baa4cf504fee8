// Shared internals of the fused attention (attention/flash_internal.h):
// validation of one call, float32 row loads, RoPE on float32 tiles.
#include "attention/flash_internal.h"

#include <string>

#include "posenc/error.h"

namespace posenc::flash_internal {

namespace {

std::vector<float> ToFloats(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

}  // namespace

Problem SetupInputs(const AttentionParams& params, const TensorView& q, const TensorView& k,
                    const TensorView& v, const FlashAttentionOptions& options) {
  ValidateFlashAttentionOptions(options);
  const Kind kind = params.scheme.kind;
  Require(kind != Kind::kTransformerXL && kind != Kind::kDeBERTa, "scheme.kind",
          PositionSchemeKindName(kind),
          "one of none, absolute, rope, alibi, t5, shaw (flash attention; use "
          "AttentionReference for transformer_xl and deberta)");
  Problem p;
  p.kind = kind;
  attention_internal::CallShape shape = attention_internal::ValidateCallShape(params, q, k, v);
  p.qd = shape.qd;
  p.kd = shape.kd;
  p.vd = shape.vd;
  p.dims = shape.dims;
  p.window = shape.window;
  p.query_positions = shape.query_positions;
  p.key_positions = shape.key_positions;
  const auto& qd = p.qd;
  const auto& d = p.dims;
  p.scale = static_cast<float>(EffectiveAttentionScale(params, qd.head_dim));
  p.mask = params.mask;
  // The reference's policy validates the scheme against the dims (messages
  // name "scheme.<field>") and gives float64 copies of the Shaw tables.
  const attention_internal::Policy policy(params.scheme, d);
  (void)policy;
  switch (kind) {
    case Kind::kRope:
      p.rope = params.scheme.rope;
      p.rotate_keys = options.rope_keys == FlashRopeKeys::kRotate;
      break;
    case Kind::kAlibi:
      for (double s : params.scheme.alibi.slopes) p.slopes.push_back(static_cast<float>(s));
      break;
    case Kind::kT5:
      p.t5 = params.scheme.t5.table;
      break;
    case Kind::kShaw: {
      const auto& s = params.scheme.shaw;
      p.shaw_clip = s.params.clip;
      const std::int64_t rows = s.params.TableRows();
      p.a_key =
          ToFloats(attention_internal::CopyTable(s.a_key, "scheme.shaw.a_key", {rows, d.head_dim}));
      p.a_value = ToFloats(
          attention_internal::CopyTable(s.a_value, "scheme.shaw.a_value", {rows, d.value_dim}));
      break;
    }
    default:
      break;
  }
  return p;
}

Problem Setup(const AttentionParams& params, const TensorView& q, const TensorView& k,
              const TensorView& v, const TensorView& out, const FlashAttentionOptions& options) {
  Problem p = SetupInputs(params, q, k, v, options);
  const auto& d = p.dims;
  p.od = attention_internal::CheckAttentionTensor(out, params.layout, "out", d.batch, d.query_len,
                                                  d.heads, d.value_dim, /*writable=*/true);
  RequireNoOverlap(out, "out", q, "q", /*inplace_allowed=*/false);
  RequireNoOverlap(out, "out", k, "k", /*inplace_allowed=*/false);
  RequireNoOverlap(out, "out", v, "v", /*inplace_allowed=*/false);
  return p;
}

void CheckLse(const TensorView& lse, const attention_internal::Dims& d, std::string_view arg,
              bool writable) {
  ValidateView(lse, arg, 3, writable);
  Require(lse.dtype == DType::kFloat32, std::string(arg) + ".dtype",
          std::string(DTypeName(lse.dtype)), "float32");
  Require(lse.shape[0] == d.batch && lse.shape[1] == d.heads && lse.shape[2] == d.query_len,
          std::string(arg), lse.Describe(),
          "[batch, heads, Sq] = [" + std::to_string(d.batch) + ", " + std::to_string(d.heads) +
              ", " + std::to_string(d.query_len) + "]");
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

// Rows [s0, s0 + n) of head h of batch b of a rank-4 view, converted to
// float32 rows of `ld` >= dim floats (columns >= dim untouched).
void LoadRows(const TensorView& view, const AttentionDims& ad, std::int64_t b, std::int64_t h,
              std::int64_t s0, std::int64_t n, float* dst, std::int64_t ld) {
  const std::int64_t dim = ad.head_dim;
  for (std::int64_t s = 0; s < n; ++s) {
    const std::int64_t base = b * ad.stride_batch + h * ad.stride_head + (s0 + s) * ad.stride_seq;
    float* row = dst + s * ld;
    if (view.dtype == DType::kFloat32 && ad.stride_dim == 1) {
      const float* src = view.As<const float>() + base;
      std::copy(src, src + dim, row);
    } else if (view.dtype == DType::kFloat32) {
      const float* src = view.As<const float>() + base;
      for (std::int64_t x = 0; x < dim; ++x) row[x] = src[x * ad.stride_dim];
    } else if (view.dtype == DType::kBFloat16) {
      const BFloat16* src = view.As<const BFloat16>() + base;
      for (std::int64_t x = 0; x < dim; ++x) row[x] = BF16ToFloat(src[x * ad.stride_dim]);
    } else {
      for (std::int64_t x = 0; x < dim; ++x) {
        row[x] = static_cast<float>(LoadAsDouble(view.data, view.dtype, base + x * ad.stride_dim));
      }
    }
  }
}

void RotateTile(const RopeParams& rope, float* tile, std::int64_t n, std::int64_t dim,
                const std::int64_t* pos, const Context& serial, RopeDirection direction) {
  ApplyRope(rope, TensorView::Contiguous(tile, DType::kFloat32, {1, n, 1, dim}),
            AttentionLayout::kBSHD, Positions::Ids(pos, n), direction, nullptr, serial);
}

}  // namespace posenc::flash_internal
