// Fused (flash) attention on the CPU: the FlashAttention and FlashAttentionWithLse entry points,
// the option names and checks (contract and error bound: include/posenc/flash_attention.h; tests:
// tests/unit/flash_attention_test.cc).
// FlashAttention-2 forward (Dao 2023, Alg. 1) through the segment engine of
// attention/flash_forward_engine.cc (design there): K/V tiles converted, rotated (RoPE) and
// transposed once per call into a packed float32 buffer of at most 16 MiB per group of kv heads
// (or one unit's K/V if larger), then one task per (batch, head, query tile) runs the online
// softmax (running max m_i, running sum l_i, accumulator O_i rescaled by exp(m_old - m_new)) over
// the packed key tiles, with the position terms of the scheme's policy (attention/scheme_policy.h)
// and the tiles hidden by the mask skipped. Never an [Sq, Sk] array; float32 throughout.
#include "posenc/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "attention/flash_forward_engine.h"
#include "attention/flash_internal.h"
#include "posenc/error.h"

namespace posenc {

std::string_view FlashRopeKeysName(FlashRopeKeys keys) {
  return keys == FlashRopeKeys::kRotate ? "rotate" : "pre_rotated";
}

FlashRopeKeys ParseFlashRopeKeys(std::string_view text, std::string_view arg) {
  if (text == "rotate") return FlashRopeKeys::kRotate;
  if (text == "pre_rotated") return FlashRopeKeys::kPreRotated;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "one of rotate, pre_rotated"));
}

std::string_view FlashPrecisionName(FlashPrecision precision) {
  return precision == FlashPrecision::kBFloat16 ? "bfloat16" : "float32";
}

FlashPrecision ParseFlashPrecision(std::string_view text, std::string_view arg) {
  if (text == "float32") return FlashPrecision::kFloat32;
  if (text == "bfloat16") return FlashPrecision::kBFloat16;
  throw InvalidArgument(ArgMessage(arg, std::string(text), "one of float32, bfloat16"));
}

void ValidateFlashAttentionOptions(const FlashAttentionOptions& options) {
  Require(options.query_tile >= 1 && options.query_tile <= 4096, "query_tile", options.query_tile,
          "a tile of 1 to 4096 query rows");
  Require(options.key_tile >= 1 && options.key_tile <= 4096, "key_tile", options.key_tile,
          "a tile of 1 to 4096 key rows");
  const auto precision = static_cast<int>(options.precision);
  Require(precision == static_cast<int>(FlashPrecision::kFloat32) ||
              precision == static_cast<int>(FlashPrecision::kBFloat16),
          "precision", precision, "one of float32 (0), bfloat16 (1)");
}

// The forward itself runs in the segment engine (attention/flash_forward_engine.cc:
// K/V tiles packed once per call, SIMD row kernels); a dense batch is one
// segment per batch row with the Problem's positions.
void flash_internal::RunForward(const Problem& p, const TensorView& q, const TensorView& k,
                                const TensorView& v, const TensorView& out,
                                const FlashAttentionOptions& options, const Context& ctx) {
  const auto& d = p.dims;
  std::vector<flash_internal::Segment> segments;
  for (std::int64_t b = 0; b < d.batch; ++b) {
    flash_internal::Segment s;
    s.batch = b;
    s.nq = d.query_len;
    s.nk = d.key_len;
    segments.push_back(s);
  }
  flash_internal::RunSegments(p, segments, q, k, v, out, options, ctx);
}

namespace {
using flash_internal::Problem;
using flash_internal::Setup;
}  // namespace

void FlashAttention(const AttentionParams& params, const TensorView& q, const TensorView& k,
                    const TensorView& v, const TensorView& out,
                    const FlashAttentionOptions& options, const Context& ctx) {
  flash_internal::RunForward(Setup(params, q, k, v, out, options), q, k, v, out, options, ctx);
}

void FlashAttentionWithLse(const AttentionParams& params, const TensorView& q, const TensorView& k,
                           const TensorView& v, const TensorView& out, const TensorView& lse,
                           const FlashAttentionOptions& options, const Context& ctx) {
  FlashAttentionWithLse(params, q, k, v, out, lse, TensorView{}, options, ctx);
}

void FlashAttentionWithLse(const AttentionParams& params, const TensorView& q, const TensorView& k,
                           const TensorView& v, const TensorView& out, const TensorView& lse,
                           const TensorView& out_copy, const FlashAttentionOptions& options,
                           const Context& ctx) {
  Problem p = Setup(params, q, k, v, out, options);
  flash_internal::SetLseOutput(p, lse, q, k, v, out);
  if (out_copy.data != nullptr) {
    flash_internal::SetOutCopy(p, params.layout, out_copy, q, k, v, out);
  }
  flash_internal::RunForward(p, q, k, v, out, options, ctx);
}

}  // namespace posenc
