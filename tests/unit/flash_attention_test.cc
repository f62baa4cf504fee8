// Fused (flash) attention against the float64 reference (AttentionReference)
// for every supported positional scheme and option: causal, bidirectional,
// sliding windows, GQA/MQA, decode at an offset, explicit (unsorted)
// positions, both layouts, odd sizes (1, 7, 217, 1031), odd tile sizes,
// RoPE keys rotated in the kernel or pre-rotated by the caller, bfloat16
// inputs, threads. Tolerance (FlashAttention's test rule): the flash error
// against the float64 oracle must be at most 2x the error of a plain float32
// attention written here (same inputs, same float32 position terms) plus
// twice the float32 rounding of the oracle's values. Bad inputs: one test
// each.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <hwy/highway.h>
#include <hwy/targets.h>

#include "kernels/simd/targets.h"
#include "posenc/error.h"
#include "posenc/flash_attention.h"
#include "simd_target_fixture.h"
#include "test_util.h"

namespace posenc {
namespace {

using Kind = PositionScheme::Kind;

struct Case {
  std::string name;
  Kind kind = Kind::kNone;
  AttentionMask mask = AttentionMask::kCausal;
  std::optional<std::int64_t> window;
  std::int64_t B = 1, H = 2, Hkv = 2, Sq = 217, Sk = 217, D = 64, Dv = 64;
  AttentionLayout layout = AttentionLayout::kBSHD;
  std::int64_t query_tile = 64, key_tile = 64;
  FlashRopeKeys rope_keys = FlashRopeKeys::kRotate;
  bool explicit_positions = false;  // per-row shuffled ids, Sq may exceed Sk
  DType dtype = DType::kFloat32;
  int threads = 1;
  Backend backend = Backend::kAuto;
};

std::vector<float> Random(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

TensorView View(void* data, DType dtype, AttentionLayout layout, std::int64_t b, std::int64_t s,
                std::int64_t h, std::int64_t d) {
  return layout == AttentionLayout::kBSHD ? TensorView::Contiguous(data, dtype, {b, s, h, d})
                                          : TensorView::Contiguous(data, dtype, {b, h, s, d});
}

// Reads a rank-4 attention view into [B, H, S, D] order as doubles.
std::vector<double> Canonical(const TensorView& view, AttentionLayout layout) {
  const AttentionDims d = GetAttentionDims(view, layout, "view");
  std::vector<double> out;
  for (std::int64_t b = 0; b < d.batch; ++b)
    for (std::int64_t h = 0; h < d.heads; ++h)
      for (std::int64_t s = 0; s < d.seq; ++s)
        for (std::int64_t x = 0; x < d.head_dim; ++x)
          out.push_back(LoadAsDouble(view.data, view.dtype,
                                     b * d.stride_batch + h * d.stride_head + s * d.stride_seq +
                                         x * d.stride_dim));
  return out;
}

// Owns the inputs and scheme tables of one case.
struct Fixture {
  Case c;
  std::vector<float> q, k, v;           // float32 values (bf16-representable when dtype is bf16)
  std::vector<std::uint16_t> q16, k16, v16;
  std::vector<std::int64_t> qids, kids;
  std::unique_ptr<T5BiasTable> t5;
  std::vector<float> a_key, a_value;
  AttentionParams params;

  explicit Fixture(const Case& cs) : c(cs) {
    q = Random(static_cast<std::size_t>(c.B * c.Sq * c.H * c.D), 11);
    k = Random(static_cast<std::size_t>(c.B * c.Sk * c.Hkv * c.D), 12);
    v = Random(static_cast<std::size_t>(c.B * c.Sk * c.Hkv * c.Dv), 13);
    if (c.dtype == DType::kBFloat16) {
      for (auto* vec : {&q, &k, &v}) {
        for (auto& x : *vec) x = BF16ToFloat(FloatToBF16(x));
      }
      for (auto x : q) q16.push_back(FloatToBF16(x).bits);
      for (auto x : k) k16.push_back(FloatToBF16(x).bits);
      for (auto x : v) v16.push_back(FloatToBF16(x).bits);
    }
    params.layout = c.layout;
    params.mask = c.mask;
    params.sliding_window = c.window;
    if (c.explicit_positions) {
      std::mt19937 gen(5);
      for (std::int64_t b = 0; b < c.B; ++b) {
        for (std::int64_t i = 0; i < c.Sq; ++i) qids.push_back(static_cast<std::int64_t>(gen() % (c.Sk + 10)));
        for (std::int64_t j = 0; j < c.Sk; ++j) kids.push_back(static_cast<std::int64_t>(gen() % (c.Sk + 10)));
      }
      params.query_positions = Positions::Ids(qids.data(), c.B * c.Sq);
      params.key_positions = Positions::Ids(kids.data(), c.B * c.Sk);
    }
    switch (c.kind) {
      case Kind::kRope: {
        RopeParams r;
        r.head_dim = c.D;
        r.theta = 10000.0;
        params.scheme = PositionScheme::FromRope(r);
        break;
      }
      case Kind::kAlibi: {
        std::vector<double> slopes;
        for (std::int64_t h = 0; h < c.H; ++h) slopes.push_back(std::exp2(-8.0 * (h + 1) / c.H));
        params.scheme = PositionScheme::FromAlibi(slopes);
        break;
      }
      case Kind::kT5: {
        T5BucketParams tp;
        tp.direction = c.mask == AttentionMask::kCausal ? T5Direction::kCausal : T5Direction::kBidirectional;
        t5 = std::make_unique<T5BiasTable>(tp, c.H);
        t5->InitNormal(3, 1.0);
        params.scheme = PositionScheme::FromT5(*t5);
        break;
      }
      case Kind::kShaw: {
        ShawParams sp;
        sp.clip = 16;
        sp.head_dim = c.D;
        a_key = Random(static_cast<std::size_t>(sp.TableRows() * c.D), 14);
        a_value = Random(static_cast<std::size_t>(sp.TableRows() * c.Dv), 15);
        params.scheme = PositionScheme::FromShaw(
            sp, TensorView::Contiguous(a_key.data(), DType::kFloat32, {sp.TableRows(), c.D}),
            TensorView::Contiguous(a_value.data(), DType::kFloat32, {sp.TableRows(), c.Dv}));
        break;
      }
      default:
        break;
    }
  }
  void* Data(std::vector<float>& f, std::vector<std::uint16_t>& h) {
    return c.dtype == DType::kBFloat16 ? static_cast<void*>(h.data()) : static_cast<void*>(f.data());
  }
  TensorView Q() { return View(Data(q, q16), c.dtype, c.layout, c.B, c.Sq, c.H, c.D); }
  TensorView K() { return View(Data(k, k16), c.dtype, c.layout, c.B, c.Sk, c.Hkv, c.D); }
  TensorView V() { return View(Data(v, v16), c.dtype, c.layout, c.B, c.Sk, c.Hkv, c.Dv); }
  Positions QPos() const { return params.query_positions.value_or(Positions::Offset(c.Sk - c.Sq)); }
  Positions KPos() const { return params.key_positions.value_or(Positions::Offset(0)); }
};

// A plain float32 attention: whole rows of float32 logits, float32 softmax
// and accumulation, the same float32 position terms. Returns [B, H, Sq, Dv].
// `k_rotated`: k already holds RoPE-rotated keys.
std::vector<double> NaiveFloat32(Fixture& f, bool k_rotated) {
  const Case& c = f.c;
  std::vector<double> qd = Canonical(f.Q(), c.layout), kd = Canonical(f.K(), c.layout),
                      vd = Canonical(f.V(), c.layout);
  std::vector<float> q(qd.begin(), qd.end()), k(kd.begin(), kd.end()), v(vd.begin(), vd.end());
  if (c.kind == Kind::kRope) {
    ApplyRope(f.params.scheme.rope, TensorView::Contiguous(q.data(), DType::kFloat32, {c.B, c.H, c.Sq, c.D}),
              AttentionLayout::kBHSD, f.QPos());
    if (!k_rotated) {
      ApplyRope(f.params.scheme.rope,
                TensorView::Contiguous(k.data(), DType::kFloat32, {c.B, c.Hkv, c.Sk, c.D}),
                AttentionLayout::kBHSD, f.KPos());
    }
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.D)));
  const Positions qpos = f.QPos(), kpos = f.KPos();
  std::vector<double> out(static_cast<std::size_t>(c.B * c.H * c.Sq * c.Dv), 0.0);
  std::vector<float> row(static_cast<std::size_t>(c.Sk)), acc(static_cast<std::size_t>(c.Dv));
  for (std::int64_t b = 0; b < c.B; ++b)
    for (std::int64_t h = 0; h < c.H; ++h) {
      const std::int64_t hk = h / (c.H / c.Hkv);
      for (std::int64_t i = 0; i < c.Sq; ++i) {
        const float* qi = &q[static_cast<std::size_t>(((b * c.H + h) * c.Sq + i) * c.D)];
        const std::int64_t p = qpos.At(b, i, c.Sq);
        float mx = -INFINITY;
        for (std::int64_t j = 0; j < c.Sk; ++j) {
          const std::int64_t r = kpos.At(b, j, c.Sk);
          bool vis = c.mask == AttentionMask::kCausal ? r <= p : true;
          if (c.window) vis = vis && std::llabs(p - r) < *c.window;
          float& s = row[static_cast<std::size_t>(j)];
          if (!vis) { s = -INFINITY; continue; }
          const float* kj = &k[static_cast<std::size_t>(((b * c.Hkv + hk) * c.Sk + j) * c.D)];
          s = 0.0f;
          for (std::int64_t x = 0; x < c.D; ++x) s += qi[x] * kj[x];
          if (c.kind == Kind::kShaw) {
            const float* a = &f.a_key[static_cast<std::size_t>(ShawIndex(16, p, r) * c.D)];
            for (std::int64_t x = 0; x < c.D; ++x) s += qi[x] * a[x];
          }
          s *= scale;
          if (c.kind == Kind::kAlibi) {
            s -= static_cast<float>(f.params.scheme.alibi.slopes[static_cast<std::size_t>(h)]) *
                 static_cast<float>(std::llabs(p - r));
          }
          if (c.kind == Kind::kT5) s += f.t5->Bias(h, p, r);
          mx = std::max(mx, s);
        }
        if (mx == -INFINITY) continue;
        float sum = 0.0f;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (std::int64_t j = 0; j < c.Sk; ++j) {
          const float s = row[static_cast<std::size_t>(j)];
          if (s == -INFINITY) continue;
          const float e = std::exp(s - mx);
          sum += e;
          const float* vj = &v[static_cast<std::size_t>(((b * c.Hkv + hk) * c.Sk + j) * c.Dv)];
          const float* av = c.kind == Kind::kShaw
                                ? &f.a_value[static_cast<std::size_t>(ShawIndex(16, p, kpos.At(b, j, c.Sk)) * c.Dv)]
                                : nullptr;
          for (std::int64_t x = 0; x < c.Dv; ++x) acc[static_cast<std::size_t>(x)] += e * (vj[x] + (av ? av[x] : 0.0f));
        }
        for (std::int64_t x = 0; x < c.Dv; ++x) {
          out[static_cast<std::size_t>(((b * c.H + h) * c.Sq + i) * c.Dv + x)] = acc[static_cast<std::size_t>(x)] / sum;
        }
      }
    }
  return out;
}

double MaxErr(const std::vector<double>& a, const std::vector<double>& b) {
  double e = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) e = std::max(e, std::abs(a[i] - b[i]));
  return e;
}

