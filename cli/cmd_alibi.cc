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

// The bias matrices of heads [first, first + count), each length x length,
// row-major (no cells when length is 0, i.e. without --length).
struct BiasMatrices {
  std::vector<double> values;
  std::int64_t first = 0, count = 0, length = 0;

  double At(std::int64_t h, std::int64_t i, std::int64_t j) const {
    return values[static_cast<std::size_t>((h * length + i) * length + j)];
  }
};

// Checks --head: only with --length, and one of the --heads heads.
void ValidateHead(const AlibiArgs& a) {
  if (a.head) {
    Require(a.length.has_value(), "--head", *a.head, "to be used together with --length");
    Require(*a.head >= 0 && *a.head < a.heads, "--head", *a.head,
            fmt::format("a head in [0, {})", a.heads));
  }
}

// The bias that --length and --head ask for (every head, or --head alone);
// checks --length against the printed cell limit.
BiasMatrices ComputeBias(const AlibiArgs& a, const std::vector<double>& slopes, AlibiForm form) {
  BiasMatrices b;
  b.count = a.heads;
  if (a.length) {
    const std::int64_t L = *a.length;
    b.length = L;
    if (a.head) {
      b.first = *a.head;
      b.count = 1;
    }
    Require(L >= 1 && L <= 4096 && b.count * L * L <= kMaxCells, "--length", L,
            fmt::format("a length in [1, 4096] with heads*length^2 <= 2^22 ({} heads printed)",
                        b.count));
    b.values.resize(static_cast<std::size_t>(b.count * L * L));
    for (std::int64_t h = 0; h < b.count; ++h) {
      AlibiBiasTile(slopes, AlibiGeometry{L, L, form}, AlibiTile{b.first + h, 0, L, 0, L},
                    TensorView::Contiguous(b.values.data() + h * L * L, DType::kFloat64, {L, L}));
    }
  }
  return b;
}

// Prints the slopes and, with --length, the bias ([heads][L][L], or [L][L]
// with --head; masked cells as null) as one JSON line.
void PrintAlibiJson(const AlibiArgs& a, const AlibiParams& params,
                    const std::vector<double>& slopes, AlibiForm form, const BiasMatrices& b) {
  nlohmann::json j;
  j["num_heads"] = a.heads;
  j["max_bias"] = a.max_bias;
  j["convention"] = AlibiSlopeConventionName(params.convention);
  j["slopes"] = slopes;
  if (a.length) {
    j["form"] = AlibiFormName(form);
    j["length"] = b.length;
    nlohmann::json heads = nlohmann::json::array();
    for (std::int64_t h = 0; h < b.count; ++h) {
      nlohmann::json rows = nlohmann::json::array();
      for (std::int64_t i = 0; i < b.length; ++i) {
        nlohmann::json row = nlohmann::json::array();
        for (std::int64_t c = 0; c < b.length; ++c) {
          const double x = b.At(h, i, c);
          row.push_back(std::isinf(x) ? nlohmann::json(nullptr) : nlohmann::json(x));
        }
        rows.push_back(std::move(row));
      }
      heads.push_back(std::move(rows));
    }
    j["bias"] = a.head ? heads[0] : heads;
  }
  std::cout << j.dump() << '\n';
}

// Prints the slope table, then one matrix per head of `b` ("-inf" for masked cells).
void PrintAlibiText(const AlibiArgs& a, const AlibiParams& params,
                    const std::vector<double>& slopes, AlibiForm form, const BiasMatrices& b) {
  std::cout << fmt::format("# alibi heads={} max_bias={} convention={}\n", a.heads, a.max_bias,
                           AlibiSlopeConventionName(params.convention));
  std::cout << fmt::format("{:>6}  {:>24}\n", "head", "slope");
  for (std::int64_t h = 0; h < a.heads; ++h) {
    std::cout << fmt::format("{:>6}  {:>24}\n", h, slopes[static_cast<std::size_t>(h)]);
  }
  for (std::int64_t h = 0; h < b.count; ++h) {
    std::cout << fmt::format("\n# bias head {} ({}, slope {}): row = query i, column = key j\n",
                             b.first + h, AlibiFormName(form),
                             slopes[static_cast<std::size_t>(b.first + h)]);
    for (std::int64_t i = 0; i < b.length; ++i) {
      for (std::int64_t c = 0; c < b.length; ++c) {
        const double x = b.At(h, i, c);
        std::cout << fmt::format("{:>12}",
                                 std::isinf(x) ? std::string("-inf") : fmt::format("{:.6g}", x));
      }
      std::cout << '\n';
    }
  }
}

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
  ValidateHead(a);
  const AlibiForm form = a.symmetric ? AlibiForm::kSymmetric : AlibiForm::kCausal;
  const BiasMatrices bias = ComputeBias(a, slopes, form);
  if (a.json) {
    PrintAlibiJson(a, params, slopes, form, bias);
    return;
  }
  PrintAlibiText(a, params, slopes, form, bias);
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
