// `posenc alibi --heads H [--max-bias B] [--convention C] [--length L]
//  [--causal|--symmetric] [--head h] [--json]`: the ALiBi slopes of H heads
// (include/posenc/alibi.h) and, with --length, the bias matrix of L queries
// by L keys. Text output: a slope table, then one matrix per head ("-inf"
// for masked cells). --json prints {"num_heads", "max_bias", "convention",
// "slopes": [...]} and with --length also "form", "length" and "bias":
// [heads][L][L] (or [L][L] with --head), masked cells as null.
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "posenc/alibi.h"
#include "posenc/error.h"

namespace posenc::cli {
namespace {

// At most this many bias cells are printed (heads * L * L).
constexpr std::int64_t kMaxCells = std::int64_t{1} << 22;

struct AlibiArgs {
  std::int64_t heads = 0;
  double max_bias = 8.0;
  std::string convention = "reference";
  std::optional<std::int64_t> length;
  bool causal = false;
  bool symmetric = false;
  std::optional<std::int64_t> head;
  bool json = false;
};

void RunAlibi(const AlibiArgs& a) {
  AlibiParams params;
  params.num_heads = a.heads;
  params.max_bias = a.max_bias;
  params.convention = ParseAlibiSlopeConvention(a.convention, "--convention");
  Require(a.heads >= 1 && a.heads <= kMaxAlibiHeads, "--heads", a.heads,
          "a head count in [1, 65536]");
  Require(std::isfinite(a.max_bias) && a.max_bias > 0, "--max-bias", a.max_bias,
          "a finite number > 0");
  const std::vector<double> slopes = AlibiSlopes(params);
  if (a.head) {
    Require(a.length.has_value(), "--head", *a.head, "to be used together with --length");
    Require(*a.head >= 0 && *a.head < a.heads, "--head", *a.head,
            fmt::format("a head in [0, {})", a.heads));
  }
  const AlibiForm form = a.symmetric ? AlibiForm::kSymmetric : AlibiForm::kCausal;
  std::vector<double> bias;
  std::int64_t first = 0, count = a.heads, L = 0;
  if (a.length) {
    L = *a.length;
    if (a.head) {
      first = *a.head;
      count = 1;
    }
    Require(
        L >= 1 && L <= 4096 && count * L * L <= kMaxCells, "--length", L,
        fmt::format("a length in [1, 4096] with heads*length^2 <= 2^22 ({} heads printed)", count));
    bias.resize(static_cast<std::size_t>(count * L * L));
    for (std::int64_t h = 0; h < count; ++h) {
      AlibiBiasTile(slopes, AlibiGeometry{L, L, form}, AlibiTile{first + h, 0, L, 0, L},
                    TensorView::Contiguous(bias.data() + h * L * L, DType::kFloat64, {L, L}));
    }
  }
  const auto cell = [&](std::int64_t h, std::int64_t i, std::int64_t j) {
    return bias[static_cast<std::size_t>((h * L + i) * L + j)];
  };
  if (a.json) {
    nlohmann::json j;
    j["num_heads"] = a.heads;
    j["max_bias"] = a.max_bias;
    j["convention"] = AlibiSlopeConventionName(params.convention);
    j["slopes"] = slopes;
    if (a.length) {
      j["form"] = AlibiFormName(form);
      j["length"] = L;
      nlohmann::json heads = nlohmann::json::array();
      for (std::int64_t h = 0; h < count; ++h) {
        nlohmann::json rows = nlohmann::json::array();
        for (std::int64_t i = 0; i < L; ++i) {
          nlohmann::json row = nlohmann::json::array();
          for (std::int64_t c = 0; c < L; ++c) {
            const double x = cell(h, i, c);
            row.push_back(std::isinf(x) ? nlohmann::json(nullptr) : nlohmann::json(x));
          }
          rows.push_back(std::move(row));
        }
        heads.push_back(std::move(rows));
      }
      j["bias"] = a.head ? heads[0] : heads;
    }
    std::cout << j.dump() << '\n';
    return;
  }
  std::cout << fmt::format("# alibi heads={} max_bias={} convention={}\n", a.heads, a.max_bias,
                           AlibiSlopeConventionName(params.convention));
  std::cout << fmt::format("{:>6}  {:>24}\n", "head", "slope");
  for (std::int64_t h = 0; h < a.heads; ++h) {
    std::cout << fmt::format("{:>6}  {:>24}\n", h, slopes[static_cast<std::size_t>(h)]);
  }
  for (std::int64_t h = 0; h < count; ++h) {
    std::cout << fmt::format("\n# bias head {} ({}, slope {}): row = query i, column = key j\n",
                             first + h, AlibiFormName(form),
                             slopes[static_cast<std::size_t>(first + h)]);
    for (std::int64_t i = 0; i < L; ++i) {
      for (std::int64_t c = 0; c < L; ++c) {
        const double x = cell(h, i, c);
        std::cout << fmt::format("{:>12}",
                                 std::isinf(x) ? std::string("-inf") : fmt::format("{:.6g}", x));
      }
      std::cout << '\n';
    }
  }
}

}  // namespace

void RegisterAlibiCommand(CLI::App& app) {
  auto a = std::make_shared<AlibiArgs>();
  CLI::App* cmd = app.add_subcommand(
      "alibi", "ALiBi slopes (Press et al. 2022) and, with --length, the bias matrix");
  cmd->add_option("--heads", a->heads, "Number of attention heads (1..65536)")->required();
  cmd->add_option("--max-bias", a->max_bias, "ggml max_bias (8 = the paper's slopes)")
      ->capture_default_str();
  cmd->add_option("--convention", a->convention,
                  "Slope convention: reference (exact float64) or bloom_float32 (HF Bloom)")
      ->capture_default_str();
  cmd->add_option("--length", a->length, "Print the bias of LENGTH queries x LENGTH keys");
  auto* causal = cmd->add_flag("--causal", a->causal,
                               "Causal form -slope*(i-j), future keys masked (default)");
  auto* symmetric =
      cmd->add_flag("--symmetric", a->symmetric, "Symmetric form -slope*|i-j| (encoders)");
  causal->excludes(symmetric);
  cmd->add_option("--head", a->head, "Print the bias of this head only (with --length)");
  cmd->add_flag("--json", a->json, R"(Print {"slopes": [...], "bias": [[...]]} as JSON)");
  cmd->callback([a] { RunAlibi(*a); });
}

}  // namespace posenc::cli
