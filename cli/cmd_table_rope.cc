// `posenc table rope`: RoPE cos/sin tables (posenc/rope.h RopeCosSin) in
// Hugging Face's layout, as JSON, CSV or a .npy file.
//
//   posenc table rope --dim 128 --positions 4096 [--offset K] [--theta 1e4]
//       [--rotary-dim D] [--pairing half_split|interleaved]
//       [--numerics accurate|hf] [--format json|csv|npy] [-o FILE]
//   posenc table rope --dim 64 --position-ids 0,5,9
//   posenc table rope --config CONFIG.json [--seq-len L] --position-ids ...
//       (the model's rotary forward: scaled frequencies, attention factor
//       folded in; seq_len defaults to max(position)+1 as in HF's forward)
//
// Columns [0, rotary_dim): cat(freqs, freqs) for half_split (HF
// LlamaRotaryEmbedding's emb), each frequency in two adjacent columns for
// interleaved (GPT-J's repeat_interleave). Values are float32 (text: Num).
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "output.h"
#include "posenc/context.h"
#include "posenc/error.h"
#include "posenc/model_config.h"
#include "posenc/npy.h"
#include "posenc/positions.h"
#include "posenc/rope.h"
#include "posenc/tensor.h"

namespace posenc::cli {
namespace {

struct RopeTableArgs {
  std::int64_t num_positions = 0;  // --positions N
  std::string position_ids;        // --position-ids LIST
  std::int64_t offset = 0;         // --offset K (with --positions)
  std::int64_t dim = 0;            // --dim (head_dim)
  double theta = 10000.0;
  std::int64_t rotary_dim = 0;  // 0: head_dim
  std::string pairing = "half_split";
  std::string numerics = "accurate";
  std::string format = "json";
  std::string output;
  std::string config;        // --config CONFIG.json (HF config: scaled rope)
  std::int64_t seq_len = 0;  // --seq-len L with --config (0: max(position)+1)
  // Which options were given (filled from CLI11's counts before running).
  bool has_positions = false, has_ids = false, has_offset = false;
  TableBudget budget;  // of the values written: rows x (cos and sin columns)
};

// Largest table (values per cos or sin table) the command builds: 2^26
// float32 values, 256 MiB each.
constexpr std::int64_t kMaxTableValues = std::int64_t{1} << 26;

// `arg`: the option that set the row count (--positions or --position-ids).
void RequireTableSize(const RopeTableArgs& a, const char* arg, std::int64_t n, std::int64_t cols) {
  Require(n <= kMaxTableValues / cols, arg, n,
          fmt::format("at most 2^26 values per table (rows * rotary_dim; rotary_dim = {})", cols));
  RequireWithinBudget(a.budget, arg, n, 2 * cols);
}

const char* RowsArg(const RopeTableArgs& a) { return a.has_ids ? "--position-ids" : "--positions"; }

// The positions of the rows; `cols` (rotary_dim) bounds the table size
// before anything is allocated.
std::vector<std::int64_t> ResolveRows(const RopeTableArgs& a, std::int64_t cols) {
  Require(a.has_positions || a.has_ids, "--positions", "(none)",
          "--positions N or --position-ids LIST");
  Require(!(a.has_positions && a.has_ids), "--position-ids", a.position_ids,
          "either --positions N or --position-ids LIST, not both");
  Require(!(a.has_ids && a.has_offset), "--offset", a.offset,
          "--offset only with --positions N (add it to the ids instead)");
  std::vector<std::int64_t> rows;
  if (a.has_ids) {
    rows = ParseIntList(a.position_ids, "--position-ids");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      RequireAt(rows[i] >= 0 && rows[i] <= kMaxPosition, "--position-ids",
                static_cast<std::int64_t>(i), rows[i], "a position in [0, 16777215]");
    }
    RequireTableSize(a, "--position-ids", static_cast<std::int64_t>(rows.size()), cols);
    return rows;
  }
  Require(a.num_positions >= 1 && a.num_positions <= kMaxPosition + 1, "--positions",
          a.num_positions, "a row count in [1, 2^24]");
  Require(a.offset >= 0 && a.offset <= kMaxPosition - (a.num_positions - 1), "--offset", a.offset,
          "an offset >= 0 with offset + N - 1 <= 16777215 (N = " + std::to_string(a.num_positions) +
              ")");
  RequireTableSize(a, "--positions", a.num_positions, cols);
  rows.resize(static_cast<std::size_t>(a.num_positions));
  for (std::int64_t r = 0; r < a.num_positions; ++r)
    rows[static_cast<std::size_t>(r)] = a.offset + r;
  return rows;
}

// Values are float32: every number printed is the float32 value written as
// the shortest double that reads back to it, so parsing as double and
// casting to float is exact.
std::string Num(float v) { return fmt::format("{}", static_cast<double>(v)); }

void AppendRow(std::string& line, const std::vector<float>& table, std::int64_t row,
               std::int64_t cols, const char* sep) {
  for (std::int64_t c = 0; c < cols; ++c) {
    if (c > 0) line += sep;
    line += Num(table[static_cast<std::size_t>(row * cols + c)]);
  }
}

void WriteJson(std::ostream& os, const std::vector<std::int64_t>& rows, std::int64_t cols,
               const std::vector<float>& cos, const std::vector<float>& sin) {
  std::string line = "{\"positions\": [";
  for (std::size_t r = 0; r < rows.size(); ++r) {
    line += (r ? ", " : "") + std::to_string(rows[r]);
  }
  os << line << "],";
  const std::int64_t n = static_cast<std::int64_t>(rows.size());
  for (const auto* part : {&cos, &sin}) {
    os << (part == &cos ? "\n \"cos\": [" : "\n \"sin\": [");
    for (std::int64_t r = 0; r < n; ++r) {
      line = r ? ",\n  [" : "\n  [";
      AppendRow(line, *part, r, cols, ", ");
      os << line << ']';
    }
    os << (part == &cos ? "\n ]," : "\n ]");
  }
  os << "\n}\n";
}

void WriteCsv(std::ostream& os, const std::vector<std::int64_t>& rows, std::int64_t cols,
              const std::vector<float>& cos, const std::vector<float>& sin) {
  std::string line = "position";
  for (const char* name : {"cos", "sin"}) {
    for (std::int64_t c = 0; c < cols; ++c) line += fmt::format(",{}_{}", name, c);
  }
  os << line << '\n';
  for (std::size_t r = 0; r < rows.size(); ++r) {
    line = std::to_string(rows[r]) + ",";
    AppendRow(line, cos, static_cast<std::int64_t>(r), cols, ",");
    line += ',';
    AppendRow(line, sin, static_cast<std::int64_t>(r), cols, ",");
    os << line << '\n';
  }
}

// --config: the model's rope for rows `rows` (seq_len: --seq-len or
// max(position)+1, what HF's forward sees).
RopeParams ConfigParams(const RopeTableArgs& a, const std::vector<std::int64_t>& rows) {
  Require(a.seq_len >= 0 && a.seq_len <= kMaxPosition + 1, "--seq-len", a.seq_len,
          "an integer in [0, 2^24] (0: max(position) + 1)");
  std::int64_t seq_len = a.seq_len;
  if (seq_len == 0) {
    for (std::int64_t r : rows) seq_len = std::max(seq_len, r + 1);
  }
  const ModelConfig cfg = LoadModelConfig(a.config);
  for (const std::string& w : cfg.warnings)
    std::cerr << "posenc: warning: " << cfg.source << ": " << w << '\n';
  return ModelRopeParams(cfg, "", seq_len, ParseRopeNumerics(a.numerics, "--numerics"));
}

void RunTableRope(const RopeTableArgs& a) {
  const TableFormat format = ParseTableFormat(a.format);
  RopeParams params;
  std::vector<std::int64_t> rows;
  if (!a.config.empty()) {
    Require(a.dim == 0 && a.rotary_dim == 0 && a.theta == 10000.0 && a.pairing == "half_split",
            "--config", a.config,
            "a config alone: --dim, --rotary-dim, --theta and --pairing come from it");
    // Rows first (bounded by the widest possible table), then the model's rope.
    rows = ResolveRows(a, 2);
    params = ConfigParams(a, rows);
    RequireTableSize(a, RowsArg(a), static_cast<std::int64_t>(rows.size()),
                     params.EffectiveRotaryDim());
  } else {
    Require(a.seq_len == 0, "--seq-len", a.seq_len, "--seq-len only with --config");
    Require(a.dim >= 2 && a.dim <= 65536, "--dim", a.dim,
            "a head dimension in [2, 65536] (or --config)");
    params.head_dim = a.dim;
    params.rotary_dim = a.rotary_dim;
    params.theta = a.theta;
    params.pairing = ParseRopePairing(a.pairing, "--pairing");
    params.numerics = ParseRopeNumerics(a.numerics, "--numerics");
  }
  ValidateRopeParams(params);
  const std::int64_t cols = params.EffectiveRotaryDim();
  if (a.config.empty()) rows = ResolveRows(a, cols);
  const std::int64_t n = static_cast<std::int64_t>(rows.size());

  // cos then sin: one [2, n, cols] buffer, which is also the .npy layout.
  std::vector<float> both(static_cast<std::size_t>(2 * n * cols));
  const TensorView cos_view = TensorView::Contiguous(both.data(), DType::kFloat32, {n, cols});
  const TensorView sin_view =
      TensorView::Contiguous(both.data() + n * cols, DType::kFloat32, {n, cols});
  RopeCosSin(params, Positions::Ids(rows.data(), n), n, cos_view, sin_view, Context(0));

  Output out(a.output, /*binary=*/format == TableFormat::kNpy);
  if (format == TableFormat::kNpy) {
    WriteNpy(out.stream(), TensorView::Contiguous(both.data(), DType::kFloat32, {2, n, cols}),
             a.output.empty() || a.output == "-" ? std::string("stdout") : a.output);
  } else {
    const std::vector<float> cos(both.begin(), both.begin() + n * cols);
    const std::vector<float> sin(both.begin() + n * cols, both.end());
    if (format == TableFormat::kJson) {
      WriteJson(out.stream(), rows, cols, cos, sin);
    } else {
      WriteCsv(out.stream(), rows, cols, cos, sin);
    }
  }
  out.Close();
}

}  // namespace

