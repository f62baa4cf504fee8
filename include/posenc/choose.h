// posenc/choose.h: "which positional encoding for this model?", answered from
// posenc's own measurements. The evidence is one data file,
// docs/evidence/choose.json (installed as share/posenc/evidence/choose.json),
// written by scripts/make_evidence.py from the committed runs of `posenc
// experiment extrapolation` (bits/byte at L..16L), the benchmark
// bench/scheme_cost.py (attention time per scheme relative to none) and the
// engine x scheme support matrix with a source per cell. Nothing in this code
// names a winner: the ranking follows the evidence file, so a changed file
// changes the answer.
//
// Rules (each reason in the answer carries its evidence: {source, field,
// value} from a measurement file, or {citation}):
//  - decoder: candidates are the experiment's rows (trained schemes, the
//    training-free RoPE extensions and the fine-tuned ones). The target ratio
//    m = target / train picks the smallest measured multiple M >= m of the
//    train length (the longest, 16L, beyond it); a candidate's score is its
//    bits/byte at M x L in the default run (at L when m <= 1 or when the user
//    can train at the target length, --finetune full without --from).
//    Lower is better; candidates within kChooseTolerance of the best score are
//    "recommended", the others "possible". A finding is "stable" when the
//    order against the best candidate holds in every committed run that
//    measured both; otherwise the reason says the runs disagree.
//  - ruled out: a learned table when m > 1 (it has no rows past L: the
//    measured error); a fine-tuned row under --finetune none; a row whose
//    measurement failed; a scheme an engine in `engines` lacks ("no" in the
//    support matrix). "partial" or "unknown" support caps a candidate at
//    "possible"; so does a fine-tuned row measured with more than ~1 % of the
//    pre-training tokens under --finetune short.
//  - with `from`: only the rows that extend the model's own scheme (RoPE
//    models: rope, rope+pi, rope+ntk, rope+yarn and their +ft rows; ALiBi
//    models: alibi). Each RoPE candidate carries the exact change (a
//    config.json patch, or GGUF keys and llama.cpp options), loaded back by
//    posenc's config loader before it is shown, with a few pairs' wavelengths
//    before and after.
//  - encoder, encoder-decoder, vision, video: posenc has no measurement; the
//    candidates and their order come from the evidence file's literature list,
//    every reason "from the literature: <paper>" (or "not measured").
//
// JSON (ChooseEncodingJson): {"constraints": {...}, "candidates": [{"scheme",
// "verdict", "reasons": [{"text", "evidence": {...}}], "config"?}], "evidence":
// {"files": [...]}}, candidates best first.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace posenc {

enum class ModelArchitecture : std::uint8_t {
  kDecoder,
  kEncoder,
  kEncoderDecoder,
  kVision,
  kVideo
};
// How much training at the target length the user can afford: none, short
// (up to ~1 % of the pre-training tokens), full (train at the target length).
enum class FinetuneBudget : std::uint8_t { kNone, kShort, kFull };
enum class InferenceEngine : std::uint8_t {
  kTransformers,
  kVllm,
  kLlamaCpp,
  kFlashAttention,
  kSdpa
};

// "decoder", "encoder", "encoder-decoder", "vision", "video".
std::string_view ModelArchitectureName(ModelArchitecture a);
// "none", "short", "full".
std::string_view FinetuneBudgetName(FinetuneBudget f);
// "transformers", "vllm", "llama.cpp", "flash-attention", "sdpa".
std::string_view InferenceEngineName(InferenceEngine e);
// Each throws InvalidArgument naming `arg`, the value and the allowed names.
ModelArchitecture ParseModelArchitecture(std::string_view text,
                                         std::string_view arg = "architecture");
FinetuneBudget ParseFinetuneBudget(std::string_view text, std::string_view arg = "finetune");
InferenceEngine ParseInferenceEngine(std::string_view text, std::string_view arg = "engine");

// Candidates within this relative distance of the best measured score are
// all "recommended" (the measurement cannot tell them apart: the default
// run's bits/byte move by about this much between runs of the same model).
inline constexpr double kChooseTolerance = 0.02;
// A "short" fine-tuning budget: this fraction of the pre-training tokens.
inline constexpr double kShortFinetuneFraction = 0.01;
// Train length assumed when neither the request nor the --from file gives one.
inline constexpr std::int64_t kDefaultTrainLength = 4096;

struct ChooseRequest {
  std::optional<ModelArchitecture> architecture;  // default: decoder
  std::int64_t train_length = 0;   // 0: the `from` model's original length, else 4096
  std::int64_t target_length = 0;  // 0: the `from` model's max_position_embeddings, else train
  FinetuneBudget finetune = FinetuneBudget::kNone;
  std::string from;                      // an existing model's config.json or .gguf ("": none)
  std::vector<InferenceEngine> engines;  // where the model must run (empty: anywhere)
};

// The answer as JSON text (schema above). Throws InvalidArgument for a bad
// request (non-positive length), IoError for an unreadable `from` or a missing
// or malformed evidence file (naming its path), ConfigError for an invalid
// `from` config.
std::string ChooseEncodingJson(const ChooseRequest& request, const std::string& evidence_path);

}  // namespace posenc
