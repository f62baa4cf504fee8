// The reader of `posenc experiment extrapolation` results (cli/report/
// experiment.h) and the report section drawn from them: values read back
// exactly, ratios, the comparison-table cell, error rows kept as messages
// (never points), every figure's records and token counts, and malformed
// files as IoErrors naming the key.
#include <filesystem>
#include <fstream>
#include <string>
#include <variant>

#include <gtest/gtest.h>

#include "experiment.h"
#include "posenc/error.h"
#include "sections.h"
#include "test_util.h"

namespace posenc::report {
namespace {

namespace fs = std::filesystem;

// A results.json as the experiment writes it: two trained schemes (learned
// with error rows past L) and one extension row, L = 16.
const char* kResults = R"({
 "config": {"experiment": "extrapolation", "quick": false, "complete": true,
  "corpus": {"source": "brown", "description": "Brown corpus",
             "train": {"documents": 400, "bytes": 4770976},
             "validation": {"documents": 50, "bytes": 595611},
             "test": {"documents": 50, "bytes": 599587}},
  "model": {"dim": 32, "heads": 2, "layers": 1},
  "train_length": 16, "eval_lengths": [16, 32, 64], "steps": 40, "batch": 8, "dtype": "bfloat16",
  "seed": 0, "threads": 2, "eval_tokens": 256, "seconds": 12.5, "date": "2026-12-01 17:00 UTC",
  "load_average": {"before": 1.5, "after": 2.5}, "machine": {"cpu": "TestCPU"},
  "speed": [{"attention": "posenc", "dtype": "bfloat16", "tokens_per_s": 1000.0}]},
 "schemes": {
  "rope": {"trained_as": "rope", "params": 20672, "train_tokens_per_s": 5000.5,
   "eval": [{"length": 16, "bits_per_byte": 2.5, "tokens": 256},
            {"length": 32, "bits_per_byte": 2.75, "tokens": 256},
            {"length": 64, "bits_per_byte": 3.0, "tokens": 256}],
   "loss_by_position": [{"start": 0, "end": 32, "bits_per_byte": 3.5, "tokens": 128},
                        {"start": 32, "end": 64, "bits_per_byte": 2.5, "tokens": 128}],
   "loss_by_position_length": 64,
   "curve": [{"step": 0, "tokens": 0, "train_bits_per_byte": null, "val_bits_per_byte": 8.0,
              "val_tokens": 256},
             {"step": 40, "tokens": 5120, "train_bits_per_byte": 2.6, "val_bits_per_byte": 2.55,
              "val_tokens": 256}],
   "val_drop_last_quarter": 0.01},
  "learned": {"trained_as": "learned", "params": 21184, "train_tokens_per_s": 4000.0,
   "eval": [{"length": 16, "bits_per_byte": 2.4, "tokens": 256},
            {"length": 32, "bits_per_byte": null, "tokens": 0, "error": "positions[16]: got 16"},
            {"length": 64, "bits_per_byte": null, "tokens": 0, "error": "positions[16]: got 16"}],
   "loss_by_position": [{"start": 0, "end": 16, "bits_per_byte": 2.4, "tokens": 256}],
   "loss_by_position_length": 16, "curve": []},
  "rope+pi": {"trained_as": "rope", "params": 20672, "train_tokens_per_s": 5000.5,
   "eval": [{"length": 16, "bits_per_byte": 2.5, "tokens": 256},
            {"length": 32, "bits_per_byte": 2.6, "tokens": 256},
            {"length": 64, "bits_per_byte": 2.4, "tokens": 256}],
   "loss_by_position": [], "loss_by_position_length": null}}})";

// kResults with the first `from` replaced by `to`.
std::string Edited(const std::string& from, const std::string& to) {
  const std::string text = kResults;
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.substr(0, at) + to + text.substr(at + from.size());
}

std::string WriteResults(const std::string& name, const std::string& text) {
  const std::string dir = posenc::test::TempDir(name);
  std::ofstream(fs::path(dir) / "results.json") << text;
  return dir;
}

template <typename T>
const T& BlockAs(const Section& s, const std::string& id) {
  for (const auto& b : s.blocks) {
    if (BlockId(b) == id) return std::get<T>(b);
  }
  throw std::runtime_error("no block " + id);
}