// Runs flash, the reference and the naive float32 attention; checks the
// FlashAttention tolerance rule. Returns flash's output.
std::vector<double> CheckCase(const Case& c) {
  SCOPED_TRACE(c.name);
  Fixture f(c);
  std::vector<double> ref(static_cast<std::size_t>(c.B * c.Sq * c.H * c.Dv));
  AttentionReference(f.params, f.Q(), f.K(), f.V(),
                     View(ref.data(), DType::kFloat64, c.layout, c.B, c.Sq, c.H, c.Dv));
  bool k_rotated = false;
  if (c.kind == Kind::kRope && c.rope_keys == FlashRopeKeys::kPreRotated) {
    ApplyRope(f.params.scheme.rope, f.K(), c.layout, f.KPos());  // the caller's KV cache
    k_rotated = true;
  }
  std::vector<float> out(ref.size(), NAN);
  FlashAttentionOptions opt;
  opt.query_tile = c.query_tile;
  opt.key_tile = c.key_tile;
  opt.rope_keys = c.rope_keys;
  const Context ctx(c.threads, c.backend);
  const TensorView out_view = View(out.data(), DType::kFloat32, c.layout, c.B, c.Sq, c.H, c.Dv);
  FlashAttention(f.params, f.Q(), f.K(), f.V(), out_view, opt, ctx);
  const std::vector<double> flash = Canonical(out_view, c.layout);
  const std::vector<double> oracle =
      Canonical(View(ref.data(), DType::kFloat64, c.layout, c.B, c.Sq, c.H, c.Dv), c.layout);
  const std::vector<double> naive = NaiveFloat32(f, k_rotated);
  double rounding = 0.0;
  for (double x : oracle) {
    rounding = std::max(rounding, std::abs(static_cast<double>(static_cast<float>(x + 0.3) - 0.3f) - x));
  }
  const double err = MaxErr(flash, oracle), naive_err = MaxErr(naive, oracle);
  EXPECT_LE(err, 2.0 * naive_err + 2.0 * rounding)
      << "flash error " << err << ", plain float32 error " << naive_err;
  EXPECT_LT(err, 1e-4);  // absolute sanity bound for O(1) values
  for (double x : flash) EXPECT_TRUE(std::isfinite(x));
  return flash;
}

