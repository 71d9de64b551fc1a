#include "core/train/fsdp_gather.h"

#include <utility>

namespace tpuemu {

FsdpGather::FsdpGather(const TrainConfig& config, const TrainMesh& mesh, const ChipWeights& weights, MeshComm& comm,
                       StepClock& clock)
    : c_(config), mesh_(mesh), weights_(weights), comm_(comm), clock_(clock) {}

absl::Status FsdpGather::Start(std::vector<WeightUse> uses) {
  uses_ = std::move(uses);
  next_use_ = 0;
  ahead_.clear();
  gathered_once_.clear();
  if (!c_.pipeline_fsdp_ag_once || mesh_.size(MeshAxisKind::kFsdp) == 1) return absl::OkStatus();
  // Issued back to back, in the order of first use; the chip waits for each
  // at that use.
  for (const WeightUse& use : uses_) {
    if (gathered_once_.count(use.layer)) continue;
    Ahead& a = gathered_once_[use.layer];
    Issue({use.layer, true}, a);  // kept for both directions
    if (!a.status.ok()) return a.status;
  }
  return absl::OkStatus();
}

void FsdpGather::Issue(const WeightUse& use, Ahead& a) {
  for (Matrix m : LayerMatrices(c_, use.layer)) {
    if (m == Matrix::kEmbed && !use.forward) continue;
    const int k = static_cast<int>(m);
    a.w[k] = weights_.weight(m, use.layer);
    a.status = comm_.Collective(CollectiveOp::kAllGather, MeshAxisKind::kFsdp, a.w[k], AlongD(m) ? 0 : 1, &a.ready[k]);
    if (!a.status.ok()) return;
  }
}

FsdpGather::Ahead& FsdpGather::Current(int use) {
  for (auto it = ahead_.begin(); it != ahead_.end() && it->first < use;) it = ahead_.erase(it);
  for (int u : {use, use + 1}) {
    if (u < static_cast<int>(uses_.size()) && !ahead_.count(u)) Issue(uses_[u], ahead_[u]);
  }
  return ahead_[use];
}

absl::Status FsdpGather::Gathered(int use, Matrix m, LocalTensor& out) {
  const int layer = uses_[use].layer, k = static_cast<int>(m);
  if (!gathered_once_.empty()) {
    const Ahead& a = gathered_once_.at(layer);
    clock_.Wait(MeshAxisKind::kFsdp, a.ready[k], "weights gathered once per step");
    out = a.w[k];
    return absl::OkStatus();
  }
  if (!c_.fsdp_prefetch) {
    out = weights_.weight(m, layer);
    return comm_.Collective(CollectiveOp::kAllGather, MeshAxisKind::kFsdp, out, AlongD(m) ? 0 : 1);
  }
  Ahead& a = Current(use);
  if (!a.status.ok()) return a.status;
  clock_.Wait(MeshAxisKind::kFsdp, a.ready[k], "prefetched weights");
  out = a.w[k];
  return absl::OkStatus();
}

}  // namespace tpuemu