TEST(ReportExperiment, ReadsEveryValueInFileOrder) {
  const ExperimentResults r = LoadExperimentResults(WriteResults("exp_read", kResults));
  EXPECT_EQ(r.train_length, 16);
  EXPECT_EQ(r.eval_lengths, (std::vector<std::int64_t>{16, 32, 64}));
  EXPECT_EQ(r.steps, 40);
  EXPECT_EQ(r.eval_tokens, 256);
  EXPECT_FALSE(r.quick);
  ASSERT_EQ(r.splits.size(), 3u);
  EXPECT_EQ(r.splits[2].name, "test");
  EXPECT_EQ(r.splits[2].bytes, 599587);
  ASSERT_EQ(r.schemes.size(), 3u);
  EXPECT_EQ(r.schemes[0].name, "rope");  // the file's order, not sorted
  EXPECT_EQ(r.schemes[1].name, "learned");
  EXPECT_EQ(r.schemes[2].name, "rope+pi");
  const ExperimentScheme& learned = r.schemes[1];
  EXPECT_EQ(learned.At(16)->bits_per_byte, 2.4);
  EXPECT_FALSE(learned.At(32)->bits_per_byte.has_value());
  EXPECT_EQ(learned.At(32)->error, "positions[16]: got 16");
  EXPECT_DOUBLE_EQ(*r.schemes[0].Ratio(4, 16), 3.0 / 2.5);
  EXPECT_FALSE(learned.Ratio(4, 16).has_value());
  EXPECT_FALSE(r.schemes[0].Ratio(8, 16).has_value());  // 128 not evaluated
  EXPECT_FALSE(r.schemes[0].curve[0].train_bits_per_byte.has_value());
  EXPECT_DOUBLE_EQ(*r.schemes[0].val_drop_last_quarter, 0.01);
}

TEST(ReportExperiment, ComparisonCell) {
  const ExperimentResults r = LoadExperimentResults(WriteResults("exp_cell", kResults));
  EXPECT_EQ(RatioCell(&r, "rope", ""), "1.200 (2.500 -> 3.000 bits/byte, L = 16)");
  EXPECT_EQ(RatioCell(&r, "learned", ""),
            "no value past L (it errors there; message in section 9)");
  EXPECT_EQ(RatioCell(&r, "alibi", ""), "not in this run");
  EXPECT_EQ(RatioCell(&r, "deberta", "an encoder scheme"), "not trained: an encoder scheme");
  EXPECT_NE(RatioCell(nullptr, "rope", "").find("posenc experiment extrapolation"),
            std::string::npos);
}

TEST(ReportExperiment, SectionFiguresCarryTheirTokens) {
  ReportOptions options;
  options.experiment = std::make_shared<const ExperimentResults>(
      LoadExperimentResults(WriteResults("exp_section", kResults)));
  const Section s = ExperimentSection(options);
  EXPECT_EQ(s.title, "Train short, test long");
  const Chart& length = BlockAs<Chart>(s, "experiment_length");
  // 3 + 1 + 3 points: learned's two error rows are not drawn, but named in the caption.
  ASSERT_EQ(length.records.size(), 7u);
  for (const auto& rec : length.records) EXPECT_EQ(rec["tokens"].get<std::int64_t>(), 256);
  EXPECT_NE(length.caption.find("learned at 32 (and 1 more lengths)"), std::string::npos)
      << length.caption;
  // The message itself once, in the table.
  EXPECT_EQ(length.caption.find("positions[16]"), std::string::npos) << length.caption;
  const Chart& position = BlockAs<Chart>(s, "experiment_position");
  ASSERT_EQ(position.records.size(), 3u);
  EXPECT_EQ(position.records[0]["tokens"].get<std::int64_t>(), 128);
  const Chart& curve = BlockAs<Chart>(s, "experiment_training");
  ASSERT_EQ(curve.records.size(), 1u);  // step 0 is left out
  EXPECT_EQ(curve.records[0]["val_tokens"].get<std::int64_t>(), 256);
  const Table& table = BlockAs<Table>(s, "experiment_table");
  ASSERT_EQ(table.rows.size(), 3u);
  EXPECT_EQ(table.rows[0][4], "2.5000");
  EXPECT_EQ(table.rows[0][7], "1.200");
  EXPECT_EQ(table.rows[1][5].rfind("error: positions[16]", 0), 0u) << table.rows[1][5];
  EXPECT_EQ(table.rows[1][6], "error (as at 32)");
}

// kResults plus a fine-tuned row (rope+yarn+ft, T = 64) with its curve at T.
std::string WithFinetunedRow() {
  return Edited(R"("loss_by_position": [], "loss_by_position_length": null}}})",
                R"("loss_by_position": [], "loss_by_position_length": null},
  "rope+yarn+ft": {"trained_as": "rope", "params": 20672, "train_tokens_per_s": 4000.0,
   "eval": [{"length": 16, "bits_per_byte": 2.6, "tokens": 256},
            {"length": 32, "bits_per_byte": 2.55, "tokens": 256},
            {"length": 64, "bits_per_byte": 2.47, "tokens": 256}],
   "loss_by_position": [], "loss_by_position_length": 64, "curve_length": 64,
   "curve": [{"step": 0, "tokens": 0, "train_bits_per_byte": null, "val_bits_per_byte": 3.1,
              "val_tokens": 256},
             {"step": 8, "tokens": 1024, "train_bits_per_byte": 2.6, "val_bits_per_byte": 2.5,
              "val_tokens": 256}],
   "val_drop_last_quarter": 0.02,
   "finetune": {"length": 64, "steps": 8, "tokens": 1024, "fraction_of_pretraining": 0.2,
                "batch": 2, "lr": 0.001, "rope_type": "yarn", "factor": 4.0}}}})");
}

