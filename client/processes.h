// Starting and stopping the pod's background processes.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tpuemu {

// Path of a sibling binary (next to this executable, else on PATH).
std::string FindBinary(const std::string& name);
// Starts argv in its own session with stdout/stderr appended to log_path.
absl::StatusOr<int> SpawnDetached(const std::vector<std::string>& argv, const std::string& log_path);
bool ProcessAlive(int pid);
// SIGTERM, then SIGKILL after grace_s; returns how many were still alive.
int StopProcesses(const std::vector<int>& pids, double grace_s);
std::string TailFile(const std::string& path, int lines);

}  // namespace tpuemu
