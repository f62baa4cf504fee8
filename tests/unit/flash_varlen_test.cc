// Packed variable-length fused attention (FlashAttentionVarlen) against the
// float64 reference run on every sequence on its own (AttentionReference on
// the sequence's slice: positions 0.., queries bottom-right aligned), for
// none, ALiBi, T5, RoPE and Shaw, causal and bidirectional, sliding windows,
// GQA, Sk_b > Sq_b (chunked prefill / decode), odd lengths including empty
// query sequences, bfloat16 inputs, threads, and every compiled SIMD
// target. Tolerance: 2e-5 absolute on O(1) outputs (float32 tiles: the
// observed error is ~1e-6; a wrong position, mask or sequence boundary
// shows as O(0.1)). Bad inputs: one test each.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "flash_test_util.h"
#include "kernels/simd/flash.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"
#include "simd_target_fixture.h"

namespace posenc::flash_test {
namespace {

struct VarCase {
  std::string name;
  Kind kind = Kind::kNone;
  AttentionMask mask = AttentionMask::kCausal;
  std::optional<std::int64_t> window;
  std::vector<std::int64_t> q_lens, k_lens;
  std::int64_t H = 2, Hkv = 2, D = 64, Dv = 64;
  std::int64_t query_tile = 16, key_tile = 16;
  DType dtype = DType::kFloat32;
  int threads = 1;
  Backend backend = Backend::kAuto;
};

std::vector<std::int64_t> Offsets(const std::vector<std::int64_t>& lens) {
  std::vector<std::int64_t> cu{0};
  for (std::int64_t n : lens) cu.push_back(cu.back() + n);
  return cu;
}

// Owns the packed inputs and the scheme tables of one case.
struct VarFixture {
  VarCase c;
  std::vector<std::int64_t> cu_q, cu_k;
  std::vector<float> q, k, v;  // bf16-representable when dtype is bf16
  std::vector<std::uint16_t> q16, k16, v16;
  SchemeTables tables;
  AttentionParams params;