Case Make(std::string name, Kind kind, AttentionMask mask) {
  Case c;
  c.name = std::move(name);
  c.kind = kind;
  c.mask = mask;
  return c;
}

constexpr auto kCausal = AttentionMask::kCausal;
constexpr auto kBidir = AttentionMask::kBidirectional;

TEST(FlashAttention, NoneCausalMatchesReference) { CheckCase(Make("none causal", Kind::kNone, kCausal)); }

TEST(FlashAttention, NoneBidirectionalFewQueriesBhsdD80) {
  Case c = Make("none bidir", Kind::kNone, kBidir);
  c.Sq = 7;
  c.D = c.Dv = 80;
  c.layout = AttentionLayout::kBHSD;
  CheckCase(c);
}

TEST(FlashAttention, AbsoluteValueDimDiffers) {
  Case c = Make("absolute dv 48", Kind::kAbsolute, kCausal);
  c.Dv = 48;
  c.Sq = c.Sk = 7;
  c.query_tile = 3;
  c.key_tile = 2;
  CheckCase(c);
}

TEST(FlashAttention, SingleQuerySingleKey) {
  Case c = Make("1x1", Kind::kAlibi, kCausal);
  c.Sq = c.Sk = 1;
  CheckCase(c);
}

TEST(FlashAttention, AlibiCausalGqaOddTiles) {
  Case c = Make("alibi gqa", Kind::kAlibi, kCausal);
  c.H = 4;
  c.Hkv = 2;
  c.query_tile = 32;
  c.key_tile = 48;
  CheckCase(c);
}

