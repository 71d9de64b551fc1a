// Starting a pod of local processes: the coordinator, then one worker per
// host, all on 127.0.0.1, waiting until every worker has registered. Used by
// `tpuemu cluster up --local` (and its restart commands) and by the
// benchmarks.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/pod_state.h"
#include "client/progress.h"
#include "core/pod/topology.h"
#include "tpuemu/v1/pod.pb.h"

namespace tpuemu {

struct LocalPodOptions {
  TopologyRequest topology;
  double time_scale = 0;
  // The coordinator's --heartbeat-timeout; empty: LocalHeartbeatTimeout.
  std::string heartbeat_timeout;
  int http_port = -1;  // the coordinator's --http-port (-1: none)
  std::string dir;  // port file, logs/, the job store (jobs/) and checkpoints/ go here
  double timeout_s = 60;
  // Plaintext, unauthenticated; otherwise the pod's credentials live in
  // dir/tls (made on the first `cluster up`) and every process uses them.
  bool insecure = false;
  double dcn_oversubscription = 1;  // the coordinator's --dcn-oversubscription
  std::string keep_memory_for;      // the workers' --keep-memory-for; empty: their default
};

struct LocalPod {
  PodState state;
  v1::ClusterStatus status;  // once ready
};

// The heartbeat timeout a local pod gets unless told: 3 s, or 0.1 s per chip
// per core of this machine when that is more. Every process of a local pod
// shares this machine's cores: measured on 2 cores, 256 chips' heartbeats
// arrived up to 3.4 s apart while a job prepared and ran, past the 3 s
// that suits a pod with a core or more per host.
std::string LocalHeartbeatTimeout(int chips);

// `spawned` is called once every process exists (e.g. to remember them so a
// later `cluster down` can stop them). On any failure the processes started
// so far are stopped and the error says where the logs are.
//
// The coordinator listens on a port chosen here and written into its command
// line (not port 0), so that the same command line, as `cluster
// restart-coordinator` or a user reading it from `ps` runs it, brings it back
// where the workers and the pod file expect it.
absl::StatusOr<LocalPod> StartLocalPod(const LocalPodOptions& options, Progress& progress,
                                       const std::function<absl::Status(const PodState&)>& spawned);

// Waits until the coordinator at `state.coordinator` answers and reports its
// whole pod registered and `accept` agrees, or fails when a recorded process
// exits or `timeout_s` passes.
absl::StatusOr<v1::ClusterStatus> WaitUntilReady(
    const PodState& state, double timeout_s, Progress& progress,
    const std::function<bool(const v1::ClusterStatus&)>& accept = [](const v1::ClusterStatus&) { return true; });

}  // namespace tpuemu
