// The permutation demonstration (include/posenc/demo.h): one bidirectional
// attention layer over two sentences that are permutations of each other,
// once per positional scheme, through the public API only (AttentionReference
// in float64, AddSinusoidal, LearnedTable, T5BiasTable, the relative tables).
// Deterministic: SplitMix64 streams, FNV-1a word hashes, no std distributions.
#include "posenc/demo.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "posenc/alibi.h"
#include "posenc/attention.h"
#include "posenc/error.h"
#include "posenc/learned.h"
#include "posenc/sinusoidal.h"
#include "posenc/transformer_xl.h"

namespace posenc {

namespace {

constexpr std::int64_t kMaxTokens = 256;

struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t Next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-limit, limit).
  double Uniform(double limit) {
    const double u = static_cast<double>(Next() >> 11) * 0x1.0p-53;
    return (2.0 * u - 1.0) * limit;
  }
};

std::vector<double> UniformVector(std::uint64_t seed, std::int64_t n, double variance) {
  SplitMix64 rng{seed};
  const double limit = std::sqrt(3.0 * variance);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = rng.Uniform(limit);
  return v;
}

std::uint64_t Fnv1a(std::string_view word) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : word) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::vector<std::string> Tokens(const std::string& sentence, const std::string& start,
                                std::string_view arg) {
  std::vector<std::string> tokens;
  if (!start.empty()) tokens.push_back(start);
  std::istringstream in(sentence);
  std::string w;
  bool any = false;
  while (in >> w) {
    tokens.push_back(w);
    any = true;
  }
  if (!(any)) {
    FailArgument(arg, "\"" + sentence + "\"", "at least one word");
  }
  if (!(static_cast<std::int64_t>(tokens.size()) <= kMaxTokens)) {
    FailArgument(std::string(arg) + " tokens", tokens.size(), "at most 256 tokens");
  }
  return tokens;
}

// perm[i] = index in b of the token matched to a[i] (k-th occurrence to k-th).
std::vector<std::size_t> Match(const std::vector<std::string>& a, const std::vector<std::string>& b,
                               const std::string& second) {
  std::map<std::string, std::vector<std::size_t>> where;
  for (std::size_t i = b.size(); i-- > 0;) where[b[i]].push_back(i);
  std::vector<std::size_t> perm;
  for (const auto& w : a) {
    auto it = where.find(w);
    if (!(a.size() == b.size() && it != where.end() && !it->second.empty())) {
      FailArgument("second", "\"" + second + "\"", "a permutation of the words of first");
    }
    perm.push_back(it->second.back());
    it->second.pop_back();
  }
  return perm;
}

void ValidateDemo(const PermutationDemoParams& p) {
  Require(p.model_dim >= 4 && p.model_dim <= 1024 && p.model_dim % 2 == 0, "model_dim", p.model_dim,
          "an even dimension in [4, 1024]");
  if (!(p.heads >= 1 && p.model_dim % p.heads == 0 && (p.model_dim / p.heads) % 2 == 0)) {
    FailArgument("heads", p.heads,
                 "a head count dividing model_dim = " + std::to_string(p.model_dim) +
                     " into even head dims");
  }
}

// out [S, d] = x [S, d] . W [d, d] (row-major).
std::vector<double> Project(const std::vector<double>& x, const std::vector<double>& w,
                            std::int64_t rows, std::int64_t d_in, std::int64_t d_out) {
  std::vector<double> y(static_cast<std::size_t>(rows * d_out), 0.0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < d_in; ++i) {
      const double xi = x[static_cast<std::size_t>(r * d_in + i)];
      for (std::int64_t o = 0; o < d_out; ++o)
        y[static_cast<std::size_t>(r * d_out + o)] +=
            xi * w[static_cast<std::size_t>(i * d_out + o)];
    }
  return y;
}

