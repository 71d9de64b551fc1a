#include "core/train/fsdp_gather.h"

#include <utility>

namespace tpuemu {

FsdpGather::FsdpGather(const TrainConfig& config, const TrainMesh& mesh, const ChipWeights& weights, MeshComm& comm,
                       StepClock& clock)
    : c_(config), mesh_(mesh), weights_(weights), comm_(comm), clock_(clock) {}

absl::Status FsdpGather::Start(std::vector<int> uses) {
  uses_ = std::move(uses);
  next_use_ = 0;
  ahead_.clear();
  gathered_once_.clear();
  if (!c_.pipeline_fsdp_ag_once || mesh_.size(MeshAxisKind::kFsdp) == 1) return absl::OkStatus();
  // Issued back to back, in the order of first use; the chip waits for each
  // at that use.
  for (int layer : uses_) {
    if (gathered_once_.count(layer)) continue;
    Ahead& a = gathered_once_[layer];
    Issue(layer, a);
    if (!a.status.ok()) return a.status;
  }
  return absl::OkStatus();
}

void FsdpGather::Issue(int layer, Ahead& a) {
  a.win = weights_.win(layer);
  a.wout = weights_.wout(layer);
  a.status = comm_.Collective(CollectiveOp::kAllGather, MeshAxisKind::kFsdp, a.win, 0, &a.in_ready);
  if (a.status.ok()) {
    a.status = comm_.Collective(CollectiveOp::kAllGather, MeshAxisKind::kFsdp, a.wout, 1, &a.out_ready);
  }
}

FsdpGather::Ahead& FsdpGather::Current(int use) {
  for (auto it = ahead_.begin(); it != ahead_.end() && it->first < use;) it = ahead_.erase(it);
  for (int u : {use, use + 1}) {
    if (u < static_cast<int>(uses_.size()) && !ahead_.count(u)) Issue(uses_[u], ahead_[u]);
  }
  return ahead_[use];
}

absl::Status FsdpGather::Gathered(int use, bool in, LocalTensor& out) {
  const int layer = uses_[use];
  if (!gathered_once_.empty()) {
    const Ahead& a = gathered_once_.at(layer);
    clock_.Wait(MeshAxisKind::kFsdp, in ? a.in_ready : a.out_ready, "weights gathered once per step");
    out = in ? a.win : a.wout;
    return absl::OkStatus();
  }
  if (!c_.fsdp_prefetch) {
    out = in ? weights_.win(layer) : weights_.wout(layer);
    return comm_.Collective(CollectiveOp::kAllGather, MeshAxisKind::kFsdp, out, in ? 0 : 1);
  }
  Ahead& a = Current(use);
  if (!a.status.ok()) return a.status;
  clock_.Wait(MeshAxisKind::kFsdp, in ? a.in_ready : a.out_ready, "prefetched weights");
  out = in ? a.win : a.wout;
  return absl::OkStatus();
}

}  // namespace tpuemu