TEST(FlashAttention, AlibiCausalSlidingWindowSkipsTiles) {
  Case c = Make("alibi window", Kind::kAlibi, kCausal);
  c.window = 50;  // 50 - 1 = 16 * 4 - 15: a hidden-looking tile pair holds one visible pair
  c.query_tile = c.key_tile = 16;
  CheckCase(c);
  c.window = 31;  // 31 = 16 + 15: a visible-looking tile pair holds one hidden pair
  CheckCase(c);
}

TEST(FlashAttention, AlibiBidirectionalWindowBhsd) {
  Case c = Make("alibi bidir window", Kind::kAlibi, kBidir);
  c.window = 31;  // adjacent 16-row tiles span exactly 31 positions: one hidden pair
  c.layout = AttentionLayout::kBHSD;
  c.B = 2;
  c.query_tile = c.key_tile = 16;
  CheckCase(c);
}

TEST(FlashAttention, T5Bidirectional) { CheckCase(Make("t5 bidir", Kind::kT5, kBidir)); }

TEST(FlashAttention, T5CausalDecodeMqaD128) {
  Case c = Make("t5 decode", Kind::kT5, kCausal);
  c.Sq = 7;
  c.Sk = 1031;
  c.Hkv = 1;
  c.D = c.Dv = 128;
  CheckCase(c);
}

