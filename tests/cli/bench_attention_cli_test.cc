// `posenc bench attention`: a tiny smoke run (S = 64, no torch) whose JSON
// entries carry every documented key with sane values (the float32 entries
// also check the fused attention against the reference attention), the
// text table, and the error paths.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <string>

#include "cli_util.h"

namespace posenc::test {
namespace {

TEST(BenchAttentionCli, SmokeJsonEntries) {
  const auto r = RunCli(
      "bench attention --threads 2 --json --max-seq 64 --reps 1 --warmup 0 --no-torch --backward "
      "--decode");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("machine"));
  const auto& machine = j["machine"];
  EXPECT_TRUE(machine.contains("llc_bytes"));
  ASSERT_FALSE(machine.at("compute_ceilings").empty());
  for (const auto& c : machine["compute_ceilings"]) {
    for (const char* key : {"kernel", "dtype", "gflops", "threads"}) ASSERT_TRUE(c.contains(key));
    EXPECT_GT(c["gflops"].get<double>(), 0.0);
  }
  std::set<std::string> seen;
  int backward = 0, decode = 0, decode_c = 0;
  for (const auto& e : j.at("results")) {
    const std::string kernel = e.at("kernel").get<std::string>();
    if (kernel == "attention_backward") {
      ++backward;
      for (const char* key : {"scheme", "seq", "heads", "head_dim", "causal", "dtype", "threads",
                              "ms", "forward_ms", "gflops", "fraction_of_compute", "peak_extra_mib",
                              "torch_ms", "torch_peak_mib", "speedup_vs_torch"}) {
        ASSERT_TRUE(e.contains(key)) << key << " missing in " << e.dump();
      }
      EXPECT_EQ(e["seq"].get<int>(), 64);
      EXPECT_GT(e["ms"].get<double>(), 0.0);
      EXPECT_GT(e["forward_ms"].get<double>(), 0.0);
      EXPECT_GT(e["gflops"].get<double>(), 0.0);
      EXPECT_GT(e["fraction_of_compute"].get<double>(), 0.0);
      EXPECT_TRUE(e["torch_ms"].is_null());
      continue;
    }
    if (kernel == "attention_decode") {
      ++decode;
      for (const char* key : {"scheme", "seq", "dtype", "ms", "bandwidth_gbps",
                              "fraction_of_bandwidth", "cache_resident", "torch_ms"}) {
        ASSERT_TRUE(e.contains(key)) << key << " missing in " << e.dump();
      }
      EXPECT_EQ(e["seq"].get<int>(), 64);  // --max-seq below 16384: that cache length alone
      EXPECT_EQ(e["dtype"], "bfloat16");
      EXPECT_GT(e["bandwidth_gbps"].get<double>(), 0.0);
      EXPECT_GT(e["fraction_of_bandwidth"].get<double>(), 0.0);
      EXPECT_TRUE(e["cache_resident"].get<bool>());  // 256 KiB of cache: never DRAM-sized
      continue;
    }
    if (kernel == "attention_decode_c") {  // the C entry points on the same shapes
      ++decode_c;
      for (const char* key :
           {"scheme", "seq", "ms", "cpp_ms", "c_over_cpp", "unplanned_ms", "unplanned_over_cpp",
            "prefill_c_ms", "speedup_vs_prefill_c", "paged16_ms", "paged16_over_dense",
            "paged64_ms", "paged64_over_dense"}) {
        ASSERT_TRUE(e.contains(key)) << key << " missing in " << e.dump();
      }
      EXPECT_EQ(e["seq"].get<int>(), 64);
      for (const char* key : {"ms", "cpp_ms", "unplanned_ms", "prefill_c_ms", "paged16_ms",
                              "paged64_ms", "paged16_over_dense", "paged64_over_dense"}) {
        EXPECT_GT(e[key].get<double>(), 0.0) << key;
      }
      EXPECT_NEAR(e["c_over_cpp"].get<double>(), e["ms"].get<double>() / e["cpp_ms"].get<double>(),
                  1e-12);
      continue;
    }
    for (const char* key : {"kernel", "scheme", "seq", "heads", "head_dim", "causal", "threads",
                            "dtype", "ms", "peak_extra_mib", "torch_ms", "torch_peak_mib",
                            "reference_ms", "gflops", "fraction_of_compute"}) {
      ASSERT_TRUE(e.contains(key)) << key << " missing in " << e.dump();
    }
    EXPECT_EQ(kernel, "attention");
    EXPECT_EQ(e["seq"].get<int>(), 64);
    EXPECT_EQ(e["heads"].get<int>(), 8);
    EXPECT_EQ(e["head_dim"].get<int>(), 64);
    EXPECT_TRUE(e["causal"].get<bool>());
    EXPECT_EQ(e["threads"].get<int>(), 2);
    EXPECT_GT(e["ms"].get<double>(), 0.0);
    // 2 (D + Dv) flops per visible pair: 64 * 65 / 2 pairs x 8 heads x 256.
    EXPECT_NEAR(e["gflops"].get<double>() * e["ms"].get<double>() * 1e6, 2080.0 * 8 * 256, 1.0);
    EXPECT_GT(e["fraction_of_compute"].get<double>(), 0.0);
    // Measured in a child: small, never negative (S = 64 needs ~100 KiB of tiles).
    EXPECT_GE(e["peak_extra_mib"].get<double>(), 0.0);
    EXPECT_LT(e["peak_extra_mib"].get<double>(), 64.0);
    EXPECT_TRUE(e["torch_ms"].is_null());  // --no-torch
    EXPECT_TRUE(e["torch_peak_mib"].is_null());
    const std::string dtype = e["dtype"].get<std::string>();
    if (dtype == "float32") {
      EXPECT_GT(e["reference_ms"].get<double>(), 0.0);
      EXPECT_LT(e["reference_max_abs_err"].get<double>(), 1e-4) << e.dump();
    } else {
      EXPECT_EQ(dtype, "bfloat16");
      EXPECT_TRUE(e["reference_ms"].is_null());
    }
    seen.insert(e["scheme"].get<std::string>() + "/" + dtype);
  }
  EXPECT_EQ(seen.size(), 8u);  // alibi, t5, rope, none x float32, bfloat16
  EXPECT_EQ(backward, 8);      // the same, forward + backward
  EXPECT_EQ(decode, 4);        // none, alibi, rope, t5
  EXPECT_EQ(decode_c, 3);      // none, alibi, rope through posenc/c.h
}

TEST(BenchAttentionCli, BackwardOnlyWithAttention) {
  const auto r = RunCli("bench rope --backward --max-seq 8 --no-torch");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--backward"), std::string::npos) << r.err;
}

TEST(BenchAttentionCli, TextTable) {
  const auto r = RunCli("bench attention --threads 1 --max-seq 16 --reps 1 --warmup 0 --no-torch");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("extra MiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("alibi"), std::string::npos);
  EXPECT_NE(r.out.find("bfloat16"), std::string::npos);
}

TEST(BenchAttentionCli, AllDoesNotRunAttention) {
  const auto r = RunCli("bench all --threads 1 --json --max-seq 8 --reps 1 --warmup 0 --no-torch");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j.at("results").empty());
  for (const auto& e : j.at("results")) EXPECT_NE(e["kernel"], "attention");
}

TEST(BenchAttentionCli, MissingTorchScriptIsIoError) {
  const auto r =
      RunCli("bench attention --max-seq 8 --reps 1 --warmup 0 --torch-script /nonexistent/x.py");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("--torch-script"), std::string::npos) << r.err;
}

TEST(BenchAttentionCli, BadMaxSeq) {
  const auto r = RunCli("bench attention --max-seq 0 --no-torch");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--max-seq: got 0"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace posenc::test
