// The comparison's cost column: every method timed on one shape, in one
// unit (compare.h MeasureCost). One attention layer's forward, q, k, v
// [1, S, H, D] float32, causal, with the method's positional work included:
//  - sinusoidal and learned: the table added to the layer input [1, S, H*D]
//    (AddSinusoidal, LearnedTable::AddTo), then attention without a term;
//  - RoPE, ALiBi, T5, Shaw, FIRE: posenc's fused kernel (FlashAttention)
//    with the scheme; RoPE rotates q and k inside it;
//  - Transformer-XL, DeBERTa: no fused kernel exists, so the reference
//    (AttentionReference, float64 arithmetic) with the scheme.
// "x none" divides by attention without a positional term through the same
// kernel, timed alternately with the method, so the ratio is the method's
// own share whichever kernel runs it; ns per token is the whole layer's
// time over S. Scheme tables are random (the cost does not depend on their
// values): Shaw k = kShawClip (the page's), T5 32 buckets, FIRE hidden 32,
// DeBERTa 256 buckets.
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "compare.h"
#include "posenc/alibi.h"
#include "posenc/attention.h"
#include "posenc/deberta.h"
#include "posenc/error.h"
#include "posenc/fire.h"
#include "posenc/flash_attention.h"
#include "posenc/learned.h"
#include "posenc/rope.h"
#include "posenc/shaw.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5.h"
#include "posenc/transformer_xl.h"
#include "sections.h"