TEST(FlashAttention, ShawCausal) { CheckCase(Make("shaw causal", Kind::kShaw, kCausal)); }

TEST(FlashAttention, ShawBidirectionalOneQueryBhsdD80) {
  Case c = Make("shaw bidir", Kind::kShaw, kBidir);
  c.Sq = 1;
  c.D = c.Dv = 80;
  c.layout = AttentionLayout::kBHSD;
  CheckCase(c);
}

TEST(FlashAttention, RopeRotatedInKernelD128) {
  Case c = Make("rope rotate", Kind::kRope, kCausal);
  c.D = c.Dv = 128;
  c.H = 1;
  c.Hkv = 1;
  CheckCase(c);
}

TEST(FlashAttention, RopePreRotatedKeyCacheDecode) {
  Case c = Make("rope pre-rotated", Kind::kRope, kCausal);
  c.Sq = 7;
  c.Sk = 1031;
  c.H = 4;
  c.Hkv = 1;
  c.rope_keys = FlashRopeKeys::kPreRotated;
  CheckCase(c);
}

TEST(FlashAttention, ExplicitUnsortedPositionsWithEmptyRows) {
  // More queries than keys, shuffled positions: some queries see no key
  // (their output must be zeros) and tile skipping must use min/max.
  Case c = Make("explicit positions", Kind::kAlibi, kCausal);
  c.B = 2;
  c.Sq = 31;
  c.Sk = 7;
  c.window = 3;
  c.query_tile = 4;
  c.key_tile = 2;
  c.explicit_positions = true;
  Fixture f(c);
  const std::vector<double> flash = CheckCase(c);
  bool any_empty = false;
  for (std::int64_t b = 0; b < c.B; ++b)
    for (std::int64_t i = 0; i < c.Sq; ++i) {
      const std::int64_t p = f.qids[static_cast<std::size_t>(b * c.Sq + i)];
      bool sees = false;
      for (std::int64_t j = 0; j < c.Sk; ++j) {
        const std::int64_t r = f.kids[static_cast<std::size_t>(b * c.Sk + j)];
        sees = sees || (r <= p && p - r < 3);
      }
      if (sees) continue;
      any_empty = true;
      for (std::int64_t h = 0; h < c.H; ++h)
        for (std::int64_t x = 0; x < c.Dv; ++x)
          EXPECT_EQ(flash[static_cast<std::size_t>(((b * c.H + h) * c.Sq + i) * c.Dv + x)], 0.0);
    }
  EXPECT_TRUE(any_empty) << "the case must contain a query that sees no key";
}

TEST(FlashAttention, BFloat16Inputs) {
  Case c = Make("bf16", Kind::kT5, kCausal);
  c.dtype = DType::kBFloat16;
  c.H = c.Hkv = 1;
  CheckCase(c);
}

TEST(FlashAttention, ThreadsGiveTheSameBits) {
  Case c = Make("threads", Kind::kShaw, kCausal);
  c.B = 2;
  c.Sq = 100;
  c.query_tile = 16;
  const std::vector<double> one = CheckCase(c);
  c.threads = 3;
  const std::vector<double> three = CheckCase(c);
  EXPECT_EQ(one, three);
}

