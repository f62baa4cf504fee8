// `posenc buckets t5|deberta --relative A:B [--json]`: the bucket of each
// relative position under T5's (include/posenc/t5.h) or DeBERTa's
// (include/posenc/deberta.h) scheme. A:B is INCLUSIVE of B ("-300:300" is
// 601 values, as the golden fixtures list them); a comma list "0,5,-9" is
// also accepted. Text output is a two-column table; --json prints
// {"relative": [...], "bucket": [...]}.
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "output.h"
#include "posenc/deberta.h"
#include "posenc/error.h"
#include "posenc/positions.h"
#include "posenc/t5.h"

namespace posenc::cli {
namespace {

constexpr const char* kRelativeHelp =
    "Relative positions: A:B (inclusive of both ends, e.g. -300:300 is 601 values) or a comma "
    "list 0,5,-9";

void Print(const std::vector<std::int64_t>& rel, const std::vector<std::int64_t>& bucket, bool json,
           const std::string& title) {
  if (json) {
    nlohmann::json j;
    j["relative"] = rel;
    j["bucket"] = bucket;
    std::cout << j.dump() << '\n';
    return;
  }
  std::cout << "# " << title << '\n';
  std::cout << fmt::format("{:>10}  {:>10}\n", "relative", "bucket");
  for (std::size_t r = 0; r < rel.size(); ++r) {
    std::cout << fmt::format("{:>10}  {:>10}\n", rel[r], bucket[r]);
  }
}

struct T5Args {
  std::int64_t num_buckets = 32;
  std::int64_t max_distance = 128;
  bool causal = false;
  std::string relative;
  bool json = false;
};

void RunT5(const T5Args& a) {
  const T5BucketParams p{a.num_buckets, a.max_distance,
                         a.causal ? T5Direction::kCausal : T5Direction::kBidirectional};
  const T5Bucketer bucketer(p);  // validates
  const std::vector<std::int64_t> rel = ParseRelativeList(a.relative, "--relative");
  std::vector<std::int64_t> bucket;
  bucket.reserve(rel.size());
  for (const std::int64_t r : rel) bucket.push_back(bucketer.Bucket(r));
  Print(rel, bucket, a.json,
        fmt::format("t5 {} num_buckets={} max_distance={} (relative = key - query)",
                    T5DirectionName(p.direction), p.num_buckets, p.max_distance));
}

struct DebertaArgs {
  std::int64_t bucket_size = 256;
  std::int64_t max_position = 512;
  std::string relative;
  bool json = false;
};

void RunDeberta(const DebertaArgs& a) {
  Require(a.bucket_size > 0, "--bucket-size", a.bucket_size, "a bucket count in [2, 2^24]");
  Require(a.max_position > 0, "--max-position", a.max_position,
          "a maximum position in [bucket_size/2 + 2, 2^24]");
  const DebertaBucketer bucketer(DebertaBucketParams{a.bucket_size, a.max_position});
  const std::vector<std::int64_t> rel = ParseRelativeList(a.relative, "--relative");
  std::vector<std::int64_t> bucket;
  bucket.reserve(rel.size());
  for (const std::int64_t r : rel) bucket.push_back(bucketer.Bucket(r));
  Print(rel, bucket, a.json,
        fmt::format("deberta bucket_size={} max_position={} (relative = query - key)",
                    a.bucket_size, a.max_position));
}

}  // namespace

void RegisterBucketsCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "buckets", "Print the bucket of each relative position (T5 or DeBERTa log buckets)");
  cmd->require_subcommand(1);

  auto t5 = std::make_shared<T5Args>();
  CLI::App* t = cmd->add_subcommand(
      "t5",
      "T5 relative buckets (HF T5Attention._relative_position_bucket), relative = key - query");
  t->add_option("--num-buckets", t5->num_buckets,
                "Number of buckets (>= 4 bidirectional, >= 2 causal)")
      ->capture_default_str();
  t->add_option("--max-distance", t5->max_distance,
                "Distance at which buckets saturate (> the exact range)")
      ->capture_default_str();
  t->add_flag("--causal", t5->causal, "Causal (decoder) buckets instead of bidirectional");
  t->add_option("--relative", t5->relative, kRelativeHelp)->required();
  t->add_flag("--json", t5->json, R"(Print {"relative": [...], "bucket": [...]})");
  t->callback([t5] { RunT5(*t5); });

  auto de = std::make_shared<DebertaArgs>();
  CLI::App* d = cmd->add_subcommand(
      "deberta", "DeBERTa log buckets (HF make_log_bucket_position), relative = query - key");
  d->add_option("--bucket-size", de->bucket_size, "position_buckets (>= 2)")->capture_default_str();
  d->add_option("--max-position", de->max_position, "max_relative_positions (>= bucket_size/2 + 2)")
      ->capture_default_str();
  d->add_option("--relative", de->relative, kRelativeHelp)->required();
  d->add_flag("--json", de->json, R"(Print {"relative": [...], "bucket": [...]})");
  d->callback([de] { RunDeberta(*de); });
}

}  // namespace posenc::cli
