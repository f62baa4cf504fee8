// `posenc choose`: which positional encoding for this model, answered from
// posenc's own measurements (posenc/choose.h has the rules; the evidence is
// docs/evidence/choose.json, written by scripts/make_evidence.py). Prints the
// ranked candidates with every reason and its evidence, or --json.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "choose_text.h"
#include "commands.h"
#include "output.h"
#include "posenc/choose.h"
#include "posenc/error.h"

namespace posenc::cli {
namespace {

struct ChooseArgs {
  std::string architecture, finetune = "none", from, evidence, output;
  std::int64_t train_length = 0, target_length = 0;
  std::vector<std::string> engines;
  bool json = false;
  CLI::Option* train_opt = nullptr;
  CLI::Option* target_opt = nullptr;
};

void RunChoose(const ChooseArgs& a) {
  ChooseRequest r;
  if (!a.architecture.empty())
    r.architecture = ParseModelArchitecture(a.architecture, "--architecture");
  if (a.train_opt->count() > 0) {
    Require(a.train_length > 0, "--train-length", a.train_length, "a positive integer");
    r.train_length = a.train_length;
  }
  if (a.target_opt->count() > 0) {
    Require(a.target_length > 0, "--target-length", a.target_length, "a positive integer");
    r.target_length = a.target_length;
  }
  r.finetune = ParseFinetuneBudget(a.finetune, "--finetune");
  for (const std::string& e : a.engines) r.engines.push_back(ParseInferenceEngine(e, "--engine"));
  r.from = a.from;
  const std::string evidence = a.evidence.empty() ? DefaultEvidencePath() : a.evidence;
  const nlohmann::json answer = nlohmann::json::parse(ChooseEncodingJson(r, evidence));
  Output out(a.output);
  std::ostream& os = out.stream();
  if (a.json) {
    os << answer.dump(2) << '\n';
  } else {
    os << "posenc choose: " << ChooseConstraintsLine(answer) << '\n';
    for (const auto& d : answer["constraints"]["defaults"]) {
      os << "  (" << d.get<std::string>() << ")\n";
    }
    for (const std::string& line : ChooseLines(answer, true)) os << line << '\n';
    os << "evidence:";
    for (const auto& f : answer["evidence"]["files"]) os << ' ' << f.get<std::string>();
    os << '\n';
  }
  out.Close();
}

}  // namespace

void RegisterChooseCommand(CLI::App& app) {
  auto a = std::make_shared<ChooseArgs>();
  CLI::App* sub = app.add_subcommand(
      "choose",
      "Which positional encoding for this model? Ranked candidates, each reason backed by "
      "posenc's measurements (docs/evidence/choose.json) or a cited source");
  sub->add_option("--architecture", a->architecture,
                  "decoder (default), encoder, encoder-decoder, vision or video");
  a->train_opt = sub->add_option("--train-length", a->train_length,
                                 "Length the model is (pre-)trained at (default: the --from "
                                 "model's original length, else 4096)");
  a->target_opt = sub->add_option("--target-length", a->target_length,
                                  "Length it must serve (default: the --from model's "
                                  "max_position_embeddings, else the train length)");
  sub->add_option("--finetune", a->finetune,
                  "Training at the target length you can afford: none (default), short (up to "
                  "~1 % of the pre-training tokens) or full");
  sub->add_option("--from", a->from,
                  "An existing model's config.json or .gguf, to extend it: its scheme and "
                  "lengths are read from the file, and the answer gives the exact change");
  sub->add_option("--engine", a->engines,
                  "Where the model must run (repeatable): transformers, vllm, llama.cpp, "
                  "flash-attention, sdpa");
  sub->add_flag("--json", a->json, "Print the answer as JSON");
  sub->add_option("--evidence", a->evidence,
                  "Evidence file (default: docs/evidence/choose.json, installed as "
                  "share/posenc/evidence/choose.json)");
  sub->add_option("-o,--output", a->output, "Output file (default: stdout)");
  sub->callback([a] { RunChoose(*a); });
}

}  // namespace posenc::cli