void RegisterTableRopeCommand(CLI::App& table, const TableBudget& budget) {
  auto args = std::make_shared<RopeTableArgs>();
  args->budget = budget;
  CLI::App* cmd = table.add_subcommand(
      "rope", "RoPE cos/sin tables in Hugging Face's layout (LlamaRotaryEmbedding / GPT-J)");
  CLI::Option* n = cmd->add_option("--positions", args->num_positions,
                                   "Number of rows: positions OFFSET .. OFFSET+N-1");
  CLI::Option* ids = cmd->add_option(
      "--position-ids", args->position_ids,
      "Explicit positions: \"0,5,9\" or a half-open range \"3:7\" (instead of --positions)");
  CLI::Option* off = cmd->add_option(
      "--offset", args->offset, "First position with --positions (KV-cache offset; default 0)");
  cmd->add_option("--dim", args->dim, "Head dimension (head_dim); required unless --config");
  cmd->add_option(
      "--config", args->config,
      "HF config.json: the model's rope (scaling, attention factor) instead of --dim/--theta");
  cmd->add_option("--seq-len", args->seq_len,
                  "With --config: sequence length the dynamic/longrope schemes see "
                  "(default: max position + 1, as HF's forward)");
  cmd->add_option("--theta", args->theta, "RoPE base theta (default 10000)");
  cmd->add_option("--rotary-dim", args->rotary_dim,
                  "Rotated dims, even, <= --dim (default: all; GPT-NeoX partial rotary)");
  cmd->add_option("--pairing", args->pairing,
                  "half_split (NeoX/Llama rotate_half, default) or interleaved (GPT-J)");
  cmd->add_option("--numerics", args->numerics,
                  "accurate (float64 angles, default) or hf (HF transformers' float32 recipe)");
  cmd->add_option("--format", args->format, "json (default), csv or npy");
  cmd->add_option("-o,--output", args->output, "Output file (default: stdout)");
  cmd->footer(
      "Output: rows are positions, columns [0, rotary_dim) in HF's layout: cat(freqs, freqs)\n"
      "for half_split, each frequency in two adjacent columns for interleaved.\n"
      "  json  {\"positions\": [...], \"cos\": [[...], ...], \"sin\": [[...], ...]}\n"
      "  csv   header position,cos_0..cos_{d-1},sin_0..sin_{d-1}; one line per position\n"
      "  npy   float32 array [2, n, rotary_dim]: cos then sin (binary; use -o FILE)\n"
      "Numbers are float32 values printed as the shortest double that reads back exactly.");
  cmd->callback([args, n, ids, off] {
    args->has_positions = n->count() > 0;
    args->has_ids = ids->count() > 0;
    args->has_offset = off->count() > 0;
    RunTableRope(*args);
  });
}

}  // namespace posenc::cli
