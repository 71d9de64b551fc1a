#include "core/train/stage_links.h"

#include "absl/strings/str_cat.h"
#include "core/train/permute.h"

namespace tpuemu {

StageLinks::StageLinks(const TrainMesh& mesh, int chip, MeshComm& comm, StepClock& clock)
    : mesh_(mesh), comm_(comm), clock_(clock) {
  if (mesh.stages() > 1) {
    previous_ = mesh.StageNeighbor(chip, -1);
    next_ = mesh.StageNeighbor(chip, +1);
  }
}

uint64_t StageLinks::Tag(bool forward, const PipelineOp& op, int group) {
  // Direction in bit 62, microbatch (at most 65536) in bits 44-61, group (at
  // most num_layers <= 1e6) in 24-43, the chunk in the low 24 bits.
  return kPermuteTagBit | (forward ? 0 : uint64_t{1} << 62) | (static_cast<uint64_t>(op.microbatch) << 44) |
         (static_cast<uint64_t>(group) << 24);
}

absl::Status StageLinks::Send(bool forward, const PipelineOp& op, int group, const LocalTensor& t) {
  return comm_.Send(forward ? next_ : previous_, Tag(forward, op, group), t);
}

absl::Status StageLinks::Receive(bool forward, const PipelineOp& op, int group, LocalTensor& t) {
  const StageLink& from = forward ? previous_ : next_;
  auto arrival = comm_.Receive(from.peer, Tag(forward, op, group), t);
  if (!arrival.ok()) return arrival.status();
  clock_.Wait(MeshAxisKind::kPipeline, *arrival,
              absl::StrCat("stage ", mesh_.Stage(from.peer), ": ", forward ? "activations" : "gradients", " of mb ",
                           op.microbatch));
  return absl::OkStatus();
}

}  // namespace tpuemu
