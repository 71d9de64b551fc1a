// Parsing a server binary's flags, whose values may also come from their
// environment-variable twins (compose files and manifests set those), and
// limits the CLI checks before it starts those binaries.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/base/units.h"
#include "spdlog/spdlog.h"

namespace tpuemu {

// -1 when the command line (and environment) parsed; else the exit code:
// 0 for --help, 2 for anything refused, after naming the twins that are set,
// since the user may have written a variable rather than the flag CLI11 names.
inline int ParseFlagsAndEnv(CLI::App& app, int argc, char** argv, const std::vector<std::string>& env_twins) {
  try {
    app.parse(argc, argv);
    return -1;
  } catch (const CLI::ParseError& e) {
    if (app.exit(e) == 0) return 0;
    std::string set;
    for (const std::string& name : env_twins) {
      if (const char* v = std::getenv(name.c_str()); v != nullptr && *v != '\0') {
        set += (set.empty() ? "" : ", ") + name + "='" + v + "'";
      }
    }
    if (!set.empty()) spdlog::error("flags may come from these environment variables, set here: {}", set);
    return 2;
  }
}

// The longest a worker keeps a finished job's memory (`--keep-memory-for`).
inline constexpr absl::Duration kMaxKeepMemoryFor = absl::Hours(24);
// The longest a worker keeps a forgotten job's checkpoints (`--drop-checkpoints-after`).
inline constexpr absl::Duration kMaxDropCheckpointsAfter = absl::Hours(24 * 30);

// Whether `flag` is on the command line (as `--flag V` or `--flag=V`): what
// names a refused value, the flag or its environment twin.
inline bool FlagOnCommandLine(int argc, char** argv, const std::string& flag) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == flag || arg.rfind(flag + "=", 0) == 0) return true;
  }
  return false;
}

// A time (above 0, at most `max`) that `flag` or its environment twin
// `variable` gave as `text`; a refusal names the flag when it is on the
// command line, else the variable (or the default) said it.
inline absl::StatusOr<absl::Duration> ParseTimeFlag(const std::string& text, int argc, char** argv,
                                                    const std::string& flag, const std::string& variable,
                                                    absl::Duration max) {
  return ParseDuration(text, FlagOnCommandLine(argc, argv, flag) ? flag : variable, max);
}

}  // namespace tpuemu
