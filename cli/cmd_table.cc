// `posenc table METHOD [options]`: writes an encoding table as JSON, CSV or
// .npy. Each METHOD lives in its own file (cmd_table_<method>.cc).
#include "commands.h"

namespace posenc::cli {

void RegisterTableCommand(CLI::App& app, const TableBudget& budget) {
  CLI::App* table =
      app.add_subcommand("table", "Write a positional-encoding table (JSON, CSV or .npy)");
  table->require_subcommand(1);
  // POSENC_TABLE_REGISTER: one Register*(*table) call per method.
  RegisterTableLearnedCommand(*table, budget);
  RegisterTableRopeCommand(*table, budget);
  RegisterTableSinusoidalCommand(*table, budget);
}

}  // namespace posenc::cli
