// The environment a tpuemu process is configured by (compose files and
// Kubernetes manifests set TPUEMU_* variables, the twins of flags): a
// misspelt variable would otherwise be ignored without a word.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tpuemu {

// Variables read by every tpuemu binary, besides each one's own.
const std::vector<std::string>& CommonTpuemuVariables();

// An error naming every TPUEMU_* variable set in this process's environment
// that neither `known` nor CommonTpuemuVariables() lists.
absl::Status CheckTpuemuVariables(const std::vector<std::string>& known);

// At start-up: logs CheckTpuemuVariables' error as a warning, or, under
// --check-config (`strict`), as an error and returns false.
bool ReportUnknownTpuemuVariables(const std::vector<std::string>& known, bool strict);

// getenv, with unset and empty both meaning "not said".
std::optional<std::string> EnvVar(const std::string& name);

}  // namespace tpuemu
