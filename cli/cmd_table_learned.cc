// `posenc table learned`: rows of a learned absolute position table (BERT,
// GPT-2; posenc/learned.h), either freshly initialised N(0, stddev^2) from a
// seed or loaded from a .npy file, as JSON, CSV or .npy (cli/table_writer.h).
// A position >= --max-positions is an error (exit 2): learned tables have no
// rows past their end and posenc neither wraps nor clamps.
#include <memory>
#include <string>

#include "commands.h"
#include "posenc/learned.h"
#include "table_writer.h"

namespace posenc::cli {
namespace {

struct LearnedArgs {
  PositionOptions positions;
  LearnedInitParams init{512, 768, 0.02, 0};
  std::string load;
  std::string format = "json";
  std::string output;
  TableBudget budget;
};

void RunTableLearned(const LearnedArgs& args) {
  const TableFormat format = ParseTableFormat(args.format);
  const LearnedTable learned =
      args.load.empty() ? LearnedTable::RandomNormal(args.init) : LearnedTable::LoadNpy(args.load);
  TableData table;
  table.positions = ResolvePositions(args.positions, learned.dim(), args.budget);
  table.rows = static_cast<std::int64_t>(table.positions.size());
  table.cols = learned.dim();
  table.values.resize(static_cast<std::size_t>(table.rows * table.cols));
  const Positions positions = args.positions.position_ids.empty()
                                  ? Positions::Offset(args.positions.offset)
                                  : Positions::Ids(table.positions.data(), table.rows);
  learned.Lookup(
      positions, table.rows,
      TensorView::Contiguous(table.values.data(), DType::kFloat32, {table.rows, table.cols}));
  WriteTable(table, format, args.output);
}

}  // namespace

void RegisterTableLearnedCommand(CLI::App& table, const TableBudget& budget) {
  auto args = std::make_shared<LearnedArgs>();
  args->budget = budget;
  CLI::App* sub = table.add_subcommand(
      "learned",
      "Rows of a learned absolute position table (BERT, GPT-2): initialised N(0, stddev^2) "
      "from --seed, or loaded with --load, float32");
  AddPositionOptions(*sub, args->positions);
  CLI::Option* max = sub->add_option("--max-positions", args->init.max_positions,
                                     "Rows of the table (BERT 512, GPT-2 1024); a position >= this "
                                     "is an error, never wrapped or clamped")
                         ->capture_default_str();
  CLI::Option* dim =
      sub->add_option("--dim", args->init.dim, "Columns (hidden size)")->capture_default_str();
  CLI::Option* seed = sub->add_option("--seed", args->init.seed,
                                      "Seed of the portable mt19937_64 + Box-Muller initialiser")
                          ->capture_default_str();
  CLI::Option* sd = sub->add_option("--stddev", args->init.stddev,
                                    "Standard deviation of the initialisation (HF "
                                    "initializer_range)")
                        ->capture_default_str();
  CLI::Option* load = sub->add_option("--load", args->load,
                                      "Read the table from a rank-2 float32/float64 .npy file "
                                      "(its shape gives --max-positions and --dim)");
  for (CLI::Option* o : {max, dim, seed, sd}) load->excludes(o);
  sub->add_option("--format", args->format, "json, csv or npy")->capture_default_str();
  sub->add_option("-o,--output", args->output, "Output file (default: stdout)");
  sub->footer(kTableFormatsHelp);
  sub->callback([args] { RunTableLearned(*args); });
}

}  // namespace posenc::cli
