// `posenc schemes [NAME] [--json]`: the positional schemes of attention as
// the registry declares them (include/posenc/scheme.h) — name, terms,
// kernels, masks, paper, formula and every argument with its type, shape,
// trainability and default. Derived from the declarations: a scheme added
// to the registry appears here without touching this file.
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "posenc/scheme.h"

namespace posenc::cli {
namespace {

struct SchemesArgs {
  std::string name;
  bool json = false;
};

std::string Terms(const SchemeInfo& info) {
  std::string out;
  for (SchemeTerm t :
       {SchemeTerm::kRotation, SchemeTerm::kBias, SchemeTerm::kLogit, SchemeTerm::kValue}) {
    if (info.Has(t)) out += (out.empty() ? "" : "+") + std::string(SchemeTermName(t));
  }
  return out.empty() ? "none" : out;
}

nlohmann::json Json(const SchemeInfo& info) {
  nlohmann::json args = nlohmann::json::array();
  for (const SchemeArgDecl& a : info.args) {
    args.push_back({{"name", a.name},
                    {"type", SchemeArgTypeName(a.type)},
                    {"shape", a.shape},
                    {"trainable", a.grad == SchemeArgGrad::kTrainable},
                    {"required", a.presence == SchemeArgPresence::kRequired},
                    {"default", a.default_text},
                    {"doc", a.doc}});
  }
  return {{"name", info.name},
          {"title", info.title},
          {"paper", info.paper},
          {"formula", info.formula},
          {"terms", Terms(info)},
          {"fused", info.Fused()},
          {"causal_only", info.masks == SchemeMasks::kCausalOnly},
          {"args", args}};
}

void PrintText(const SchemeInfo& info) {
  std::cout << fmt::format(
      "{}: {}\n  {}\n  terms: {}; kernels: {}; masks: {}\n  paper: {}\n", info.name, info.title,
      info.formula, Terms(info),
      info.Fused() ? "reference, fused forward and backward" : "reference",
      info.masks == SchemeMasks::kCausalOnly ? "causal" : "causal, bidirectional", info.paper);
  for (const SchemeArgDecl& a : info.args) {
    std::cout << fmt::format("    {:<22} {:<8} {:<18} {}{}{}\n", a.name, SchemeArgTypeName(a.type),
                             a.shape, a.grad == SchemeArgGrad::kTrainable ? "trainable; " : "",
                             a.presence == SchemeArgPresence::kRequired ? std::string("required; ")
                             : a.default_text.empty()                   ? std::string()
                                                      : fmt::format("default {}; ", a.default_text),
                             a.doc);
  }
}

void RunSchemes(const SchemesArgs& a) {
  if (!a.name.empty()) {
    const SchemeInfo& info = FindScheme(a.name, "NAME");
    if (a.json) {
      std::cout << Json(info).dump(2) << '\n';
    } else {
      PrintText(info);
    }
    return;
  }
  if (a.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const SchemeInfo* info : RegisteredSchemes()) all.push_back(Json(*info));
    std::cout << all.dump(2) << '\n';
    return;
  }
  for (const SchemeInfo* info : RegisteredSchemes()) {
    std::cout << fmt::format("{:<16} {:<18} {:<10} {}\n", info->name, Terms(*info),
                             info->Fused() ? "fused" : "reference", info->title);
  }
}

}  // namespace

void RegisterSchemesCommand(CLI::App& app) {
  auto args = std::make_shared<SchemesArgs>();
  CLI::App* cmd = app.add_subcommand(
      "schemes", "List the positional schemes of attention (or describe one) from the registry");
  cmd->add_option("NAME", args->name, "A scheme to describe with its arguments");
  cmd->add_flag("--json", args->json, "Print the declarations as JSON");
  cmd->callback([args] { RunSchemes(*args); });
}

}  // namespace posenc::cli
