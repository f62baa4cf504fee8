// The scheme registry (posenc/scheme.h, src/attention/scheme_registry.cc):
// declarations are consistent, lookups and named arguments are validated
// with messages that name the argument, and each family's factory
// (AlibiScheme, T5Scheme, RopeScheme, ...) gives the same attention as the
// registered form with named arguments.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "flash_test_util.h"
#include "posenc/scheme.h"

namespace posenc {
namespace {

using flash_test::ExpectInvalid;
using flash_test::MaxErr;
using flash_test::RandomFloats;

TEST(SchemeRegistry, DeclarationsAreConsistent) {
  std::set<std::string> names;
  for (const SchemeInfo* info : RegisteredSchemes()) {
    EXPECT_TRUE(names.insert(std::string(info->name)).second) << info->name;
    EXPECT_FALSE(info->title.empty()) << info->name;
    EXPECT_FALSE(info->paper.empty()) << info->name;
    std::set<std::string> args;
    for (const SchemeArgDecl& a : info->args) {
      EXPECT_TRUE(args.insert(std::string(a.name)).second) << info->name << "." << a.name;
      if (a.grad == SchemeArgGrad::kTrainable) {
        EXPECT_EQ(a.type, SchemeArgType::kTensor) << info->name << "." << a.name;
      }
      EXPECT_EQ(a.type == SchemeArgType::kTensor, !a.shape.empty()) << info->name << "." << a.name;
    }
    EXPECT_EQ(&FindScheme(info->name), info);
  }
  for (const char* n :
       {"none", "absolute", "rope", "alibi", "t5", "shaw", "transformer_xl", "deberta", "fire"}) {
    EXPECT_EQ(names.count(n), 1u) << n;
  }
  EXPECT_EQ(SchemeNames(true), "none, absolute, rope, alibi, t5, shaw, fire");
}

TEST(SchemeRegistry, UnknownNameListsTheRegisteredOnes) {
  ExpectInvalid([] { FindScheme("cope"); }, "scheme: got cope, expected one of none, absolute");
  ExpectInvalid([] { PositionScheme::Registered("cope", {}); }, "scheme.name: got cope");
}

struct Small {
  std::vector<float> q = RandomFloats(2 * 6 * 4 * 8, 1), k = RandomFloats(2 * 6 * 2 * 8, 2),
                     v = RandomFloats(2 * 6 * 2 * 8, 3);
  TensorView Q() { return TensorView::Contiguous(q.data(), DType::kFloat32, {2, 6, 4, 8}); }
  TensorView K() { return TensorView::Contiguous(k.data(), DType::kFloat32, {2, 6, 2, 8}); }
  TensorView V() { return TensorView::Contiguous(v.data(), DType::kFloat32, {2, 6, 2, 8}); }
  std::vector<double> Out(const PositionScheme& s, bool flash) {
    std::vector<double> out(2 * 6 * 4 * 8);
    AttentionParams p;
    p.scheme = s;
    const TensorView o = TensorView::Contiguous(out.data(), DType::kFloat64, {2, 6, 4, 8});
    if (flash) {
      FlashAttention(p, Q(), K(), V(), o);
    } else {
      AttentionReference(p, Q(), K(), V(), o);
    }
    return out;
  }
};

TEST(SchemeRegistry, FactoriesAndNamedFormsAgree) {
  Small s;
  std::vector<double> slopes = {0.5, 0.25, 0.125, 0.0625};
  SchemeArgs a;
  a.Tensor("slopes", TensorView::Contiguous(slopes.data(), DType::kFloat64, {4}));
  T5BiasTable table(T5BucketParams{}, 4);
  table.InitNormal(5, 1.0);
  SchemeArgs t;
  t.Tensor("table", table.view()).Integer("max_distance", 128).Flag("bidirectional", true);
  RopeParams rope;
  rope.head_dim = 8;
  rope.theta = 500.0;
  SchemeArgs r;
  r.Number("theta", 500.0);
  const std::vector<std::pair<PositionScheme, PositionScheme>> pairs = {
      {AlibiScheme(slopes), PositionScheme::Registered("alibi", a)},
      {T5Scheme(table), PositionScheme::Registered("t5", t)},
      {RopeScheme(rope), PositionScheme::Registered("rope", r)}};
  for (const auto& [typed, registered] : pairs) {
    for (bool flash : {false, true}) {
      EXPECT_EQ(MaxErr(s.Out(typed, flash), s.Out(registered, flash)), 0.0)
          << registered.name << (flash ? " flash" : " reference");
    }
  }
}

// SchemeArgs::Vector owns its values: a scheme built from a temporary, and
// its copies, stay valid after the temporary and the original are gone.
TEST(SchemeRegistry, VectorArgumentsAreOwned) {
  Small s;
  std::vector<double> slopes = {0.5, 0.25, 0.125, 0.0625};
  SchemeArgs a;
  a.Tensor("slopes", TensorView::Contiguous(slopes.data(), DType::kFloat64, {4}));
  const PositionScheme viewed = PositionScheme::Registered("alibi", a);
  PositionScheme copy;
  {
    auto original = std::make_unique<PositionScheme>(AlibiScheme(std::vector<double>(slopes)));
    copy = *original;
  }
  const SchemeArgs::Value* v = copy.args.Find("slopes");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->tensor.shape[0], 4);
  EXPECT_EQ(static_cast<const double*>(v->tensor.data)[3], 0.0625);
  for (bool flash : {false, true}) {
    EXPECT_EQ(MaxErr(s.Out(copy, flash), s.Out(viewed, flash)), 0.0) << flash;
  }
}

TEST(SchemeRegistry, ArgumentsAreCheckedAgainstTheDeclaration) {
  Small s;
  SchemeArgs wrong_type;
  wrong_type.Text("max_bias", "eight");
  ExpectInvalid([&] { s.Out(PositionScheme::Registered("alibi", wrong_type), false); },
                "scheme.alibi.max_bias: got a text, expected a number");
  SchemeArgs unknown;
  unknown.Number("slope", 1.0);
  ExpectInvalid([&] { s.Out(PositionScheme::Registered("alibi", unknown), true); },
                "scheme argument: got slope, expected one of the alibi arguments: slopes, "
                "max_bias, convention");
  ExpectInvalid([&] { s.Out(PositionScheme::Registered("t5", {}), false); },
                "scheme.t5.table: got nothing");
  SchemeArgs integral;  // an integral number is accepted where an integer is declared
  integral.Number("rotary_dim", 4.0);
  EXPECT_NO_THROW(s.Out(PositionScheme::Registered("rope", integral), true));
  integral.Number("rotary_dim", 4.5);
  ExpectInvalid([&] { s.Out(PositionScheme::Registered("rope", integral), true); },
                "scheme.rope.rotary_dim: got a number, expected an integer");
}

TEST(SchemeRegistry, ReferenceOnlySchemesAreRejectedByTheFusedKernel) {
  Small s;
  PositionScheme xl = PositionScheme::Registered("transformer_xl", {});
  ExpectInvalid([&] { s.Out(xl, true); },
                "scheme.name: got transformer_xl, expected one of none, absolute, rope, alibi, "
                "t5, shaw, fire (flash attention; use AttentionReference for transformer_xl, "
                "deberta)");
}

}  // namespace
}  // namespace posenc