TEST(FlashAttention, TileSizesOnlyReorderFloat32Sums) {
  Case c = Make("tiles", Kind::kAlibi, kBidir);
  c.Sq = 217;  // bottom-right: queries at 814..1030
  c.Sk = 1031;
  c.H = c.Hkv = 1;
  c.window = 50;  // most tiles skipped: keeps the float64 reference cheap
  c.query_tile = 128;
  c.key_tile = 17;
  CheckCase(c);
}

TEST(FlashAttention, ScalarBackendMatchesReference) {
  for (Kind kind : {Kind::kNone, Kind::kAlibi, Kind::kT5, Kind::kShaw, Kind::kRope}) {
    Case c = Make(std::string("scalar ") + std::string(PositionSchemeKindName(kind)), kind, kCausal);
    c.backend = Backend::kScalar;
    c.Sq = 7;
    c.Sk = 217;
    c.D = c.Dv = 80;
    CheckCase(c);
  }
}

// Runs once per compiled Highway target (tests/unit/simd_target_fixture.h).
class FlashSimdTarget : public test::PerSimdTarget {};

TEST_P(FlashSimdTarget, MatchesReferenceAndScalarBackend) {
  for (Kind kind : {Kind::kAlibi, Kind::kShaw}) {
    Case c = Make(std::string("simd ") + std::string(PositionSchemeKindName(kind)), kind, kBidir);
    c.backend = Backend::kSimd;
    c.Sq = 33;
    c.Sk = 217;
    c.Dv = c.D = 80;  // 80 = 5 * 16: the single-vector loops run on AVX3
    c.key_tile = 37;  // a short, padded last tile
    const std::vector<double> simd = CheckCase(c);
    c.backend = Backend::kScalar;
    const std::vector<double> scalar = CheckCase(c);
    // Same formulas, sums reordered: float32 rounding only.
    EXPECT_LT(MaxErr(simd, scalar), 2e-6);
  }
}

POSENC_INSTANTIATE_PER_SIMD_TARGET(FlashSimdTarget);

// ---- KV-cache re-rotation ----

struct ShiftCase {
  DType dtype;
  RopePairing pairing;
  std::int64_t rotary_dim;
  std::int64_t from, delta;
  double tol;  // vs rotating from scratch, relative to max |k| (~4)
};

void CheckShift(const ShiftCase& sc) {
  const std::int64_t B = 2, S = 37, H = 3, D = 64;
  RopeParams r;
  r.head_dim = D;
  r.rotary_dim = sc.rotary_dim;
  r.pairing = sc.pairing;
  const std::vector<float> raw = Random(static_cast<std::size_t>(B * S * H * D), 21);
  auto make = [&](std::vector<double>& store) {
    store.assign(raw.begin(), raw.end());
    return TensorView::Contiguous(store.data(), DType::kFloat64, {B, S, H, D});
  };
  std::vector<double> cache_d, scratch_d;
  make(cache_d);
  const TensorView scratch64 = make(scratch_d);
  // The cache in its storage dtype, rotated at from + s.
  std::vector<double> cache_store(cache_d.size() * 2);  // room for any dtype
  const TensorView cache = TensorView::Contiguous(cache_store.data(), sc.dtype, {B, S, H, D});
  for (std::int64_t i = 0; i < cache.NumElements(); ++i) StoreFromDouble(cache.data, sc.dtype, i, cache_d[static_cast<std::size_t>(i)]);
  ApplyRope(r, cache, AttentionLayout::kBSHD, Positions::Offset(sc.from));
  ShiftRopeKeys(r, cache, AttentionLayout::kBSHD, sc.delta);
  ApplyRope(r, scratch64, AttentionLayout::kBSHD, Positions::Offset(sc.from + sc.delta));
  double err = 0.0;
  for (std::int64_t i = 0; i < cache.NumElements(); ++i) {
    err = std::max(err, std::abs(LoadAsDouble(cache.data, sc.dtype, i) - scratch_d[static_cast<std::size_t>(i)]));
  }
  EXPECT_LT(err, sc.tol) << DTypeName(sc.dtype) << " from " << sc.from << " delta " << sc.delta;
}

