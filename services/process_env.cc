#include "services/process_env.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"

extern char** environ;

namespace tpuemu {

const std::vector<std::string>& CommonTpuemuVariables() {
  // The CLI's too: `tpuemu health` probes run in the same container's environment.
  static const std::vector<std::string> names = {"TPUEMU_HOME", "TPUEMU_TLS_CA", "TPUEMU_TOKEN", "TPUEMU_TOKEN_FILE"};
  return names;
}

absl::Status CheckTpuemuVariables(const std::vector<std::string>& known) {
  std::vector<std::string> allowed = known;
  allowed.insert(allowed.end(), CommonTpuemuVariables().begin(), CommonTpuemuVariables().end());
  std::sort(allowed.begin(), allowed.end());
  std::vector<std::string> unknown;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (absl::StartsWith(name, "TPUEMU_") && !std::binary_search(allowed.begin(), allowed.end(), name)) {
      unknown.push_back(name);
    }
  }
  if (unknown.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("environment: ", absl::StrJoin(unknown, ", "),
                                                 unknown.size() == 1 ? " is" : " are",
                                                 " not read by this program (misspelt?); it reads ",
                                                 absl::StrJoin(allowed, ", ")));
}

bool ReportUnknownTpuemuVariables(const std::vector<std::string>& known, bool strict) {
  const absl::Status s = CheckTpuemuVariables(known);
  if (s.ok()) return true;
  if (strict) {
    spdlog::error("{}", std::string(s.message()));
    return false;
  }
  spdlog::warn("{}", std::string(s.message()));
  return true;
}

std::optional<std::string> EnvVar(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace tpuemu
