// `posenc demo permutation [--json] [--first S] [--second S] [--start-token T]`:
// the permutation demonstration (include/posenc/demo.h). Text output is a
// table "scheme | pooled difference | order-aware"; --json prints
// {"schemes": {"none": {"pooled_difference": x, "max_token_difference": y,
// "order_aware": false}, ...}} in the order of PermutationDemoSchemes().
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "posenc/demo.h"

namespace posenc::cli {
namespace {

struct DemoArgs {
  PermutationDemoParams params;
  bool json = false;
};

void RunPermutation(const DemoArgs& a) {
  const auto results = RunPermutationDemo(a.params);
  if (a.json) {
    nlohmann::ordered_json schemes = nlohmann::ordered_json::object();
    for (const auto& r : results) {
      schemes[r.scheme] = {{"pooled_difference", r.pooled_difference},
                           {"max_token_difference", r.max_token_difference},
                           {"order_aware", r.order_aware}};
    }
    nlohmann::ordered_json j;
    j["first"] = a.params.first;
    j["second"] = a.params.second;
    j["schemes"] = std::move(schemes);
    // Invalid UTF-8 in --first / --second becomes U+FFFD instead of an exception.
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    return;
  }
  std::cout << fmt::format(
      "# \"{}\" vs \"{}\": one bidirectional attention layer, d = {}, {} heads\n", a.params.first,
      a.params.second, a.params.model_dim, a.params.heads);
  std::cout << fmt::format("{:<16} | {:>18} | {}\n", "scheme", "pooled difference", "order-aware");
  std::cout << fmt::format("{:-<16}-+-{:->18}-+-{:-<11}\n", "", "", "");
  for (const auto& r : results) {
    std::cout << fmt::format("{:<16} | {:>18.6e} | {}\n", r.scheme, r.pooled_difference,
                             r.order_aware ? "yes" : "no");
  }
}

}  // namespace

void RegisterDemoCommand(CLI::App& app) {
  CLI::App* demo = app.add_subcommand("demo", "Demonstrations of why positions matter");
  demo->require_subcommand(1);
  auto a = std::make_shared<DemoArgs>();
  CLI::App* perm = demo->add_subcommand(
      "permutation",
      "Attention without positions cannot tell \"dog bites man\" from \"man bites dog\"");
  perm->add_option("--first", a->params.first, "First sentence")->capture_default_str();
  perm->add_option("--second", a->params.second, "Second sentence (a permutation of the first)")
      ->capture_default_str();
  perm->add_option("--start-token", a->params.start_token,
                   "Token prepended to both sentences (\"\" for none)")
      ->capture_default_str();
  perm->add_flag("--json", a->json, R"(Print {"schemes": {"none": {...}, ...}} as JSON)");
  perm->callback([a] { RunPermutation(*a); });
}

}  // namespace posenc::cli
