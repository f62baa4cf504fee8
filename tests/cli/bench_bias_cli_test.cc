// `posenc bench bias`: a tiny smoke run (--max-seq 48, no torch) whose JSON
// rows carry the rope rows' fields with the bias kernels' values (bytes
// written, the write ceiling), one tiny run through the PyTorch baselines
// of bench/torch_baseline.py, the text table, and the float16 RoPE rows.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <string>

#include "cli_util.h"

namespace posenc::test {
namespace {

TEST(BenchBiasCli, SmokeJsonRows) {
  const auto r =
      RunCli("bench bias --threads 2 --json --max-seq 48 --reps 1 --warmup 0 --no-torch");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& rows = j.at("results");
  ASSERT_EQ(rows.size(), 4u);  // {alibi, t5_bias} x {float32, bfloat16}, S = 48
  std::set<std::string> seen;
  for (const auto& row : rows) {
    for (const char* key : {"kernel", "dtype", "shape", "threads", "inplace", "ms", "bytes", "gbps",
                            "bandwidth_kernel", "bandwidth_gbps", "fraction_of_bandwidth",
                            "torch_ms", "torch_variant", "speedup_vs_torch"}) {
      ASSERT_TRUE(row.contains(key)) << key << " missing in " << row.dump();
    }
    const std::string kernel = row["kernel"].get<std::string>(),
                      dtype = row["dtype"].get<std::string>();
    seen.insert(kernel + "/" + dtype);
    EXPECT_EQ(row["shape"], nlohmann::json::array({32, 48, 48}));
    EXPECT_EQ(row["threads"].get<int>(), 2);
    EXPECT_FALSE(row["inplace"].get<bool>());
    EXPECT_EQ(row["bandwidth_kernel"].get<std::string>(), "write");
    // Bytes written: H * S * S elements of the dtype.
    EXPECT_EQ(row["bytes"].get<double>(), 32.0 * 48 * 48 * (dtype == "float32" ? 4 : 2));
    EXPECT_GT(row["ms"].get<double>(), 0.0);
    EXPECT_NEAR(row["gbps"].get<double>(),
                row["bytes"].get<double>() / (row["ms"].get<double>() * 1e6), 1e-9);
    EXPECT_NEAR(row["fraction_of_bandwidth"].get<double>(),
                row["gbps"].get<double>() / row["bandwidth_gbps"].get<double>(), 1e-9);
    EXPECT_TRUE(row["torch_ms"].is_null());
    EXPECT_TRUE(row["speedup_vs_torch"].is_null());
  }
  EXPECT_EQ(seen, (std::set<std::string>{"alibi/float32", "alibi/bfloat16", "t5_bias/float32",
                                         "t5_bias/bfloat16"}));
}

TEST(BenchBiasCli, TorchBaselinesRun) {
  const auto r = RunCli("bench bias --threads 1 --json --max-seq 16 --reps 1 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j.at("machine").at("torch").get<std::string>().empty());
  for (const auto& row : j.at("results")) {
    ASSERT_TRUE(row["torch_ms"].is_number()) << row.dump();
    EXPECT_GT(row["torch_ms"].get<double>(), 0.0);
    EXPECT_NEAR(row["speedup_vs_torch"].get<double>(),
                row["torch_ms"].get<double>() / row["ms"].get<double>(), 1e-9);
    EXPECT_EQ(row["torch_variant"].get<std::string>(), row["kernel"] == "alibi"
                                                           ? "xtransformers_alibi_causal_masked"
                                                           : "hf_t5_compute_bias");
  }
}

TEST(BenchBiasCli, TextTable) {
  const auto r = RunCli("bench bias --threads 1 --max-seq 8 --reps 1 --warmup 0 --no-torch");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("alibi"), std::string::npos);
  EXPECT_NE(r.out.find("t5_bias"), std::string::npos);
  EXPECT_NE(r.out.find("32x8x8"), std::string::npos);
}

TEST(BenchBiasCli, RopeHasFloat16Rows) {
  const auto r = RunCli("bench rope --threads 1 --json --max-seq 8 --reps 1 --warmup 0 --no-torch");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  int f16 = 0;
  for (const auto& row : j.at("results")) f16 += row["dtype"] == "float16";
  EXPECT_EQ(f16, 4);  // seq 1 and 8, in and out of place
}

TEST(BenchBiasCli, BadMaxSeq) {
  const auto r = RunCli("bench bias --max-seq 16385 --no-torch");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--max-seq: got 16385"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace posenc::test
