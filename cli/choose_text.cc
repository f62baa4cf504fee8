#include "choose_text.h"

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "report/html.h"

namespace posenc::cli {

using nlohmann::json;

std::string DefaultEvidencePath() { return report::EvidencePath(); }

std::string ChooseConstraintsLine(const json& a) {
  const json& c = a["constraints"];
  std::string engines;
  for (const auto& e : c["engines"])
    engines += (engines.empty() ? "" : ", ") + e.get<std::string>();
  std::string line = fmt::format(
      "{}, trained at {}, used at {} ({:.3g}x), fine-tuning at the target length: {}, engines: {}",
      c["architecture"].get<std::string>(), c["train_length"].get<long long>(),
      c["target_length"].get<long long>(), c["target_over_train"].get<double>(),
      c["finetune"].get<std::string>(), engines.empty() ? "any" : engines);
  if (c.contains("model")) {
    line += fmt::format("; model: {} ({}, rope type {})", c["from"].get<std::string>(),
                        c["model"]["scheme"].get<std::string>(),
                        c["model"]["rope_type"].get<std::string>());
  }
  return line;
}

namespace {

std::string EvidenceText(const json& e) {
  if (e.is_string()) return e.get<std::string>();
  if (e.contains("citation")) return e["citation"].get<std::string>();
  std::string value = e.contains("value") ? e["value"].dump() : "";
  if (value.size() > 80) value = value.substr(0, 77) + "...";
  return fmt::format("{}: {} = {}", e.value("source", std::string()),
                     e.value("field", std::string()), value);
}

}  // namespace

std::vector<std::string> ChooseLines(const json& a, bool reasons) {
  std::vector<std::string> out;
  int i = 1;
  for (const json& c : a["candidates"]) {
    std::string score;
    if (c.contains("score_bits_per_byte")) {
      score =
          fmt::format("  ({:.3f} bits/byte at {}L in the experiment)",
                      c["score_bits_per_byte"].get<double>(), c.value("score_length_multiple", 1));
    }
    out.push_back(fmt::format("{:>2}. {:<14} {}{}", i++, c["scheme"].get<std::string>(),
                              c["verdict"].get<std::string>(), score));
    if (!reasons) continue;
    for (const json& r : c["reasons"]) {
      out.push_back("      - " + r["text"].get<std::string>());
      out.push_back("        [" + EvidenceText(r["evidence"]) + "]");
    }
    if (c.contains("config")) {
      const json& cfg = c["config"];
      if (cfg.contains("merge_patch")) {
        out.push_back("      config.json change (JSON merge patch): " + cfg["merge_patch"].dump());
        if (cfg.contains("result")) out.push_back("      which gives: " + cfg["result"].dump());
      }
      if (cfg.contains("keys")) out.push_back("      GGUF keys: " + cfg["keys"].dump());
      if (cfg.contains("llama.cpp") && cfg["llama.cpp"].is_string()) {
        out.push_back("      llama.cpp options: " + cfg["llama.cpp"].get<std::string>());
      }
      if (cfg.contains("note")) out.push_back("      note: " + cfg["note"].get<std::string>());
      if (cfg.contains("checked")) {
        const json& k = cfg["checked"];
        out.push_back(fmt::format(
            "      checked by posenc's loader: rope type {}, factor {:.4g}, attention factor "
            "{:.4g}, max_position_embeddings {}, longest wavelength {:.0f}",
            k["rope_type"].get<std::string>(), k["factor"].get<double>(),
            k["attention_factor"].get<double>(), k["max_position_embeddings"].get<long long>(),
            k["longest_wavelength"].get<double>()));
        for (const json& p : k["pairs"]) {
          out.push_back(fmt::format("        pair {:>3}: wavelength {} -> {} ({})",
                                    p["pair"].get<long long>(), p["wavelength_before"].dump(),
                                    p["wavelength_after"].dump(), p["region"].get<std::string>()));
        }
      }
    }
  }
  return out;
}

}  // namespace posenc::cli
