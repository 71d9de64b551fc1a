// A training job as it travels: the job file's keys, typed, as the CLI read
// them (the mesh's -1s not yet filled in), checked and laid on a pod by the
// coordinator at submit and by every worker, with the same code.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "core/pod/topology.h"
#include "core/train/config.h"
#include "core/train/mesh.h"

namespace tpuemu {

struct TrainSpec {
  static constexpr char kKind[] = "train";
  TrainConfig config;  // unresolved: PlanTrainJob resolves it for the pod
  std::string source;  // the job file's name, for errors
  // Steps already done, whose checkpoint the chips start from (0: the start);
  // set by the coordinator when it resumes the job, never by a file.
  int resume_step = 0;
};

// A job file's text as the spec it travels as (ParseTrainConfig), `source`
// naming it.
absl::StatusOr<TrainSpec> ParseTrainSpec(const std::string& yaml_text, const std::string& source,
                                         bool shape_only = false);

struct TrainJob {
  TrainConfig config;
  TrainMesh mesh;
  int resume_step = 0;  // TrainSpec's
};

// Checks the config, fills in the mesh, lays it on the pod and checks memory
// and the pacing: every error a job file can have, before anything is
// allocated.
absl::StatusOr<TrainJob> PlanTrainJob(const TrainSpec& spec, const Topology& topo, double pod_time_scale);

}  // namespace tpuemu
