// A pipeline stage's links to its neighbours (seed 004): a microbatch's
// activations go forward to the next stage's layer group, and their
// gradients come back to the previous one, as permutes over the pipeline
// axis (permute.h). The sender carries on at once; the receiver waits for
// what has not arrived yet, which is the pipeline's bubble on its clock.
// Each transfer is tagged with its direction, microbatch and the group it
// is for, so that a stage running several microbatches (and, circular,
// several groups) never takes one for another.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "core/tensor/local_tensor.h"
#include "core/train/mesh.h"
#include "core/train/mesh_comm.h"
#include "core/train/pipeline_schedule.h"
#include "core/train/step_clock.h"

namespace tpuemu {

class StageLinks {
 public:
  StageLinks(const TrainMesh& mesh, int chip, MeshComm& comm, StepClock& clock);

  // Forward: op's activations to the next stage, for its group `group`;
  // backward: op's gradients to the previous stage, for its group `group`.
  absl::Status Send(bool forward, const PipelineOp& op, int group, const LocalTensor& t);
  // Into `t` (already shaped), for the chip's group `group`: forward, op's
  // activations from the previous stage; backward, its gradients from the
  // next one.
  absl::Status Receive(bool forward, const PipelineOp& op, int group, LocalTensor& t);

 private:
  static uint64_t Tag(bool forward, const PipelineOp& op, int group);

  const TrainMesh& mesh_;
  MeshComm& comm_;
  StepClock& clock_;
  StageLink previous_, next_;  // with more than one stage
};

}  // namespace tpuemu
