// A training job as it travels: the job file's text, checked and laid on a
// pod. Workers re-check the same text with the same code.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "core/pod/topology.h"
#include "core/train/config.h"
#include "core/train/mesh.h"

namespace tpuemu {

struct TrainSpec {
  static constexpr char kKind[] = "train";
  std::string yaml;    // the job file's text
  std::string source;  // its name, for errors
};

struct TrainJob {
  TrainConfig config;
  TrainMesh mesh;
};

// Parses, fills in the mesh, lays it on the pod and checks memory and the
// pacing: every error a job file can have, before anything is allocated.
absl::StatusOr<TrainJob> PlanTrainJob(const TrainSpec& spec, const Topology& topo, double pod_time_scale);

}  // namespace tpuemu