// Token embeddings [S, d] (hashed per word), plus the sinusoidal or learned positions for
// those schemes.
std::vector<double> Embed(const PermutationDemoParams& p, std::string_view scheme,
                          const std::vector<std::string>& tokens) {
  const std::int64_t d = p.model_dim;
  const auto S = static_cast<std::int64_t>(tokens.size());
  std::vector<double> x;
  for (const auto& t : tokens) {
    const auto e = UniformVector(Fnv1a(t) ^ p.seed, d, 1.0);
    x.insert(x.end(), e.begin(), e.end());
  }
  const TensorView xv = TensorView::Contiguous(x.data(), DType::kFloat64, {1, S, d});
  if (scheme == "sinusoidal") {
    AddSinusoidal(SinusoidalParams{d}, xv, Positions::Offset(0));
  } else if (scheme == "learned") {
    LearnedTable::RandomNormal(LearnedInitParams{kMaxTokens, d, 0.02, p.seed + 4})
        .AddTo(xv, Positions::Offset(0));
  }
  return x;
}

// The tables a relative scheme points into; they must outlive the attention call.
struct SchemeTables {
  std::optional<T5BiasTable> t5;
  std::vector<double> a_key, a_value, u, vb, rw, kr, qr;
};

// Sets ap.scheme to the scheme named `scheme` for S tokens, its tables built into `tables`
// (DeBERTa projects its relative embeddings with wq / wk); throws for an unknown name.
void SetScheme(const PermutationDemoParams& p, std::string_view scheme, std::int64_t S,
               const std::vector<double>& wq, const std::vector<double>& wk, SchemeTables& tables,
               AttentionParams& ap) {
  const std::int64_t d = p.model_dim, H = p.heads, D = d / H;
  if (scheme == "none") {
    ap.scheme = PositionScheme::None();
  } else if (scheme == "sinusoidal" || scheme == "learned") {
    ap.scheme = AbsoluteScheme();
  } else if (scheme == "rope") {
    RopeParams rope;
    rope.head_dim = D;  // theta 10000, half-split pairing, full rotary dim
    ap.scheme = RopeScheme(rope);
  } else if (scheme == "alibi") {
    AlibiParams alibi;
    alibi.num_heads = H;
    ap.scheme = AlibiScheme(AlibiSlopes(alibi));
  } else if (scheme == "t5") {
    tables.t5.emplace(T5BucketParams{32, 128, T5Direction::kBidirectional}, H);
    tables.t5->InitNormal(p.seed + 5, 1.0 / std::sqrt(static_cast<double>(d)));
    ap.scheme = T5Scheme(*tables.t5);
  } else if (scheme == "shaw") {
    const ShawParams sp{4, D};
    tables.a_key = UniformVector(p.seed + 6, sp.TableRows() * D, 1.0 / static_cast<double>(D));
    tables.a_value = UniformVector(p.seed + 7, sp.TableRows() * D, 1.0 / static_cast<double>(D));
    ap.scheme = ShawScheme(
        sp, TensorView::Contiguous(tables.a_key.data(), DType::kFloat64, {sp.TableRows(), D}),
        TensorView::Contiguous(tables.a_value.data(), DType::kFloat64, {sp.TableRows(), D}));
  } else if (scheme == "transformer_xl") {
    tables.u = UniformVector(p.seed + 8, H * D, 1.0 / static_cast<double>(D));
    tables.vb = UniformVector(p.seed + 9, H * D, 1.0 / static_cast<double>(D));
    std::vector<double> r(static_cast<std::size_t>(S * d));
    TransformerXLPositionEmbedding(TransformerXLParams{d}, S,
                                   TensorView::Contiguous(r.data(), DType::kFloat64, {S, d}));
    tables.rw =
        Project(r, UniformVector(p.seed + 10, d * d, 1.0 / static_cast<double>(d)), S, d, d);
    ap.scheme =
        TransformerXLScheme(TensorView::Contiguous(tables.u.data(), DType::kFloat64, {H, D}),
                            TensorView::Contiguous(tables.vb.data(), DType::kFloat64, {H, D}),
                            TensorView::Contiguous(tables.rw.data(), DType::kFloat64, {S, H, D}));
  } else if (scheme == "deberta") {
    DebertaParams dp;  // v3 defaults: 256 buckets, max 512, c2p|p2c
    dp.head_dim = D;
    const std::int64_t rows = 2 * dp.AttSpan();
    const auto rel = UniformVector(p.seed + 11, rows * d, 1.0);
    tables.kr = Project(rel, wk, rows, d, d);
    tables.qr = Project(rel, wq, rows, d, d);
    ap.scheme =
        DebertaScheme(dp, TensorView::Contiguous(tables.kr.data(), DType::kFloat64, {rows, H, D}),
                      TensorView::Contiguous(tables.qr.data(), DType::kFloat64, {rows, H, D}));
  } else {
    std::string allowed = "one of";
    for (const auto& s : PermutationDemoSchemes()) allowed += " " + s;
    throw InvalidArgument(ArgMessage("scheme", std::string(scheme), allowed));
  }
}