namespace posenc::report {
namespace {

std::vector<float> Random(std::mt19937_64& rng, std::int64_t n, double scale) {
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = static_cast<float>(normal(rng));
  return v;
}

TensorView View(std::vector<float>& v, std::initializer_list<std::int64_t> shape) {
  return TensorView::Contiguous(v.data(), DType::kFloat32, shape);
}

}  // namespace

CostShape CostShapeFor(const CompareSetup& s) {
  CostShape c;
  c.seq = std::min(s.shape.seq, s.cost_seq);
  c.heads = s.shape.heads;
  c.head_dim = s.shape.hidden / s.shape.heads;
  return c;
}

namespace {

// A method's positional work in the cost layer: its scheme, whether the fused
// kernel runs it, its input-side table add, and the storage the scheme views
// (so it must stay where it was set up).
struct MethodWork {
  AttentionParams params;
  bool fused = true;
  std::function<void()> input_side;  // the embedding-side methods' table add
  std::vector<float> t1, t2, t3;
  std::optional<T5BiasTable> t5_table;
  std::optional<LearnedTable> learned;
  FireWeights fire;
};

// Sets `w` up for `method` on `shape`, drawing its random tables from `rng`;
// the input-side add writes `xv` on `ctx`, which must outlive `w`. Throws for
// a method the comparison table does not have.
void SetUpMethod(const std::string& method, const CompareSetup& s, const CostShape& shape,
                 std::mt19937_64& rng, const TensorView& xv, const Context& ctx, MethodWork& w) {
  const std::int64_t n = shape.seq, h = shape.heads, d = shape.head_dim, dm = h * d;
  if (method == "sinusoidal") {
    SinusoidalParams sp;
    sp.dim = dm;
    w.input_side = [&, sp] { AddSinusoidal(sp, xv, Positions::Offset(0), ctx); };
  } else if (method == "learned") {
    LearnedInitParams lp;
    lp.max_positions = std::max<std::int64_t>(n, s.shape.max_positions);
    lp.dim = dm;
    w.learned.emplace(LearnedTable::RandomNormal(lp));
    w.input_side = [&] { w.learned->AddTo(xv, Positions::Offset(0), ctx); };
  } else if (method == "RoPE") {
    RopeParams rp;
    rp.head_dim = d;
    w.params.scheme = RopeScheme(rp);
  } else if (method == "ALiBi") {
    AlibiParams ap;
    ap.num_heads = h;
    w.params.scheme = AlibiScheme(AlibiSlopes(ap));
  } else if (method == "T5 buckets") {
    w.t5_table.emplace(T5BucketParams{}, h);
    w.t5_table->InitNormal(11, 0.1);
    w.params.scheme = T5Scheme(*w.t5_table);
  } else if (method == "Shaw") {
    ShawParams sp;
    sp.clip = kShawClip;  // the page's one k
    sp.head_dim = d;
    w.t1 = Random(rng, sp.TableRows() * d, 0.02);
    w.t2 = Random(rng, sp.TableRows() * d, 0.02);
    w.params.scheme =
        ShawScheme(sp, View(w.t1, {sp.TableRows(), d}), View(w.t2, {sp.TableRows(), d}));
  } else if (method == "FIRE") {
    w.fire = FireInit(h, 32, 11);
    w.params.scheme = FireScheme(w.fire.View());
  } else if (method == "Transformer-XL") {
    w.fused = false;
    w.t1 = Random(rng, h * d, 0.1);      // u
    w.t2 = Random(rng, h * d, 0.1);      // v
    w.t3 = Random(rng, n * h * d, 0.1);  // RW = W_R R, [klen, H, D]
    w.params.scheme =
        TransformerXLScheme(View(w.t1, {h, d}), View(w.t2, {h, d}), View(w.t3, {n, h, d}));
  } else if (method == "DeBERTa") {
    w.fused = false;
    DebertaParams dp;
    dp.head_dim = d;
    const std::int64_t rows = 2 * dp.AttSpan();
    w.t1 = Random(rng, rows * h * d, 0.1);
    w.t2 = Random(rng, rows * h * d, 0.1);
    w.params.scheme = DebertaScheme(dp, View(w.t1, {rows, h, d}), View(w.t2, {rows, h, d}));
  } else {
    FailArgument("method", method,
                 "a method of the comparison table: sinusoidal, learned, RoPE, ALiBi, T5 buckets, "
                 "Shaw, FIRE, Transformer-XL, DeBERTa");
  }
}

// Best ns per token (over `n` tokens) of `with_method` and of `baseline`, run
// alternately: one untimed warm-up pair, then max(1, `repeats`) timed pairs.
std::pair<double, double> BestAlternating(const std::function<void()>& with_method,
                                          const std::function<void()>& baseline, std::int64_t n,
                                          int repeats) {
  repeats = std::max(1, repeats);
  double best_method = 1e300, best_none = 1e300;
  for (int r = 0; r < repeats + 1; ++r) {
    const double a = NanosPer(with_method, static_cast<double>(n), 1);
    const double b = NanosPer(baseline, static_cast<double>(n), 1);
    if (r == 0) continue;  // warm-up
    best_method = std::min(best_method, a);
    best_none = std::min(best_none, b);
  }
  return {best_method, best_none};
}

}  // namespace

MethodCost MeasureCost(const std::string& method, const CompareSetup& s) {
  const CostShape shape = CostShapeFor(s);
  const std::int64_t n = shape.seq, h = shape.heads, d = shape.head_dim, dm = h * d;
  std::mt19937_64 rng(11);
  std::vector<float> q = Random(rng, n * dm, 1.0), k = Random(rng, n * dm, 1.0),
                     v = Random(rng, n * dm, 1.0), out(static_cast<std::size_t>(n * dm));
  const TensorView qv = View(q, {1, n, h, d}), kv = View(k, {1, n, h, d}),
                   vv = View(v, {1, n, h, d}), ov = View(out, {1, n, h, d});
  const Context ctx(s.threads);
  AttentionParams none;
  MethodWork w;  // kept alive through the timing
  std::vector<float> x(static_cast<std::size_t>(n * dm), 0.0f);
  const TensorView xv = View(x, {1, n, dm});
  SetUpMethod(method, s, shape, rng, xv, ctx, w);
  const auto attend = [&](const AttentionParams& p) {
    if (w.fused) {
      FlashAttention(p, qv, kv, vv, ov, FlashAttentionOptions{}, ctx);
    } else {
      AttentionReference(p, qv, kv, vv, ov, nullptr, ctx);
    }
  };
  const auto with_method = [&] {
    if (w.input_side) w.input_side();
    attend(w.params);
  };
  const auto baseline = [&] { attend(none); };
  // Alternating (best of each), so both see the same minutes of the machine.
  const auto [best_method, best_none] = BestAlternating(with_method, baseline, n, s.timing_repeats);
  MethodCost c;
  c.ns_per_token = best_method;
  c.none_ns_per_token = best_none;
  c.kernel = w.fused ? (w.input_side ? "table add + fused kernel" : "fused kernel")
                     : "reference (float64; no fused kernel)";
  return c;
}

}  // namespace posenc::report