TEST(ReportExperiment, FinetunedRowsKeepTheirSettingsAndCurveAtT) {
  ReportOptions options;
  options.experiment = std::make_shared<const ExperimentResults>(
      LoadExperimentResults(WriteResults("exp_finetune", WithFinetunedRow())));
  const ExperimentResults& r = *options.experiment;
  const ExperimentScheme* ft = r.Find("rope+yarn+ft");
  ASSERT_NE(ft, nullptr);
  ASSERT_TRUE(ft->finetune.has_value());
  EXPECT_EQ(ft->finetune->length, 64);
  EXPECT_EQ(ft->finetune->tokens, 1024);
  EXPECT_EQ(ft->finetune->rope_type, "yarn");
  EXPECT_EQ(ft->curve_length, 64);
  EXPECT_FALSE(r.Find("rope")->finetune.has_value());
  EXPECT_EQ(FinetuneDescription(*ft->finetune),
            "T = 64, 8 steps of 2 windows, 1,024 tokens (20.0 % of pre-training), yarn x4, peak "
            "lr 0.001");
  EXPECT_EQ(FinetunedRatios(&r, "rope"),
            "; fine-tuned at T = 64: rope+yarn+ft 0.950 (2.470 at 4L)");
  EXPECT_EQ(FinetunedRatios(&r, "alibi"), "");

  const Section s = ExperimentSection(options);
  const Chart& curve = BlockAs<Chart>(s, "experiment_training");
  ASSERT_EQ(curve.records.size(), 1u);  // rope's; the fine-tuned curve is drawn at T
  const Chart& finetune = BlockAs<Chart>(s, "experiment_finetune");
  ASSERT_EQ(finetune.records.size(), 2u);  // step 0 included: the scaled model before tuning
  EXPECT_EQ(finetune.records[1]["length"].get<std::int64_t>(), 64);
  const Table& table = BlockAs<Table>(s, "experiment_table");
  ASSERT_EQ(table.rows.size(), 4u);
  EXPECT_EQ(table.header.back(), "fine-tuning");
  EXPECT_EQ(table.rows[3][0], "rope+yarn+ft");
  EXPECT_EQ(table.rows[3][8], "0.0200");  // its own last-quarter drop (of fine-tuning)
  EXPECT_EQ(table.rows[3][9].rfind("T = 64, 8 steps", 0), 0u) << table.rows[3][9];
  EXPECT_EQ(table.rows[0][9], "-");
}

TEST(ReportExperiment, WithoutFinetunedRowsThereIsNoFinetuneFigure) {
  ReportOptions options;
  options.experiment = std::make_shared<const ExperimentResults>(
      LoadExperimentResults(WriteResults("exp_no_finetune", kResults)));
  const Section s = ExperimentSection(options);
  for (const auto& b : s.blocks) EXPECT_NE(BlockId(b), "experiment_finetune");
  EXPECT_EQ(BlockAs<Table>(s, "experiment_table").header.size(), 9u);
}

TEST(ReportExperiment, QuickRunIsSaidSo) {
  const std::string quick = Edited("\"quick\": false", "\"quick\": true");
  ReportOptions options;
  options.experiment = std::make_shared<const ExperimentResults>(
      LoadExperimentResults(WriteResults("exp_quick", quick)));
  const Section s = ExperimentSection(options);
  bool said = false;
  for (const auto& p : s.paragraphs) said = said || p.find("QUICK smoke run") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_NE(RatioCell(options.experiment.get(), "rope", "").find("[quick run]"), std::string::npos);
}

TEST(ReportExperiment, WithoutResultsTheSectionSaysHowToProduceThem) {
  const Section s = ExperimentSection(ReportOptions{});
  EXPECT_TRUE(s.blocks.empty());
  ASSERT_EQ(s.paragraphs.size(), 2u);
  EXPECT_NE(s.paragraphs[1].find("posenc experiment extrapolation -o DIR"), std::string::npos);
}

TEST(ReportExperiment, MalformedFilesAreIoErrorsNamingTheKey) {
  EXPECT_THROW(LoadExperimentResults("/nonexistent/dir"), IoError);
  EXPECT_THROW(LoadExperimentResults(WriteResults("exp_bad_json", "{not json")), IoError);
  const std::string bad = Edited("\"params\": 21184", "\"params\": \"x\"");
  try {
    LoadExperimentResults(WriteResults("exp_bad_key", bad));
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'schemes.learned.params' is not an integer"),
              std::string::npos)
        << e.what();
  }
  const std::string no_error = Edited(", \"error\": \"positions[16]: got 16\"}", "}");
  EXPECT_THROW(LoadExperimentResults(WriteResults("exp_no_error", no_error)), IoError);
}

TEST(ReportExperiment, NewestDirectory) {
  EXPECT_FALSE(NewestExperimentDir({"/nonexistent/a", "/nonexistent/b"}).has_value());
  const std::string a = WriteResults("exp_newest_a", kResults);
  EXPECT_EQ(NewestExperimentDir({"/nonexistent/a", a}).value(), a);
}

}  // namespace
}  // namespace posenc::report