TEST(ShiftRopeKeys, EqualsRotatingFromScratch) {
  // float64: rounding only; float32: a few ulp of |k| <= ~5; bf16: the
  // storage rounding of three stores (2^-8 relative each).
  CheckShift({DType::kFloat64, RopePairing::kHalfSplit, 0, 100, -60, 1e-12});
  CheckShift({DType::kFloat64, RopePairing::kInterleaved, 32, 5, 1000, 1e-12});
  CheckShift({DType::kFloat32, RopePairing::kHalfSplit, 0, 4096, -4000, 5e-6});
  CheckShift({DType::kFloat32, RopePairing::kInterleaved, 48, 0, 123456, 5e-6});
  CheckShift({DType::kBFloat16, RopePairing::kHalfSplit, 0, 300, -299, 0.1});
}

TEST(ShiftRopeKeys, ZeroDeltaLeavesKeysUntouched) {
  RopeParams r;
  r.head_dim = 8;
  std::vector<float> k = Random(2 * 3 * 1 * 8, 4);
  const std::vector<float> before = k;
  ShiftRopeKeys(r, TensorView::Contiguous(k.data(), DType::kFloat32, {1, 2, 3, 8}),
                AttentionLayout::kBHSD, 0);
  EXPECT_EQ(k, before);
}

TEST(ShiftRopeKeys, ShiftedCacheFeedsFlashAttention) {
  // A cache rotated at 50 + j, shifted by -50, is the cache of keys at j:
  // pre-rotated flash attention equals the reference with RoPE at j.
  const std::int64_t Sk = 45, Sq = 5, H = 2, D = 64;
  RopeParams r;
  r.head_dim = D;
  std::vector<float> q = Random(static_cast<std::size_t>(Sq * H * D), 1),
                     k = Random(static_cast<std::size_t>(Sk * H * D), 2),
                     v = Random(static_cast<std::size_t>(Sk * H * D), 3);
  AttentionParams params;
  params.scheme = PositionScheme::FromRope(r);
  std::vector<double> ref(static_cast<std::size_t>(Sq * H * D));
  AttentionReference(params, TensorView::Contiguous(q.data(), DType::kFloat32, {1, Sq, H, D}),
                     TensorView::Contiguous(k.data(), DType::kFloat32, {1, Sk, H, D}),
                     TensorView::Contiguous(v.data(), DType::kFloat32, {1, Sk, H, D}),
                     TensorView::Contiguous(ref.data(), DType::kFloat64, {1, Sq, H, D}));
  const TensorView kv = TensorView::Contiguous(k.data(), DType::kFloat32, {1, Sk, H, D});
  ApplyRope(r, kv, AttentionLayout::kBSHD, Positions::Offset(50));
  ShiftRopeKeys(r, kv, AttentionLayout::kBSHD, -50);
  std::vector<float> out(ref.size());
  FlashAttentionOptions opt;
  opt.rope_keys = FlashRopeKeys::kPreRotated;
  FlashAttention(params, TensorView::Contiguous(q.data(), DType::kFloat32, {1, Sq, H, D}), kv,
                 TensorView::Contiguous(v.data(), DType::kFloat32, {1, Sk, H, D}),
                 TensorView::Contiguous(out.data(), DType::kFloat32, {1, Sq, H, D}), opt);
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], ref[i], 2e-5) << i;
}

// ---- bad input: one test per case ----

struct BadFixture {
  std::vector<float> q = std::vector<float>(1 * 4 * 2 * 8, 0.5f), k = q, v = q, out = q;
  TensorView Q() { return TensorView::Contiguous(q.data(), DType::kFloat32, {1, 4, 2, 8}); }
  TensorView K() { return TensorView::Contiguous(k.data(), DType::kFloat32, {1, 4, 2, 8}); }
  TensorView V() { return TensorView::Contiguous(v.data(), DType::kFloat32, {1, 4, 2, 8}); }
  TensorView Out() { return TensorView::Contiguous(out.data(), DType::kFloat32, {1, 4, 2, 8}); }
};

