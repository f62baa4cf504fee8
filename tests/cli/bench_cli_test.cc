// `posenc bench`: a tiny smoke run (small shapes, no torch) whose JSON must
// carry every documented key with sane values, and the bad-input errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <string>

#include "cli_util.h"

namespace posenc::test {
namespace {

TEST(BenchCli, SmokeJsonHasEveryKey) {
  const auto r = RunCli("bench all --threads 2 --json --max-seq 64 --reps 1 --warmup 0 --no-torch");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("machine"));
  EXPECT_FALSE(j["machine"].at("simd_target").get<std::string>().empty());
  // Honest ceilings: the LLC size and where it came from; the float32 FMA
  // compute ceiling is measured on every CPU.
  EXPECT_GE(j["machine"].at("llc_bytes").get<std::int64_t>(), 0);
  EXPECT_FALSE(j["machine"].at("llc_source").get<std::string>().empty());
  ASSERT_FALSE(j["machine"].at("compute_ceilings").empty());
  EXPECT_EQ(j["machine"]["compute_ceilings"][0]["kernel"], "float32_fma");
  EXPECT_GT(j["machine"]["compute_ceilings"][0]["gflops"].get<double>(), 0.0);
  std::set<std::string> kernels;
  for (const auto& row : j.at("results")) {
    for (const char* key :
         {"kernel", "dtype", "shape", "threads", "inplace", "ms", "gbps", "bandwidth_gbps",
          "fraction_of_bandwidth", "speedup_vs_torch", "cache_resident"}) {
      ASSERT_TRUE(row.contains(key)) << key << " missing in " << row.dump();
    }
    kernels.insert(row["kernel"].get<std::string>());
    EXPECT_EQ(row["threads"].get<int>(), 2);
    EXPECT_GT(row["ms"].get<double>(), 0.0);
    EXPECT_GT(row["gbps"].get<double>(), 0.0);
    EXPECT_NEAR(row["fraction_of_bandwidth"].get<double>(),
                row["gbps"].get<double>() / row["bandwidth_gbps"].get<double>(), 1e-9);
    EXPECT_TRUE(row["speedup_vs_torch"].is_null());  // --no-torch
  }
  EXPECT_EQ(kernels,
            (std::set<std::string>{"rope", "rope_cos_sin", "sinusoidal", "alibi", "t5_bias"}));
  // rope: decode (seq 1) and the --max-seq shape, float32, bfloat16 and float16, in and out
  // of place; tables: 2 x 2; bias: {alibi, t5_bias} x 2 dtypes at S = --max-seq.
  EXPECT_EQ(j["results"].size(), 2u * 3u * 2u + 4u + 4u);
}

TEST(BenchCli, TextTable) {
  const auto r = RunCli("bench rope --threads 1 --max-seq 8 --reps 1 --warmup 0 --no-torch");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("speedup"), std::string::npos);
  EXPECT_NE(r.out.find("bfloat16"), std::string::npos);
}

TEST(BenchCli, BadThreads) {
  const auto r = RunCli("bench rope --threads -3 --no-torch");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--threads: got -3"), std::string::npos) << r.err;
}

TEST(BenchCli, BadMaxSeq) {
  const auto r = RunCli("bench rope --max-seq 0 --no-torch");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--max-seq: got 0"), std::string::npos) << r.err;
}

TEST(BenchCli, BadReps) {
  const auto r = RunCli("bench rope --reps 0 --no-torch");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--reps: got 0"), std::string::npos) << r.err;
}

TEST(BenchCli, UnknownKernel) {
  const auto r = RunCli("bench nope");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("nope"), std::string::npos) << r.err;
}

TEST(BenchCli, MissingTorchScriptIsIoError) {
  const auto r =
      RunCli("bench rope --max-seq 2 --reps 1 --warmup 0 --torch-script /nonexistent/x.py");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("--torch-script"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace posenc::test
