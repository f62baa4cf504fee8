// `posenc table sinusoidal`: the fixed sinusoidal table of Vaswani et al.
// (posenc/sinusoidal.h) for a range or list of positions, as JSON, CSV or
// .npy (cli/table_writer.h).
#include <memory>
#include <string>

#include "commands.h"
#include "posenc/sinusoidal.h"
#include "table_writer.h"

namespace posenc::cli {
namespace {

struct SinusoidalArgs {
  PositionOptions positions;
  std::int64_t dim = 0;
  double base = 10000.0;
  std::string layout = "interleaved";
  std::string format = "json";
  std::string output;
  TableBudget budget;
};

void RunTableSinusoidal(const SinusoidalArgs& args) {
  const TableFormat format = ParseTableFormat(args.format);
  SinusoidalParams params;
  params.dim = args.dim;
  params.base = args.base;
  params.layout = ParseSinusoidalLayout(args.layout, "--layout");
  ValidateSinusoidalParams(params);
  TableData table;
  table.positions = ResolvePositions(args.positions, params.dim, args.budget);
  table.rows = static_cast<std::int64_t>(table.positions.size());
  table.cols = params.dim;
  table.values.resize(static_cast<std::size_t>(table.rows * table.cols));
  const TensorView out =
      TensorView::Contiguous(table.values.data(), DType::kFloat32, {table.rows, table.cols});
  if (args.positions.position_ids.empty()) {
    SinusoidalTable(params, args.positions.offset, table.rows, out);
  } else {
    SinusoidalTableAt(params, table.positions.data(), table.rows, out);
  }
  WriteTable(table, format, args.output);
}

}  // namespace

void RegisterTableSinusoidalCommand(CLI::App& table, const TableBudget& budget) {
  auto args = std::make_shared<SinusoidalArgs>();
  args->budget = budget;
  CLI::App* sub = table.add_subcommand(
      "sinusoidal",
      "Fixed sinusoidal table PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(...) "
      "(Vaswani et al. 2017), float32");
  AddPositionOptions(*sub, args->positions);
  sub->add_option("--dim", args->dim, "Model dimension d (>= 1)")->required();
  sub->add_option("--base", args->base, "Frequency base (finite, > 1)")->capture_default_str();
  sub->add_option("--layout", args->layout,
                  "interleaved (sin, cos, ...: the paper, HF DistilBERT), split ([sin | cos]: "
                  "GPT-J), split_t2t ([sin | cos], frequencies base^(-i/(d/2-1)): tensor2tensor, "
                  "gemma.cpp)")
      ->capture_default_str();
  sub->add_option("--format", args->format, "json, csv or npy")->capture_default_str();
  sub->add_option("-o,--output", args->output, "Output file (default: stdout)");
  sub->footer(kTableFormatsHelp);
  sub->callback([args] { RunTableSinusoidal(*args); });
}

}  // namespace posenc::cli
