// A chip's communication over the training mesh in one step: collectives
// over a logical axis (data, fsdp, tensor), and permutes to a neighbouring
// pipeline stage. Both book the chip's outgoing links on their emulated
// clocks, which carry over from one transfer of the step to the next, and
// record on the step clock what they sent and when.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/collective/executor.h"
#include "core/collective/plan.h"
#include "core/tensor/local_tensor.h"
#include "core/train/config.h"
#include "core/train/mesh.h"
#include "core/train/mesh_plan.h"
#include "core/train/step_clock.h"
#include "core/wire/host_network.h"
#include "core/wire/job_abort.h"

namespace tpuemu {


class MeshComm {
 public:
  MeshComm(const TrainConfig& config, const TrainMesh& mesh, int chip, HostNetwork& net, uint64_t job,
           std::shared_ptr<JobAbort> abort, StepClock& clock);

  // Idle links, collectives numbered from 0 again.
  void Start();
  // Runs a collective over a logical axis on `t` along `dim`: AllGather
  // concatenates blocks, ReduceScatter keeps this chip's block, AllReduce
  // sums in place. A no-op when the axis has one chip.
  // With `ready`, the collective is issued ahead: it starts at max(now,
  // *ready) on the emulated clock, the chip does not wait, and *ready says
  // when it is done.
  absl::Status Collective(CollectiveOp op, MeshAxisKind axis, LocalTensor& t, int dim, double* ready = nullptr);
  // Sends `t` over the pipeline axis to the stage behind `to`, from now on;
  // the chip does not wait.
  absl::Status Send(const StageLink& to, uint64_t tag, const LocalTensor& t);
  // Receives into `t` (already shaped) what `peer` sent with `tag`; returns
  // the emulated time it arrived (the caller decides whether to wait).
  absl::StatusOr<double> Receive(int peer, uint64_t tag, LocalTensor& t);
  // The step's link clocks, with the bytes each link sent.
  const LinkClocks& links() const { return links_; }

 private:
  RunOptions Options();
  // The plan for this step's down links; an error if the collective cannot
  // split the array evenly (refused at submit by CheckMeshCollectives) or
  // needs a link that is down.
  absl::StatusOr<const CollectivePlan*> PlanFor(CollectiveOp op, MeshAxisKind axis, uint64_t elements);

  const TrainConfig& c_;
  const TrainMesh& mesh_;
  const int chip_;
  HostNetwork& net_;
  const uint64_t job_;
  const std::shared_ptr<JobAbort> abort_;
  StepClock& clock_;
  // Kept across steps, by op, axis, elements and the down links in force.
  std::map<std::tuple<int, int, uint64_t, std::vector<int>>, std::unique_ptr<CollectivePlan>> plans_;
  LinkClocks links_;
  int collectives_ = 0;
};

}  // namespace tpuemu
