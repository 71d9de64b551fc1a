// tpuemu: the command-line client of the TPU pod emulator.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/bench_commands.h"
#include "client/client_security.h"
#include "client/cluster_commands.h"
#include "client/credentials_command.h"
#include "client/fault_command.h"
#include "client/plan_command.h"
#include "client/simulate_command.h"
#include "client/job_commands.h"
#include "client/health_command.h"
#include "client/interrupt.h"
#include "client/matmul_command.h"
#include "client/plots.h"
#include "client/reference_command.h"
#include "grpcpp/grpcpp.h"
#include "spdlog/spdlog.h"

namespace {

// The command words when one names no command, or when a command that
// takes commands is given none: CLI11 would only say that a command is
// required. Options are stepped over, with the value of one that takes a
// value (--coordinator ADDRESS); --help and --version anywhere are CLI11's.
std::optional<std::string> UnknownCommand(const CLI::App& app, int argc, char** argv) {
  const CLI::App* level = &app;
  std::string path = "tpuemu";
  auto names_under = [](const CLI::App* at) {
    std::vector<std::string> names;
    for (const CLI::App* command : at->get_subcommands([](const CLI::App*) { return true; })) {
      names.push_back(command->get_name());
    }
    return names;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help" || arg == "--version") return std::nullopt;
    if (!arg.empty() && arg[0] == '-') {
      const CLI::Option* option = level->get_option_no_throw(arg);
      if (option == nullptr) option = app.get_option_no_throw(arg);
      if (option != nullptr && option->get_expected_min() > 0) ++i;
      continue;
    }
    if (arg.empty()) continue;
    const std::vector<std::string> names = names_under(level);
    if (names.empty()) return std::nullopt;  // the command's own arguments
    const CLI::App* next = nullptr;
    for (const CLI::App* command : level->get_subcommands([](const CLI::App*) { return true; })) {
      if (command->check_name(arg)) next = command;
    }
    if (next == nullptr) {
      return absl::StrCat("error: unknown command '", arg, "'", level == &app ? "" : absl::StrCat(" for ", path),
                          "; the commands are: ", absl::StrJoin(names, ", "), " (", path, " --help)");
    }
    level = next;
    absl::StrAppend(&path, " ", next->get_name());
  }
  if (level->get_require_subcommand_min() > 0) {
    return absl::StrCat("error: ", path, " needs a command: ", absl::StrJoin(names_under(level), ", "), " (", path,
                        " --help)");
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  tpuemu::CatchInterrupts();  // first: before any thread starts
  CLI::App app{
      "tpuemu: emulate a TPU pod on ordinary CPUs, with real data between processes and a clock\n"
      "faithful to the TPU torus (ICI, wraparound, per-hop latency, DCN).\n\n"
      "Start here:\n"
      "  tpuemu cluster up --local --topology v5e:4x4      start a 16-chip pod (4 workers)\n"
      "  tpuemu bench collective --op all-gather --axes x --bytes 8MiB\n"
      "  tpuemu matmul \"A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]\" --dims I=1024,J=1024,K=1024\n"
      "  tpuemu cluster down\n\n"
      "A pod under docker compose or Kubernetes (docs/deploy.md), its credentials made by\n"
      "`tpuemu credentials create ./tpuemu-credentials --uid 10001`:\n"
      "  tpuemu --coordinator localhost:50051 --tls-ca tpuemu-credentials/ca.pem \\\n"
      "         --token-file tpuemu-credentials/admin.token submit examples/jobs/dp.yaml --wait\n\n"
      "Every command takes --help."};
  app.require_subcommand(1);
  // The options below go before or after the command (`tpuemu jobs
  // --verbose`): a command passes on those it does not take itself.
  app.fallthrough();
  app.set_version_flag("--version", absl::StrCat("tpuemu ", TPUEMU_VERSION, " (gRPC ", grpc::Version(), ")"));
  // `tpuemu --coordinator HOST:PORT submit ...`: one address for whichever
  // command follows (the commands read TPUEMU_COORDINATOR when not given one).
  app.add_option_function<std::string>(
         "--coordinator",
         [](const std::string& address) { setenv("TPUEMU_COORDINATOR", address.c_str(), 1); },
         "coordinator HOST:PORT for the command that follows (default: $TPUEMU_COORDINATOR, else\n"
         "the pod `cluster up` started), e.g. tpuemu --coordinator localhost:50051 jobs")
      ->trigger_on_parse();
  // The same for how to reach it (client/client_security.h, docs/security.md).
  app.add_option_function<std::string>(
         "--tls-ca",
         [](const std::string& path) {
           setenv("TPUEMU_TLS_CA", path.c_str(), 1);
           tpuemu::NoteSecurityFlag("TPUEMU_TLS_CA", "--tls-ca");
         },
         "the pod's ca.pem, to check the coordinator against (default: $TPUEMU_TLS_CA, else the\n"
         "local pod's)")
      ->trigger_on_parse();
  app.add_option_function<std::string>(
         "--token-file",
         [](const std::string& path) {
           setenv("TPUEMU_TOKEN_FILE", path.c_str(), 1);
           unsetenv("TPUEMU_TOKEN");  // the flag wins over the variable it defaults to
           tpuemu::NoteSecurityFlag("TPUEMU_TOKEN_FILE", "--token-file");
         },
         "the token to present, admin.token or read.token (default: $TPUEMU_TOKEN, else\n"
         "$TPUEMU_TOKEN_FILE, else the local pod's admin token)")
      ->trigger_on_parse();
  app.add_flag_callback(
         "--insecure", [] { setenv("TPUEMU_INSECURE", "1", 1); },
         "talk plaintext to a pod started with --insecure (default: $TPUEMU_INSECURE)")
      ->trigger_on_parse();
  // What the CLI computes itself (reference, plan --verify) logs what a
  // server's log wants, such as the BLIS kernels chosen: warnings only here.
  spdlog::set_level(spdlog::level::warn);
  app.add_flag_callback(
         "--verbose", [] { spdlog::set_level(spdlog::level::info); },
         "also log what the CLI's own computing does (the BLIS kernels it chose, ...) on stderr")
      ->trigger_on_parse();
  int exit_code = 0;
  tpuemu::AddClusterCommands(app, &exit_code);
  tpuemu::AddBenchCommands(app, &exit_code);
  tpuemu::AddPlotCommand(app, &exit_code);
  tpuemu::AddMatmulCommand(app, &exit_code);
  tpuemu::AddReferenceCommand(app, &exit_code);
  tpuemu::AddJobCommands(app, &exit_code);
  tpuemu::AddHealthCommand(app, &exit_code);
  tpuemu::AddCredentialsCommand(app, &exit_code);
  tpuemu::AddFaultCommand(app, &exit_code);
  tpuemu::AddPlanCommand(app, &exit_code);
  tpuemu::AddSimulateCommand(app, &exit_code);
  if (auto unknown = UnknownCommand(app, argc, argv)) {
    std::fprintf(stderr, "%s\n", unknown->c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help prints and exits 0; every usage error exits 2, as every other bad
    // input does (CLI11's own codes, 104-109, would tell a script nothing).
    return app.exit(e) == 0 ? 0 : 2;
  }
  tpuemu::AwaitInterruptExit();  // the exit code of an interrupt being handled is 128 + its signal
  return exit_code;
}
