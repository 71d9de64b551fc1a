// What `cluster up` remembers so later commands find the pod: the
// coordinator's address and the processes it started. Kept in
// $TPUEMU_HOME/pod.json (default ~/.tpuemu).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tpuemu {

struct PodState {
  std::string coordinator;    // host:port
  std::string topology;       // as given to cluster up
  std::vector<int> pids;      // coordinator first, then workers
  std::string log_dir;
};

std::string StateDir();
absl::StatusOr<PodState> LoadPodState();  // NotFound when no pod was started
absl::Status SavePodState(const PodState& state);
void RemovePodState();

// The coordinator to talk to: --coordinator, else $TPUEMU_COORDINATOR, else
// the pod `cluster up` started.
absl::StatusOr<std::string> ResolveCoordinator(const std::string& flag);

}  // namespace tpuemu
