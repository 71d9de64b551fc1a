// Starting a pod of local processes: the coordinator, then one worker per
// host, all on 127.0.0.1, waiting until every worker has registered. Used by
// `tpuemu cluster up --local` and by the benchmarks.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/progress.h"
#include "core/topology.h"
#include "tpuemu/v1/pod.pb.h"

namespace tpuemu {

struct LocalPodOptions {
  TopologyRequest topology;
  double time_scale = 0;
  std::string dir;  // port file and logs/ go here
  double timeout_s = 60;
};

struct LocalPod {
  std::string coordinator;  // 127.0.0.1:PORT
  std::vector<int> pids;    // coordinator first, then workers by host
  v1::ClusterStatus status; // once ready
};

// `spawned` is called once every process exists (e.g. to remember them so a
// later `cluster down` can stop them). On any failure the processes started
// so far are stopped and the error says where the logs are.
absl::StatusOr<LocalPod> StartLocalPod(const LocalPodOptions& options, Progress& progress,
                                       const std::function<absl::Status(const LocalPod&)>& spawned);

}  // namespace tpuemu