  explicit VarFixture(const VarCase& cs)
      : c(cs), cu_q(Offsets(cs.q_lens)), cu_k(Offsets(cs.k_lens)) {
    q = RandomFloats(static_cast<std::size_t>(cu_q.back() * c.H * c.D), 31);
    k = RandomFloats(static_cast<std::size_t>(cu_k.back() * c.Hkv * c.D), 32);
    v = RandomFloats(static_cast<std::size_t>(cu_k.back() * c.Hkv * c.Dv), 33);
    if (c.dtype == DType::kBFloat16) {
      for (auto* vec : {&q, &k, &v}) {
        for (auto& x : *vec) x = BF16ToFloat(FloatToBF16(x));
      }
      for (auto x : q) q16.push_back(FloatToBF16(x).bits);
      for (auto x : k) k16.push_back(FloatToBF16(x).bits);
      for (auto x : v) v16.push_back(FloatToBF16(x).bits);
    }
    params.mask = c.mask;
    params.sliding_window = c.window;
    params.scheme = tables.Build(c.kind, c.mask, c.H, c.D, c.Dv, /*shaw_clip=*/6, 34);
  }
  // Rows [r0, r0 + n) of a packed tensor as a view of `rank` 3 (n x heads x dim)
  // or 4 (1 x n x heads x dim).
  TensorView Slice(std::vector<float>& f, std::vector<std::uint16_t>& h, std::int64_t r0,
                   std::int64_t n, std::int64_t heads, std::int64_t dim, bool batch_axis) {
    const std::size_t off = static_cast<std::size_t>(r0 * heads * dim);
    void* data = c.dtype == DType::kBFloat16 ? static_cast<void*>(h.data() + off)
                                             : static_cast<void*>(f.data() + off);
    return batch_axis ? TensorView::Contiguous(data, c.dtype, {1, n, heads, dim})
                      : TensorView::Contiguous(data, c.dtype, {n, heads, dim});
  }
  TensorView Q() { return Slice(q, q16, 0, cu_q.back(), c.H, c.D, false); }
  TensorView K() { return Slice(k, k16, 0, cu_k.back(), c.Hkv, c.D, false); }
  TensorView V() { return Slice(v, v16, 0, cu_k.back(), c.Hkv, c.Dv, false); }
};

// Runs the varlen attention; returns its float32 output [total_q, H, Dv].
std::vector<float> RunVarlen(VarFixture& f) {
  std::vector<float> out(static_cast<std::size_t>(f.cu_q.back() * f.c.H * f.c.Dv), NAN);
  FlashAttentionOptions opt;
  opt.query_tile = f.c.query_tile;
  opt.key_tile = f.c.key_tile;
  const Context ctx(f.c.threads, f.c.backend);
  FlashAttentionVarlen(
      f.params, f.Q(), f.K(), f.V(),
      TensorView::Contiguous(out.data(), DType::kFloat32, {f.cu_q.back(), f.c.H, f.c.Dv}), f.cu_q,
      f.cu_k, opt, ctx);
  return out;
}

// Checks every sequence against the reference on its own slice; returns the output.
std::vector<float> CheckVarlen(const VarCase& c) {
  SCOPED_TRACE(c.name);
  VarFixture f(c);
  const std::vector<float> out = RunVarlen(f);
  for (std::size_t b = 0; b < c.q_lens.size(); ++b) {
    const std::int64_t nq = c.q_lens[b], nk = c.k_lens[b];
    if (nq == 0) continue;
    std::vector<double> ref(static_cast<std::size_t>(nq * c.H * c.Dv));
    AttentionReference(f.params, f.Slice(f.q, f.q16, f.cu_q[b], nq, c.H, c.D, true),
                       f.Slice(f.k, f.k16, f.cu_k[b], nk, c.Hkv, c.D, true),
                       f.Slice(f.v, f.v16, f.cu_k[b], nk, c.Hkv, c.Dv, true),
                       TensorView::Contiguous(ref.data(), DType::kFloat64, {1, nq, c.H, c.Dv}));
    double err = 0.0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const double got = out[static_cast<std::size_t>(f.cu_q[b] * c.H * c.Dv) + i];
      EXPECT_TRUE(std::isfinite(got)) << "sequence " << b << " element " << i;
      err = std::max(err, std::abs(got - ref[i]));
    }
    EXPECT_LT(err, 2e-5) << "sequence " << b << " (" << nq << " queries, " << nk << " keys)";
  }
  return out;
}

VarCase Make(std::string name, Kind kind, AttentionMask mask, std::vector<std::int64_t> q_lens,
             std::vector<std::int64_t> k_lens) {
  VarCase c;
  c.name = std::move(name);
  c.kind = kind;
  c.mask = mask;
  c.q_lens = std::move(q_lens);
  c.k_lens = std::move(k_lens);
  return c;
}

TEST(FlashAttentionVarlen, NoneCausalSelfAttentionOddLengths) {
  // 0: an empty sequence in the middle; 71 = 4 tiles + 7; 1: a lone token.
  const std::vector<std::int64_t> lens{5, 0, 17, 1, 71};
  CheckVarlen(Make("none causal", Kind::kNone, kCausal, lens, lens));
}

TEST(FlashAttentionVarlen, AlibiCausalMoreKeysThanQueriesGqa) {
  // Chunked prefill / decode: queries bottom-right aligned per sequence; the
  // empty-query sequence owns 4 keys that nobody may see.
  VarCase c = Make("alibi gqa", Kind::kAlibi, kCausal, {3, 0, 7, 1, 20}, {10, 4, 7, 33, 41});
  c.H = 4;
  c.Hkv = 2;
  CheckVarlen(c);
}

TEST(FlashAttentionVarlen, T5BidirectionalLeadingEmptySequence) {
  CheckVarlen(Make("t5 bidir", Kind::kT5, kBidir, {0, 9, 40, 2}, {3, 9, 53, 2}));
}

TEST(FlashAttentionVarlen, RopeCausalSlidingWindowMqa) {
  VarCase c = Make("rope window", Kind::kRope, kCausal, {33, 12, 0}, {33, 30, 0});
  c.window = 9;
  c.H = 3;
  c.Hkv = 1;
  CheckVarlen(c);
}

TEST(FlashAttentionVarlen, ShawCausalD32) {
  VarCase c = Make("shaw", Kind::kShaw, kCausal, {18, 4, 25}, {18, 11, 25});
  c.D = c.Dv = 32;
  CheckVarlen(c);
}

TEST(FlashAttentionVarlen, BFloat16InputsValueDimDiffers) {
  VarCase c = Make("bf16", Kind::kAlibi, kBidir, {6, 19}, {6, 23});
  c.dtype = DType::kBFloat16;
  c.Dv = 48;
  CheckVarlen(c);
}

TEST(FlashAttentionVarlen, BFloat16DotProductsMatchFloat32Loops) {
  // bfloat16 inputs take the AVX512_BF16 dot-product logits where the CPU
  // has them (kernels/simd/flash_bf16.cc); the scalar backend runs float32
  // loops on the same (exact) values: float32 rounding apart only.
  VarCase c = Make("bf16 dot", Kind::kT5, kCausal, {70, 0, 9}, {70, 3, 33});
  c.dtype = DType::kBFloat16;
  c.query_tile = c.key_tile = 64;
  c.backend = Backend::kSimd;
  const std::vector<float> simd = CheckVarlen(c);
  c.backend = Backend::kScalar;
  const std::vector<float> scalar = CheckVarlen(c);
  EXPECT_LT(MaxErr(simd, scalar), 2e-6);
  RecordProperty("bf16_dot_products", kernels::simd::FlashBf16DotAvailable() ? 1 : 0);
}

TEST(FlashAttentionVarlen, SingleSequenceEqualsDenseFlashAttention) {
  // One sequence is the dense call: same tiles, same sums, same bits.
  VarCase c = Make("single", Kind::kT5, kCausal, {37}, {50});
  VarFixture f(c);
  const std::vector<float> varlen = RunVarlen(f);
  std::vector<float> dense(varlen.size(), NAN);
  FlashAttentionOptions opt;
  opt.query_tile = c.query_tile;
  opt.key_tile = c.key_tile;
  FlashAttention(f.params, f.Slice(f.q, f.q16, 0, 37, c.H, c.D, true),
                 f.Slice(f.k, f.k16, 0, 50, c.Hkv, c.D, true),
                 f.Slice(f.v, f.v16, 0, 50, c.Hkv, c.Dv, true),
                 TensorView::Contiguous(dense.data(), DType::kFloat32, {1, 37, c.H, c.Dv}), opt);
  EXPECT_EQ(varlen, dense);
}

TEST(FlashAttentionVarlen, ThreadsGiveTheSameBits) {
  VarCase c = Make("threads", Kind::kAlibi, kCausal, {40, 0, 3, 64}, {40, 8, 9, 64});
  const std::vector<float> one = CheckVarlen(c);
  c.threads = 3;
  const std::vector<float> three = CheckVarlen(c);
  EXPECT_EQ(one, three);
}

TEST(FlashAttentionVarlen, ScalarBackendMatchesReference) {
  for (Kind kind : {Kind::kNone, Kind::kAlibi, Kind::kT5, Kind::kRope}) {
    VarCase c = Make(std::string("scalar ") + std::string(KindName(kind)), kind, kCausal,
                     {7, 0, 22}, {9, 2, 22});
    c.backend = Backend::kScalar;
    CheckVarlen(c);
  }
}

// Runs once per compiled Highway target (tests/unit/simd_target_fixture.h).
class FlashVarlenSimdTarget : public test::PerSimdTarget {};

TEST_P(FlashVarlenSimdTarget, MatchesReferenceAndScalarBackend) {
  for (Kind kind : {Kind::kAlibi, Kind::kT5}) {
    VarCase c = Make(std::string("simd ") + std::string(KindName(kind)), kind, kCausal,
                     {13, 0, 29, 1}, {13, 5, 35, 17});
    c.D = c.Dv = 80;  // 80 = 5 * 16: the single-vector loops run on AVX3
    c.key_tile = 37;  // a short, padded last tile
    c.backend = Backend::kSimd;
    const std::vector<float> simd = CheckVarlen(c);
    c.backend = Backend::kScalar;
    const std::vector<float> scalar = CheckVarlen(c);
    EXPECT_LT(MaxErr(simd, scalar), 2e-6);  // same formulas, sums reordered
  }
}

POSENC_INSTANTIATE_PER_SIMD_TARGET(FlashVarlenSimdTarget);

// ---- bad input: one test per case ----

struct BadVarlen {
  // Two sequences of 3 and 5 tokens, 2 heads of 8.
  std::vector<float> q = std::vector<float>(8 * 2 * 8, 0.5f), k = q, v = q, out = q;
  std::vector<std::int64_t> cu_q{0, 3, 8}, cu_k{0, 3, 8};
  AttentionParams params;
  TensorView View(std::vector<float>& x) {
    return TensorView::Contiguous(x.data(), DType::kFloat32, {8, 2, 8});
  }
  void Run() { FlashAttentionVarlen(params, View(q), View(k), View(v), View(out), cu_q, cu_k); }
};

void ExpectInvalid(BadVarlen& f, const std::string& needle) {
  flash_test::ExpectInvalid([&] { f.Run(); }, needle);
}

TEST(FlashAttentionVarlenBadInput, ValidCallRuns) {
  BadVarlen f;
  f.Run();
  EXPECT_FLOAT_EQ(f.out[0], 0.5f);  // a convex combination of v rows that are all 0.5
}

TEST(FlashAttentionVarlenBadInput, TooFewOffsets) {
  BadVarlen f;
  f.cu_q = {8};
  ExpectInvalid(f, "cu_seqlens_q.size(): got 1");
}

TEST(FlashAttentionVarlenBadInput, DifferentBatchInTheTwoLists) {
  BadVarlen f;
  f.cu_k = {0, 8};
  ExpectInvalid(f, "cu_seqlens_k.size(): got 2");
}

TEST(FlashAttentionVarlenBadInput, FirstOffsetNotZero) {
  BadVarlen f;
  f.cu_q = {1, 3, 8};
  ExpectInvalid(f, "cu_seqlens_q[0]: got 1");
}

TEST(FlashAttentionVarlenBadInput, DecreasingOffsets) {
  BadVarlen f;
  f.cu_k = {0, 5, 4, 8};
  f.cu_q = {0, 3, 3, 8};
  ExpectInvalid(f, "cu_seqlens_k[2]: got 4");
}

TEST(FlashAttentionVarlenBadInput, LastQueryOffsetNotTotal) {
  BadVarlen f;
  f.cu_q = {0, 3, 7};
  ExpectInvalid(f, "cu_seqlens_q[2]: got 7");
}

TEST(FlashAttentionVarlenBadInput, LastKeyOffsetBeyondTotal) {
  BadVarlen f;
  f.cu_k = {0, 3, 9};
  ExpectInvalid(f, "cu_seqlens_k[2]: got 9");
}

TEST(FlashAttentionVarlenBadInput, MoreQueriesThanKeysInASequence) {
  BadVarlen f;
  f.cu_q = {0, 4, 8};  // sequence 0: 4 queries, 3 keys
  ExpectInvalid(f, "sequence 0 with 4 queries and 3 keys");
}

TEST(FlashAttentionVarlenBadInput, QueryPositionsSet) {
  BadVarlen f;
  f.params.query_positions = Positions::Offset(0);
  ExpectInvalid(f, "params.query_positions");
}

TEST(FlashAttentionVarlenBadInput, KeyPositionsSet) {
  BadVarlen f;
  f.params.key_positions = Positions::Offset(0);
  ExpectInvalid(f, "params.key_positions");
}

TEST(FlashAttentionVarlenBadInput, RankFourQuery) {
  BadVarlen f;
  const TensorView q4 = TensorView::Contiguous(f.q.data(), DType::kFloat32, {1, 8, 2, 8});
  flash_test::ExpectInvalid(
      [&] {
        FlashAttentionVarlen(f.params, q4, f.View(f.k), f.View(f.v), f.View(f.out), f.cu_q, f.cu_k);
      },
      "q");
}

TEST(FlashAttentionVarlenBadInput, OutputHeadDimMismatch) {
  BadVarlen f;
  const TensorView out = TensorView::Contiguous(f.out.data(), DType::kFloat32, {8, 2, 4});
  flash_test::ExpectInvalid(
      [&] {
        FlashAttentionVarlen(f.params, f.View(f.q), f.View(f.k), f.View(f.v), out, f.cu_q, f.cu_k);
      },
      "out");
}

TEST(FlashAttentionVarlenBadInput, UnsupportedScheme) {
  BadVarlen f;
  f.params.scheme = PositionScheme::Registered("deberta");
  ExpectInvalid(f, "scheme.name");
}

}  // namespace
}  // namespace posenc::flash_test