// Per-token outputs [S, d] of one sentence under one scheme.
std::vector<double> Encode(const PermutationDemoParams& p, std::string_view scheme,
                           const std::vector<std::string>& tokens) {
  const std::int64_t d = p.model_dim, H = p.heads, D = d / H;
  const auto S = static_cast<std::int64_t>(tokens.size());
  const std::vector<double> x = Embed(p, scheme, tokens);
  const auto wq = UniformVector(p.seed + 1, d * d, 1.0 / static_cast<double>(d));
  const auto wk = UniformVector(p.seed + 2, d * d, 1.0 / static_cast<double>(d));
  const auto wv = UniformVector(p.seed + 3, d * d, 1.0 / static_cast<double>(d));
  const auto q = Project(x, wq, S, d, d), k = Project(x, wk, S, d, d), v = Project(x, wv, S, d, d);

  AttentionParams ap;
  ap.mask = AttentionMask::kBidirectional;
  SchemeTables tables;  // must outlive the call
  SetScheme(p, scheme, S, wq, wk, tables, ap);
  std::vector<double> out(static_cast<std::size_t>(S * d));
  AttentionReference(ap, TensorView::Contiguous(q.data(), DType::kFloat64, {1, S, H, D}),
                     TensorView::Contiguous(k.data(), DType::kFloat64, {1, S, H, D}),
                     TensorView::Contiguous(v.data(), DType::kFloat64, {1, S, H, D}),
                     TensorView::Contiguous(out.data(), DType::kFloat64, {1, S, H, D}));
  return out;
}

}  // namespace

const std::vector<std::string>& PermutationDemoSchemes() {
  static const std::vector<std::string> kSchemes = {
      "none", "sinusoidal", "learned", "rope", "alibi", "t5", "shaw", "transformer_xl", "deberta"};
  return kSchemes;
}

PermutationDemoResult RunPermutationDemoScheme(const PermutationDemoParams& params,
                                               std::string_view scheme) {
  ValidateDemo(params);
  const auto a = Tokens(params.first, params.start_token, "first");
  const auto b = Tokens(params.second, params.start_token, "second");
  const auto perm = Match(a, b, params.second);
  const auto out_a = Encode(params, scheme, a), out_b = Encode(params, scheme, b);
  const std::int64_t d = params.model_dim;
  PermutationDemoResult r;
  r.scheme = std::string(scheme);
  std::vector<double> pooled(static_cast<std::size_t>(d), 0.0);
  for (std::size_t i = 0; i < a.size(); ++i) {
    for (std::int64_t c = 0; c < d; ++c) {
      const double x = out_a[i * static_cast<std::size_t>(d) + static_cast<std::size_t>(c)];
      const double y = out_b[perm[i] * static_cast<std::size_t>(d) + static_cast<std::size_t>(c)];
      r.max_token_difference = std::max(r.max_token_difference, std::fabs(x - y));
      pooled[static_cast<std::size_t>(c)] += (x - y) / static_cast<double>(a.size());
    }
  }
  double sq = 0.0;
  for (double x : pooled) sq += x * x;
  r.pooled_difference = std::sqrt(sq);
  r.order_aware = r.pooled_difference > kOrderAwareThreshold;
  return r;
}

std::vector<PermutationDemoResult> RunPermutationDemo(const PermutationDemoParams& params) {
  std::vector<PermutationDemoResult> results;
  for (const auto& s : PermutationDemoSchemes())
    results.push_back(RunPermutationDemoScheme(params, s));
  return results;
}

}  // namespace posenc
