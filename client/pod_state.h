// What `cluster up` remembers so later commands find the pod: the
// coordinator's address and the processes it started, each with what
// identifies it and the command line that starts it again. Kept in
// $TPUEMU_HOME/pod.json (default ~/.tpuemu), replaced atomically.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/processes.h"

namespace tpuemu {

struct PodWorker {
  int slice = 0;
  int host = 0;  // within the slice
  StartedProcess process;
};

struct PodState {
  std::string coordinator;  // host:port, the same for the pod's life
  std::string topology;     // as given to cluster up
  std::string log_dir;
  std::string tls_dir;      // its credentials (services/credentials.h); "": started with --insecure
  StartedProcess coordinator_process;
  std::vector<PodWorker> workers;

  // The coordinator first, then the workers.
  std::vector<StartedProcess> processes() const;
};

std::string StateDir();
absl::StatusOr<PodState> LoadPodState();  // NotFound when no pod was started
absl::Status SavePodState(const PodState& state);
void RemovePodState();

// The coordinator to talk to: --coordinator, else $TPUEMU_COORDINATOR, else
// the pod `cluster up` started.
absl::StatusOr<std::string> ResolveCoordinator(const std::string& flag);
// InvalidArgument unless `address` is HOST:PORT with a port from 1 to 65535
// (gRPC took port 99999 as 34463); `what` names where it came from.
absl::Status CheckHostPort(const std::string& address, const std::string& what);

}  // namespace tpuemu
