// posenc/demo.h: the permutation demonstration.
//
// Self-attention without position information is permutation-equivariant:
// permuting the input tokens permutes the outputs the same way, so a
// mean-pooled sentence vector cannot tell "dog bites man" from "man bites
// dog". The demonstration embeds both sentences, runs one attention layer
// (bidirectional, as in an encoder: a causal mask would itself leak order)
// with each positional scheme and reports how far apart the two sentence
// vectors are.
//
// Setup (all deterministic, the same on every platform):
//  - tokens: the sentence split on spaces, preceded by `start_token` (default
//    "<s>", like BERT's [CLS]); each word's vector has model_dim entries
//    uniform in [-sqrt(3), sqrt(3)) (unit variance) from SplitMix64 seeded by
//    the FNV-1a hash of the word xor the seed;
//  - Wq, Wk, Wv [model_dim, model_dim] uniform with variance 1/model_dim from
//    SplitMix64(seed + 1, + 2, + 3); heads of head_dim = model_dim / heads;
//  - schemes (PermutationDemoSchemes()): none; sinusoidal (AddSinusoidal to
//    the embeddings); learned (a LearnedTable N(0, 0.02^2) added to the
//    embeddings); rope (RoPE on q, k, theta 10000); alibi (reference slopes,
//    symmetric |i - j| form); t5 (bidirectional buckets 32/128, table
//    N(0, 1/model_dim)); shaw (clip 4, tables N-like with variance 1/head_dim);
//    transformer_xl (u, v per head, RW = W_R R with R the descending
//    sinusoid); deberta (v3 defaults: 256 buckets, max 512, Kr = E Wk and
//    Qr = E Wq with a random relative table E, share_att_key).
// The start token matters for symmetric schemes: "man bites dog" is the exact
// reversal of "dog bites man", and a bias that depends only on |i - j|
// (symmetric ALiBi) is blind to a reversal; with the start token the two are
// no longer mirror images. Set start_token = "" to see that effect.
//
// Results: the per-token outputs of the second sentence, matched to the first
// by word (k-th occurrence to k-th occurrence), differ by max_token_difference
// (max abs over all entries); pooled_difference is the Euclidean norm of the
// difference of the mean-pooled outputs. Without position information both
// are rounding noise (<= 1e-12); order_aware = pooled_difference >
// kOrderAwareThreshold. Arithmetic is float64 (AttentionReference).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace posenc {

inline constexpr double kOrderAwareThreshold = 1e-9;

struct PermutationDemoParams {
  std::string first = "dog bites man";
  std::string second = "man bites dog";  // must be a permutation of first's words
  std::string start_token = "<s>";       // prepended to both; "" for none
  std::int64_t model_dim = 64;           // even, in [4, 1024], divisible by heads
  std::int64_t heads = 4;                // head_dim = model_dim / heads must be even
  std::uint64_t seed = 2026;
};

struct PermutationDemoResult {
  std::string scheme;  // a name from PermutationDemoSchemes()
  double pooled_difference = 0.0;
  double max_token_difference = 0.0;
  bool order_aware = false;
};

// "none", "sinusoidal", "learned", "rope", "alibi", "t5", "shaw",
// "transformer_xl", "deberta" (the order of the results).
const std::vector<std::string>& PermutationDemoSchemes();

// Runs every scheme. Throws InvalidArgument naming the field for bad params
// (empty sentence, more than 256 tokens, words that are not a permutation,
// dims out of range).
std::vector<PermutationDemoResult> RunPermutationDemo(
    const PermutationDemoParams& params = PermutationDemoParams{});

// One scheme by name (throws InvalidArgument for an unknown name).
PermutationDemoResult RunPermutationDemoScheme(const PermutationDemoParams& params,
                                               std::string_view scheme);

}  // namespace posenc
