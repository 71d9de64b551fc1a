// Layer weights gathered over the fsdp axis for each use (seed 001's FSDP,
// ZeRO-3): a chip keeps only its shard of Win [D/fsdp, F/tensor] (and Wup) and
// Wout [F/tensor, D/fsdp], and a layer's forward or backward needs them
// whole along D, so each use AllGathers them, just in time:
//   by default : here and now, the chip waiting for them;
//   fsdp_prefetch : during the previous use, so the chip waits only for
//                what has not arrived yet (each use issues the next's);
//   pipeline_fsdp_ag_once : once per step, issued back to back at its
//                start, kept for every microbatch (memory for bandwidth).
// Uses are numbered in the order of the stage's schedule: a layer's
// forward or backward, once per microbatch. A backward use gathers no
// embedding: its gradient is a scatter of rows, which reads no weights.
#pragma once

#include <map>
#include <vector>

#include "absl/status/status.h"
#include "core/tensor/local_tensor.h"
#include "core/train/chip_weights.h"
#include "core/train/config.h"
#include "core/train/mesh.h"
#include "core/train/mesh_comm.h"
#include "core/train/step_clock.h"

namespace tpuemu {

struct WeightUse {
  int layer = 0;
  bool forward = true;
};

class FsdpGather {
 public:
  FsdpGather(const TrainConfig& config, const TrainMesh& mesh, const ChipWeights& weights, MeshComm& comm,
             StepClock& clock);

  // A step that uses the layers in `uses`, in that order. With
  // pipeline_fsdp_ag_once (and more than one fsdp chip) every layer's
  // gathers are issued now.
  absl::Status Start(std::vector<WeightUse> uses);
  // The next weight use; its layer's matrices come from Gathered.
  int NextUse() { return next_use_++; }
  // The full matrix `m` of use `use`'s layer, along D.
  absl::Status Gathered(int use, Matrix m, LocalTensor& out);

 private:
  struct Ahead {
    LocalTensor w[kMatrixKinds];
    double ready[kMatrixKinds] = {};
    absl::Status status;
  };
  // Issues the gathers of the matrices `use` needs ahead into `a`.
  void Issue(const WeightUse& use, Ahead& a);
  // Prefetching: use `use`'s gathers, issued before if they were, and the
  // next use's, issued now.
  Ahead& Current(int use);

  const TrainConfig& c_;
  const TrainMesh& mesh_;
  const ChipWeights& weights_;
  MeshComm& comm_;
  StepClock& clock_;
  std::vector<WeightUse> uses_;  // in order
  int next_use_ = 0;
  std::map<int, Ahead> ahead_;          // fsdp_prefetch: gathers issued, by weight use
  std::map<int, Ahead> gathered_once_;  // pipeline_fsdp_ag_once: by layer
};

}  // namespace tpuemu
