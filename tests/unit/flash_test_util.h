// Shared helpers of the fused (flash) attention tests: flash_attention_test.cc,
// flash_varlen_test.cc, flash_memory_test.cc, flash_backward_test.cc and
// flash_backward_checks_test.cc (the backward's own case runner is in
// flash_backward_fixture.h, built on this file).
//
//  - Case / Make / Fixture: one dense attention case (sizes, scheme, mask,
//    window, layout, tiles, dtype, threads, backend), its N(0, 1) inputs of
//    any dtype and its scheme tables (ALiBi slopes 2^(-8 (h + 1) / H), a T5
//    table N(0, 1) with seed 3, Shaw tables N(0, 1) with clip Case::shaw_clip).
//  - SchemeTables: the same scheme tables for callers with their own inputs
//    (the packed varlen tests).
//  - Canonical / MaxErr / MaxAbs: outputs in [B, H, S, D] order and their
//    distances.
//  - ExpectWithin2x: FlashAttention's test rule: the error against the
//    float64 oracle is at most 2x the error of a plain float32 computation on
//    the same inputs plus a rounding floor, below an absolute sanity bound,
//    and every value is finite.
//  - ExpectInvalid: a call throws InvalidArgument whose message names `needle`.
//  - ExpectPeakExtraMemoryBelow: the ru_maxrss delta of a measurement run in
//    a forked child (optimised, non-sanitizer builds only; skipped otherwise
//    with a message saying why).
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/flash_attention.h"

#if defined(__SANITIZE_ADDRESS__)
#define POSENC_FLASH_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POSENC_FLASH_TEST_ASAN 1
#endif
#endif

