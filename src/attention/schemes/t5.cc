// Scheme "t5": T5's learned relative bias (Raffel et al. 2020, "Exploring
// the Limits of Transfer Learning with a Unified Text-to-Text Transformer",
// section 2.1; HF T5Attention.compute_bias).
//   logit(i, j) = scale * q_i . k_j + table[bucket(r - p), h]
// buckets of posenc/t5.h (exact for |r - p| < max_exact, then logarithmic
// up to max_distance; bidirectional or causal), the table [num_buckets, H]
// learned (its gradient is sum of d logit over the pairs of each bucket).
// T5 itself uses scale = 1 (pass scale). Reference: HF transformers
// (tests/golden/t5_buckets.json). The bias depends only on r - p, so the
// fused kernels evaluate it once per distance of a tile.
#include <string>

#include "attention/scheme_policy.h"
#include "posenc/error.h"
#include "posenc/t5.h"

namespace posenc::attention_internal {
namespace {

const SchemeInfo& Info() {
  static const SchemeInfo info{
      .name = "t5",
      .title = "T5 relative buckets",
      .paper =
          "Raffel et al. 2020, Exploring the Limits of Transfer Learning with a Unified "
          "Text-to-Text Transformer",
      .formula = "logit = scale * q . k + table[bucket(r - p), h]",
      .terms = static_cast<std::uint8_t>(SchemeTerm::kBias),
      .kernels = SchemeKernels::kReferenceFused,
      .masks = SchemeMasks::kAny,
      .args =
          {
              {.name = "table",
               .type = SchemeArgType::kTensor,
               .shape = "[num_buckets, H]",
               .grad = SchemeArgGrad::kTrainable,
               .presence = SchemeArgPresence::kRequired,
               .doc = "learned bias per bucket and head"},
              {.name = "max_distance",
               .type = SchemeArgType::kInteger,
               .default_text = "128",
               .doc = "distance where the last logarithmic bucket starts"},
              {.name = "bidirectional",
               .type = SchemeArgType::kFlag,
               .default_text = "true",
               .doc = "encoder buckets (both signs) or causal buckets (decoder)"},
          },
  };
  return info;
}

class T5Scheme final : public SchemeImpl<T5Scheme> {
 public:
  T5Scheme(const T5BucketParams& params, std::int64_t heads, std::vector<float> table)
      : SchemeImpl(Info()), bucketer_(params), heads_(heads), table_(std::move(table)) {}

  template <typename T>
  T BiasAt(std::int64_t h, std::int64_t p, std::int64_t r) const {
    return static_cast<T>(table_[static_cast<std::size_t>(bucketer_.BucketOf(p, r) * heads_ + h)]);
  }
  void BiasGradAt(std::int64_t h, std::int64_t p, std::int64_t r, double g,
                  SchemeGradSums& sums) const {
    sums.tensors[0][static_cast<std::size_t>(bucketer_.BucketOf(p, r) * heads_ + h)] += g;
  }
  bool DistanceOnly(std::int64_t, std::int64_t) const override { return true; }
  void Record(const TensorView& table) { AddTrainable("table", table); }

 private:
  T5Bucketer bucketer_;
  std::int64_t heads_;
  std::vector<float> table_;  // [num_buckets, H]
};

std::unique_ptr<SchemePolicy> Resolve(const SchemeArgs& args, const SchemeCall& call) {
  const SchemeArgReader a(Info(), args);
  const TensorView& t = a.RequiredTensor("table");
  ValidateView(t, a.Name("table"), 2);
  const std::int64_t H = call.dims.heads;
  if (t.shape[1] != H) {
    FailArgument(a.Name("table") + " heads", t.shape[1],
                 "the number of query heads (" + std::to_string(H) + ")");
  }
  T5BucketParams b;
  b.num_buckets = t.shape[0];
  b.max_distance = a.Integer("max_distance", 128);
  b.direction = a.Flag("bidirectional", true) ? T5Direction::kBidirectional : T5Direction::kCausal;
  const std::vector<double> values = CopyTable(t, a.Name("table"), {t.shape[0], H});
  auto scheme = std::make_unique<T5Scheme>(b, H, std::vector<float>(values.begin(), values.end()));
  scheme->Record(t);
  return scheme;
}

}  // namespace

POSENC_REGISTER_SCHEME(t5, &Info, &Resolve)

}  // namespace posenc::attention_internal

namespace posenc {

PositionScheme T5Scheme(const TensorView& table, std::int64_t max_distance, T5Direction direction) {
  SchemeArgs a;
  a.Tensor("table", table).Integer("max_distance", max_distance);
  a.Flag("bidirectional", direction == T5Direction::kBidirectional);
  return PositionScheme::Registered("t5", std::move(a));
}

PositionScheme T5Scheme(const T5BiasTable& table) {
  const T5BucketParams& params = table.bucketer().params();
  return T5Scheme(
      TensorView::Contiguous(table.data(), DType::kFloat32, {table.num_buckets(), table.heads()}),
      params.max_distance, params.direction);
}

}  // namespace posenc
