// The permutation demonstration: without positions the outputs are permuted
// copies (pooled vectors equal); every scheme makes them differ; bad input.
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "posenc/demo.h"
#include "posenc/error.h"

namespace posenc {
namespace {

TEST(PermutationDemo, NoPositionsIsPermutationEquivariant) {
  const auto r = RunPermutationDemoScheme(PermutationDemoParams{}, "none");
  EXPECT_LE(r.max_token_difference, 1e-12);
  EXPECT_LE(r.pooled_difference, 1e-12);
  EXPECT_FALSE(r.order_aware);
}

TEST(PermutationDemo, EverySchemeIsOrderAware) {
  const auto results = RunPermutationDemo();
  ASSERT_EQ(results.size(), PermutationDemoSchemes().size());
  ASSERT_EQ(results.size(), 9u);
  for (const auto& r : results) {
    if (r.scheme == "none") continue;
    EXPECT_TRUE(r.order_aware) << r.scheme;
    EXPECT_GT(r.pooled_difference, 1e-4) << r.scheme;
    EXPECT_GE(r.max_token_difference, r.pooled_difference / 2) << r.scheme;
  }
  // Deterministic: a second run gives the same numbers bit for bit.
  const auto again = RunPermutationDemo();
  for (std::size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].pooled_difference, again[i].pooled_difference) << results[i].scheme;
  }
}

TEST(PermutationDemo, SymmetricAlibiIsBlindToAnExactReversal) {
  PermutationDemoParams p;
  p.start_token = "";  // "man bites dog" is then the mirror image of "dog bites man"
  EXPECT_LE(RunPermutationDemoScheme(p, "alibi").pooled_difference, 1e-12);
  EXPECT_TRUE(RunPermutationDemoScheme(p, "rope").order_aware);  // signed distances
  EXPECT_LE(RunPermutationDemoScheme(p, "none").max_token_difference, 1e-12);
}

TEST(PermutationDemo, RepeatedWordsAreMatchedByOccurrence) {
  PermutationDemoParams p;
  p.first = "the dog saw the cat";
  p.second = "the cat saw the dog";
  EXPECT_LE(RunPermutationDemoScheme(p, "none").max_token_difference, 1e-12);
  EXPECT_TRUE(RunPermutationDemoScheme(p, "sinusoidal").order_aware);
}

void ExpectInvalid(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected InvalidArgument mentioning " << needle;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(PermutationDemoBadInput, NotAPermutation) {
  PermutationDemoParams p;
  p.second = "man bites cat";
  ExpectInvalid([&] { RunPermutationDemo(p); }, "second: got \"man bites cat\"");
}

TEST(PermutationDemoBadInput, EmptySentence) {
  PermutationDemoParams p;
  p.first = "  ";
  ExpectInvalid([&] { RunPermutationDemo(p); }, "first");
}

TEST(PermutationDemoBadInput, UnknownScheme) {
  ExpectInvalid([] { RunPermutationDemoScheme(PermutationDemoParams{}, "xpos"); },
                "scheme: got xpos");
}

TEST(PermutationDemoBadInput, Dims) {
  PermutationDemoParams p;
  p.heads = 3;
  ExpectInvalid([&] { RunPermutationDemo(p); }, "heads: got 3");
  p.heads = 4;
  p.model_dim = 2;
  ExpectInvalid([&] { RunPermutationDemo(p); }, "model_dim: got 2");
}

}  // namespace
}  // namespace posenc