namespace posenc::flash_test {

// The built-in schemes these tests build (SchemeTables::Build), by their
// registered names (KindName).
enum class Kind { kNone, kAbsolute, kRope, kAlibi, kT5, kShaw, kTransformerXL, kDeBERTa };
inline std::string_view KindName(Kind kind) {
  constexpr std::string_view kNames[] = {"none", "absolute", "rope",           "alibi",
                                         "t5",   "shaw",     "transformer_xl", "deberta"};
  return kNames[static_cast<int>(kind)];
}
using Index = std::int64_t;
constexpr auto kCausal = AttentionMask::kCausal;
constexpr auto kBidir = AttentionMask::kBidirectional;

inline std::size_t Z(Index i) { return static_cast<std::size_t>(i); }

inline std::vector<float> RandomFloats(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// A rank-4 attention view over contiguous data in `layout` order.
inline TensorView AttentionView(void* data, DType dtype, AttentionLayout layout, Index b, Index s,
                                Index h, Index d) {
  return layout == AttentionLayout::kBSHD ? TensorView::Contiguous(data, dtype, {b, s, h, d})
                                          : TensorView::Contiguous(data, dtype, {b, h, s, d});
}

// A rank-4 attention view in [B, H, S, D] order as doubles.
inline std::vector<double> Canonical(const TensorView& view, AttentionLayout layout) {
  const AttentionDims d = GetAttentionDims(view, layout, "view");
  std::vector<double> out;
  for (Index b = 0; b < d.batch; ++b)
    for (Index h = 0; h < d.heads; ++h)
      for (Index s = 0; s < d.seq; ++s)
        for (Index x = 0; x < d.head_dim; ++x)
          out.push_back(LoadAsDouble(
              view.data, view.dtype,
              b * d.stride_batch + h * d.stride_head + s * d.stride_seq + x * d.stride_dim));
  return out;
}

template <typename T>
double MaxErr(const std::vector<T>& a, const std::vector<T>& b) {
  EXPECT_EQ(a.size(), b.size());
  double e = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    e = std::max(e, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  }
  return e;
}

inline double MaxAbs(const std::vector<double>& a) {
  double m = 0.0;
  for (double x : a) m = std::max(m, std::abs(x));
  return m;
}

// FlashAttention's test rule for one output: max |flash - oracle| <= 2 max
// |naive - oracle| + rounding_floor and < sanity_bound; every flash value
// finite.
inline void ExpectWithin2x(const std::vector<double>& flash, const std::vector<double>& naive,
                           const std::vector<double>& oracle, double rounding_floor,
                           double sanity_bound, const std::string& what) {
  const double err = MaxErr(flash, oracle), naive_err = MaxErr(naive, oracle);
  EXPECT_LE(err, 2.0 * naive_err + rounding_floor)
      << what << ": flash error " << err << ", plain float32 error " << naive_err << ", max oracle "
      << MaxAbs(oracle);
  EXPECT_LT(err, sanity_bound) << what;
  const auto non_finite =
      std::count_if(flash.begin(), flash.end(), [](double x) { return !std::isfinite(x); });
  EXPECT_EQ(non_finite, 0) << what << ": non-finite values";
}

inline void ExpectInvalid(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no exception, expected one naming " << needle;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// ALiBi slopes 2^(-8 (h + 1) / heads) (the paper's, for powers of two).
inline std::vector<double> AlibiSlopes(Index heads) {
  std::vector<double> slopes;
  for (Index h = 0; h < heads; ++h)
    slopes.push_back(std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(heads)));
  return slopes;
}

// The tables a scheme points into, and the scheme: T5 causal for a causal
// mask (bidirectional otherwise), N(0, 1) with seed 3; Shaw a_key / a_value
// N(0, 1) float32 with seeds shaw_seed / shaw_seed + 1.
struct SchemeTables {
  std::unique_ptr<T5BiasTable> t5;
  std::vector<float> a_key, a_value;
  RopeParams rope;             // kRope: the scheme's parameters
  std::vector<double> slopes;  // kAlibi: the scheme's slopes

  PositionScheme Build(Kind kind, AttentionMask mask, Index heads, Index head_dim, Index value_dim,
                       Index shaw_clip, std::uint32_t shaw_seed) {
    switch (kind) {
      case Kind::kRope:
        rope = RopeParams{};
        rope.head_dim = head_dim;
        return RopeScheme(rope);
      case Kind::kAlibi:
        slopes = AlibiSlopes(heads);
        return AlibiScheme(slopes);
      case Kind::kT5: {
        T5BucketParams tp;
        tp.direction = mask == kCausal ? T5Direction::kCausal : T5Direction::kBidirectional;
        t5 = std::make_unique<T5BiasTable>(tp, heads);
        t5->InitNormal(3, 1.0);
        return T5Scheme(*t5);
      }
      case Kind::kShaw: {
        ShawParams sp;
        sp.clip = shaw_clip;
        sp.head_dim = head_dim;
        a_key = RandomFloats(Z(sp.TableRows() * head_dim), shaw_seed);
        a_value = RandomFloats(Z(sp.TableRows() * value_dim), shaw_seed + 1);
        return ShawScheme(
            sp, TensorView::Contiguous(a_key.data(), DType::kFloat32, {sp.TableRows(), head_dim}),
            TensorView::Contiguous(a_value.data(), DType::kFloat32, {sp.TableRows(), value_dim}));
      }
      case Kind::kAbsolute:
        return AbsoluteScheme();
      default:
        return PositionScheme::None();
    }
  }
};

// One dense attention case.
struct Case {
  std::string name;
  Kind kind = Kind::kNone;
  AttentionMask mask = kCausal;
  std::optional<Index> window;
  Index B = 1, H = 2, Hkv = 2, Sq = 37, Sk = 37, D = 64, Dv = 64;
  AttentionLayout layout = AttentionLayout::kBSHD;
  Index query_tile = 16, key_tile = 16;
  FlashRopeKeys rope_keys = FlashRopeKeys::kRotate;
  bool explicit_positions = false;  // shuffled ids per row; Sq may exceed Sk
  DType dtype = DType::kFloat32;    // of q, k, v, dout
  int threads = 1;
  Backend backend = Backend::kAuto;
  bool pass_lse = true;  // backward only; false: the backward recomputes lse
  bool decode = false;   // forward: run FlashAttentionDecode instead of FlashAttention
  Index shaw_clip = 5;
};

inline Case Make(std::string name, Kind kind, AttentionMask mask) {
  Case c;
  c.name = std::move(name);
  c.kind = kind;
  c.mask = mask;
  return c;
}

// `c` with 2 batches of `queries` queries and 7 keys at shuffled explicit
// positions (ids in [0, 17)), a causal window of 3 and 4 x 2 tiles: more
// queries than keys, so that some queries see no key and some keys are seen
// by no query, and tile skipping must use the tiles' min / max positions.
inline Case WithExplicitPositions(Case c, Index queries) {
  c.B = 2;
  c.Sq = queries;
  c.Sk = 7;
  c.window = 3;
  c.query_tile = 4;
  c.key_tile = 2;
  c.explicit_positions = true;
  return c;
}

// A tensor of any dtype over 8-byte storage, filled with N(0, 1) values
// rounded to the dtype (NaN without a seed).
struct Tensor {
  std::vector<double> storage;
  TensorView view;
  Tensor() = default;
  Tensor(DType dtype, AttentionLayout layout, Index b, Index s, Index h, Index d,
         std::optional<std::uint32_t> seed) {
    storage.assign(Z(b * s * h * d), 0.0);
    view = AttentionView(storage.data(), dtype, layout, b, s, h, d);
    std::mt19937 gen(seed.value_or(0));
    std::normal_distribution<double> dist(0.0, 1.0);
    for (Index i = 0; i < view.NumElements(); ++i) {
      StoreFromDouble(view.data, dtype, i, seed ? dist(gen) : std::nan(""));
    }
  }
};

// Inputs (q, k, v seeds 11-13, dout 14), explicit positions and scheme
// tables of one case.
struct Fixture {
  Case c;
  Tensor q, k, v, dout;
  std::vector<Index> qids, kids;
  SchemeTables tables;
  AttentionParams params;

  explicit Fixture(const Case& cs)
      : c(cs),
        q(c.dtype, c.layout, c.B, c.Sq, c.H, c.D, 11),
        k(c.dtype, c.layout, c.B, c.Sk, c.Hkv, c.D, 12),
        v(c.dtype, c.layout, c.B, c.Sk, c.Hkv, c.Dv, 13),
        dout(c.dtype, c.layout, c.B, c.Sq, c.H, c.Dv, 14) {
    params.layout = c.layout;
    params.mask = c.mask;
    params.sliding_window = c.window;
    if (c.explicit_positions) {
      std::mt19937 gen(5);
      for (Index i = 0; i < c.B * c.Sq; ++i)
        qids.push_back(static_cast<Index>(gen() % (c.Sk + 10)));
      for (Index j = 0; j < c.B * c.Sk; ++j)
        kids.push_back(static_cast<Index>(gen() % (c.Sk + 10)));
      params.query_positions = Positions::Ids(qids.data(), c.B * c.Sq);
      params.key_positions = Positions::Ids(kids.data(), c.B * c.Sk);
    }
    params.scheme = tables.Build(c.kind, c.mask, c.H, c.D, c.Dv, c.shaw_clip, 15);
  }
  T5BiasTable* t5() const { return tables.t5.get(); }
  Positions QPos() const { return params.query_positions.value_or(Positions::Offset(c.Sk - c.Sq)); }
  Positions KPos() const { return params.key_positions.value_or(Positions::Offset(0)); }
  Index TableRows() const {
    if (c.kind == Kind::kT5) return tables.t5->num_buckets();
    if (c.kind == Kind::kShaw) return ShawParams{c.shaw_clip, c.D}.TableRows();
    return 0;
  }
  bool Visible(Index p, Index r) const {
    bool vis = c.mask == kCausal ? r <= p : true;
    return c.window ? vis && std::llabs(p - r) < *c.window : vis;
  }
};

// Peak extra memory of `measure` (which returns the KiB it measured, or a
// negative failure code explained by `codes`), run in a forked child so that
// the high-water mark is its own: ru_maxrss deltas are meaningful only in
// optimised builds without AddressSanitizer (shadow memory and the free
// quarantine count in the RSS); elsewhere the test is skipped saying so.
// `what` names the case for the skip message. Records peak_extra_kib.
inline long MaxRssKiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;  // KiB on Linux
}

inline void ExpectPeakExtraMemoryBelow(const std::function<long()>& measure, long limit_kib,
                                       const std::string& what, const std::string& codes) {
#ifdef POSENC_FLASH_TEST_ASAN
  (void)measure;
  (void)limit_kib;
  (void)codes;
  GTEST_SKIP() << "AddressSanitizer build: RSS includes shadow memory and the free quarantine, "
                  "so ru_maxrss deltas do not measure the kernel; "
               << what << " runs in release builds";
#else
#ifndef NDEBUG
  (void)measure;
  (void)limit_kib;
  (void)codes;
  GTEST_SKIP() << "unoptimised build: " << what
               << " would take minutes; this test runs in release (NDEBUG) builds";
#else
  (void)what;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    long extra = -2;
    try {
      extra = measure();
    } catch (...) {
      extra = -3;
    }
    const ssize_t w = write(fds[1], &extra, sizeof(extra));
    _exit(w == static_cast<ssize_t>(sizeof(extra)) ? 0 : 1);
  }
  close(fds[1]);
  long extra = -4;
  const ssize_t r = read(fds[0], &extra, sizeof(extra));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_EQ(r, static_cast<ssize_t>(sizeof(extra)));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_GE(extra, 0) << "child failed (" << codes << ", -3: exception)";
  ::testing::Test::RecordProperty("peak_extra_kib", static_cast<int>(extra));
  EXPECT_LT(extra, limit_kib) << "peak extra memory " << extra << " KiB";
#endif
#endif
}

}  // namespace posenc::flash_test
