// posenc: the command-line front end. Parses arguments (CLI11), calls the
// public API, and maps library errors to one line on stderr and an exit code
// (cli/commands.h). Never prints a stack trace.
#include <exception>
#include <iostream>

#include "commands.h"
#include "posenc/error.h"

int main(int argc, char** argv) {
  CLI::App app{"posenc: positional encodings for transformer models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "posenc 0.1.0");
  // Subcommands, one Register* per file (cli/cmd_*.cc).
  // POSENC_CLI_REGISTER: keep this list sorted.
  posenc::cli::RegisterAlibiCommand(app);
  posenc::cli::RegisterBenchCommand(app);
  posenc::cli::RegisterBucketsCommand(app);
  posenc::cli::RegisterDemoCommand(app);
  posenc::cli::RegisterInspectCommand(app);
  posenc::cli::RegisterPlotCommand(app);
  posenc::cli::RegisterRelativeCommand(app);
  posenc::cli::RegisterSchemesCommand(app);
  posenc::cli::RegisterReportCommand(app);
  posenc::cli::RegisterTableCommand(app);
  posenc::cli::RegisterTourCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const posenc::InvalidArgument& e) {
    std::cerr << "posenc: error: " << e.what() << '\n';
    return posenc::cli::kExitInvalidArgument;
  } catch (const posenc::ConfigError& e) {
    std::cerr << "posenc: config error: " << e.what() << '\n';
    return posenc::cli::kExitConfig;
  } catch (const posenc::IoError& e) {
    std::cerr << "posenc: I/O error: " << e.what() << '\n';
    return posenc::cli::kExitIo;
  } catch (const std::exception& e) {
    std::cerr << "posenc: internal error: " << e.what() << '\n';
    return posenc::cli::kExitInternal;
  }
  return 0;
}
