#include "client/pod_state.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tpuemu {

std::string StateDir() {
  if (const char* home = std::getenv("TPUEMU_HOME"); home && *home) return home;
  const char* user_home = std::getenv("HOME");
  return absl::StrCat(user_home && *user_home ? user_home : "/tmp", "/.tpuemu");
}

static std::string StateFile() { return StateDir() + "/pod.json"; }

absl::StatusOr<PodState> LoadPodState() {
  std::ifstream in(StateFile());
  if (!in) {
    return absl::NotFoundError(
        "no pod is running: start one with `tpuemu cluster up --local --topology v5e:4x4`, or point at one with "
        "--coordinator HOST:PORT or TPUEMU_COORDINATOR");
  }
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    PodState s;
    s.coordinator = j.at("coordinator").get<std::string>();
    s.topology = j.value("topology", "");
    s.pids = j.value("pids", std::vector<int>{});
    s.log_dir = j.value("log_dir", "");
    return s;
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat(StateFile(), " is damaged (", e.what(),
                                            "); remove it and run `tpuemu cluster up` again"));
  }
}

absl::Status SavePodState(const PodState& s) {
  std::error_code ec;
  std::filesystem::create_directories(StateDir(), ec);
  nlohmann::json j = {{"coordinator", s.coordinator}, {"topology", s.topology}, {"pids", s.pids},
                      {"log_dir", s.log_dir}};
  const std::string tmp = StateFile() + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", tmp, "; set TPUEMU_HOME elsewhere"));
    out << j.dump(2) << "\n";
  }
  std::filesystem::rename(tmp, StateFile(), ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot write ", StateFile(), ": ", ec.message()));
  return absl::OkStatus();
}

void RemovePodState() {
  std::error_code ec;
  std::filesystem::remove(StateFile(), ec);
}

absl::StatusOr<std::string> ResolveCoordinator(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("TPUEMU_COORDINATOR"); env && *env) return std::string(env);
  auto state = LoadPodState();
  if (!state.ok()) return state.status();
  return state->coordinator;
}

}  // namespace tpuemu
