#include "client/pod_state.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tpuemu {

std::string StateDir() {
  if (const char* home = std::getenv("TPUEMU_HOME"); home && *home) return home;
  const char* user_home = std::getenv("HOME");
  return absl::StrCat(user_home && *user_home ? user_home : "/tmp", "/.tpuemu");
}

namespace {

std::string StateFile() { return StateDir() + "/pod.json"; }

nlohmann::json ProcessJson(const StartedProcess& p) {
  return {{"pid", p.pid}, {"boot_id", p.boot_id}, {"start_ticks", p.start_ticks}, {"argv", p.argv}, {"log", p.log}};
}

StartedProcess ProcessFromJson(const nlohmann::json& j) {
  return {j.at("pid").get<int>(), j.at("boot_id").get<std::string>(), j.at("start_ticks").get<uint64_t>(),
          j.at("argv").get<std::vector<std::string>>(), j.value("log", "")};
}

}  // namespace

std::vector<StartedProcess> PodState::processes() const {
  std::vector<StartedProcess> all = {coordinator_process};
  for (const PodWorker& w : workers) all.push_back(w.process);
  return all;
}

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
    s.log_dir = j.value("log_dir", "");
    s.tls_dir = j.value("tls_dir", "");
    s.coordinator_process = ProcessFromJson(j.at("coordinator_process"));
    for (const nlohmann::json& w : j.at("workers")) {
      s.workers.push_back({w.at("slice").get<int>(), w.at("host").get<int>(), ProcessFromJson(w)});
    }
    return s;
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat(StateFile(), " is damaged (", e.what(),
                                            "); remove it and run `tpuemu cluster up` again"));
  }
}

absl::Status SavePodState(const PodState& s) {
  std::error_code ec;
  std::filesystem::create_directories(StateDir(), ec);
  nlohmann::json workers = nlohmann::json::array();
  for (const PodWorker& w : s.workers) {
    nlohmann::json one = ProcessJson(w.process);
    one["slice"] = w.slice;
    one["host"] = w.host;
    workers.push_back(one);
  }
  nlohmann::json j = {{"coordinator", s.coordinator}, {"topology", s.topology}, {"log_dir", s.log_dir}, {"tls_dir", s.tls_dir},
                      {"coordinator_process", ProcessJson(s.coordinator_process)}, {"workers", workers}};
  const std::string tmp = StateFile() + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", tmp, "; set TPUEMU_HOME elsewhere"));
    out << j.dump(2) << "\n";
    out.close();
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp, " (disk full?)"));
  }
  std::filesystem::rename(tmp, StateFile(), ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot write ", StateFile(), ": ", ec.message()));
  return absl::OkStatus();
}

void RemovePodState() {
  std::error_code ec;
  std::filesystem::remove(StateFile(), ec);
}

absl::Status CheckHostPort(const std::string& address, const std::string& what) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", address, "': expected HOST:PORT with a port from 1 to 65535, e.g. localhost:50051"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ResolveCoordinator(const std::string& flag) {
  if (!flag.empty()) {
    if (auto s = CheckHostPort(flag, "--coordinator"); !s.ok()) return s;
    return flag;
  }
  if (const char* env = std::getenv("TPUEMU_COORDINATOR"); env && *env) {
    if (auto s = CheckHostPort(env, "--coordinator (or TPUEMU_COORDINATOR)"); !s.ok()) return s;
    return std::string(env);
  }
  auto state = LoadPodState();
  if (!state.ok()) return state.status();
  return state->coordinator;
}

}  // namespace tpuemu
