#include "app.h"

#include <exception>
#include <iostream>
#include <new>
#include <optional>

#include "commands.h"
#include "posenc/error.h"
#include "posenc/version.h"

namespace posenc::cli {
namespace {

// Points std::cout / std::cerr at other buffers for its lifetime.
class StreamSwap {
 public:
  StreamSwap(std::ostream& out, std::ostream& err)
      : old_out_(std::cout.rdbuf(out.rdbuf())), old_err_(std::cerr.rdbuf(err.rdbuf())) {}
  ~StreamSwap() {
    std::cout.rdbuf(old_out_);
    std::cerr.rdbuf(old_err_);
  }
  StreamSwap(const StreamSwap&) = delete;
  StreamSwap& operator=(const StreamSwap&) = delete;

 private:
  std::streambuf* old_out_;
  std::streambuf* old_err_;
};

void BuildApp(CLI::App& app) {
  app.require_subcommand(1);
  app.set_version_flag("--version", "posenc " POSENC_VERSION_STRING);
  // Subcommands, one Register* per file (cli/cmd_*.cc).
  // POSENC_CLI_REGISTER: keep this list sorted.
  RegisterAlibiCommand(app);
  RegisterBenchCommand(app);
  RegisterBucketsCommand(app);
  RegisterChooseCommand(app);
  RegisterDemoCommand(app);
  RegisterExperimentCommand(app);
  RegisterInspectCommand(app);
  RegisterPlaygroundCommand(app);
  RegisterPlotCommand(app);
  RegisterRelativeCommand(app);
  RegisterSchemesCommand(app);
  RegisterReportCommand(app);
  RegisterTableCommand(app);
  RegisterTourCommand(app);
}

}  // namespace

int RunPosenc(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  const bool swap = &out != &std::cout || &err != &std::cerr;
  std::optional<StreamSwap> swapped;
  if (swap) swapped.emplace(out, err);
  try {
    CLI::App app{"posenc: positional encodings for transformer models"};
    BuildApp(app);
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      return app.exit(e, std::cout, std::cerr);
    }
  } catch (const InvalidArgument& e) {
    std::cerr << "posenc: error: " << e.what() << '\n';
    return kExitInvalidArgument;
  } catch (const ConfigError& e) {
    std::cerr << "posenc: config error: " << e.what() << '\n';
    return kExitConfig;
  } catch (const IoError& e) {
    std::cerr << "posenc: I/O error: " << e.what() << '\n';
    return kExitIo;
  } catch (const std::bad_alloc&) {
    std::cerr << "posenc: error: out of memory (the request needs more memory than is "
                 "available; use smaller sizes)\n";
    return kExitInvalidArgument;
  } catch (const std::exception& e) {
    std::cerr << "posenc: internal error: " << e.what() << '\n';
    return kExitInternal;
  }
  return 0;
}

}  // namespace posenc::cli