void ExpectInvalid(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no exception, expected one naming " << needle;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(FlashAttentionBadInput, QueryTileZero) {
  BadFixture f;
  FlashAttentionOptions o;
  o.query_tile = 0;
  ExpectInvalid([&] { FlashAttention({}, f.Q(), f.K(), f.V(), f.Out(), o); }, "query_tile");
}

TEST(FlashAttentionBadInput, KeyTileTooLarge) {
  BadFixture f;
  FlashAttentionOptions o;
  o.key_tile = 5000;
  ExpectInvalid([&] { FlashAttention({}, f.Q(), f.K(), f.V(), f.Out(), o); }, "key_tile");
}

TEST(FlashAttentionBadInput, UnsupportedScheme) {
  BadFixture f;
  AttentionParams p;
  p.scheme.kind = Kind::kTransformerXL;
  ExpectInvalid([&] { FlashAttention(p, f.Q(), f.K(), f.V(), f.Out()); }, "scheme.kind");
}

TEST(FlashAttentionBadInput, OutputShape) {
  BadFixture f;
  const TensorView out = TensorView::Contiguous(f.out.data(), DType::kFloat32, {1, 4, 2, 4});
  ExpectInvalid([&] { FlashAttention({}, f.Q(), f.K(), f.V(), out); }, "out");
}

TEST(FlashAttentionBadInput, OutputOverlapsQuery) {
  BadFixture f;
  ExpectInvalid([&] { FlashAttention({}, f.Q(), f.K(), f.V(), f.Q()); }, "out");
}

TEST(FlashAttentionBadInput, KvHeadsNotADivisor) {
  BadFixture f;
  const TensorView q = TensorView::Contiguous(f.q.data(), DType::kFloat32, {1, 2, 3, 8});
  const TensorView out = TensorView::Contiguous(f.out.data(), DType::kFloat32, {1, 2, 3, 8});
  ExpectInvalid([&] { FlashAttention({}, q, f.K(), f.V(), out); }, "k heads");
}

TEST(FlashAttentionBadInput, WindowZero) {
  BadFixture f;
  AttentionParams p;
  p.sliding_window = 0;
  ExpectInvalid([&] { FlashAttention(p, f.Q(), f.K(), f.V(), f.Out()); }, "sliding_window");
}

TEST(FlashAttentionBadInput, AlibiSlopeCount) {
  BadFixture f;
  AttentionParams p;
  p.scheme = PositionScheme::FromAlibi({0.5});
  ExpectInvalid([&] { FlashAttention(p, f.Q(), f.K(), f.V(), f.Out()); }, "scheme.alibi.slopes");
}

TEST(FlashAttentionBadInput, RopeKeysName) {
  ExpectInvalid([] { ParseFlashRopeKeys("sideways"); }, "rope_keys");
  EXPECT_EQ(ParseFlashRopeKeys(FlashRopeKeysName(FlashRopeKeys::kPreRotated)),
            FlashRopeKeys::kPreRotated);
}

TEST(ShiftRopeKeysBadInput, DeltaTooLarge) {
  RopeParams r;
  r.head_dim = 8;
  BadFixture f;
  ExpectInvalid([&] { ShiftRopeKeys(r, f.K(), AttentionLayout::kBSHD, std::int64_t{1} << 24); }, "delta");
}

TEST(ShiftRopeKeysBadInput, AttentionFactorNotOne) {
  RopeParams r;
  r.head_dim = 8;
  r.frequencies.inv_freq = {1.0, 0.1, 0.01, 0.001};
  r.frequencies.attention_factor = 1.5;
  BadFixture f;
  ExpectInvalid([&] { ShiftRopeKeys(r, f.K(), AttentionLayout::kBSHD, 3); },
                "params.frequencies.attention_factor");
}

TEST(ShiftRopeKeysBadInput, HeadDimMismatch) {
  RopeParams r;
  r.head_dim = 16;
  BadFixture f;
  ExpectInvalid([&] { ShiftRopeKeys(r, f.K(), AttentionLayout::kBSHD, 3); }, "k head_dim");
}

}  // namespace
}  // namespace posenc
