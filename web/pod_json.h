// The pod and a job's link traffic as the web view draws them: every chip
// (slice, host, coordinates, its worker's liveness) and every directed link
// (ICI or DCN), named as the trace names its link tracks ("3->4 x+").
#pragma once

#include <string>
#include <vector>

#include "core/pod/topology.h"
#include "nlohmann/json.hpp"
#include "services/coordinator_service.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {

// "3->4 x+": the link from chip 3 to chip 4 along x, the + direction.
std::string LinkId(int src, int dst, const std::string& axis, int dir);

nlohmann::json PodJson(const Topology& topo, const v1::ClusterStatus& status);

// The pod's id of each of a started job's chips, by the job's own ids (a job
// on part of the pod numbers its chips from 0, as its results and trace
// do); empty for a job that has not started.
std::vector<int> JobPodChips(const Topology& pod, const v1::Job& job);

// What each link carried for `job`, by the pod's link id: {"bytes": emulated
// bytes} and, for training jobs (from their trace's link spans, the steps
// the coordinator kept), {"busy_s": emulated seconds it was sending}.
// Collectives and matmuls count their result's links; `trace` may be null
// for them.
nlohmann::json JobLinksJson(const Topology& pod, const v1::Job& job, JobTraceReader* trace);

}  // namespace tpuemu
