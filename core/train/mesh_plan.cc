#include "core/train/mesh_plan.h"

#include <algorithm>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/train/vocab.h"

namespace tpuemu {

absl::StatusOr<CollectivePlan> PlanMeshCollective(const TrainConfig& c, const TrainMesh& mesh,
                                                  const Topology& topo, CollectiveOp op, MeshAxisKind axis,
                                                  uint64_t elements, const std::vector<int>& chips, int step) {
  CollectiveSpec spec;
  spec.op = op;
  spec.axes = mesh.axes(axis);
  spec.bytes = elements * c.dtype_bytes;
  spec.dtype_bytes = c.dtype_bytes;
  spec.chunk_bytes = 1 << 20;
  if (step >= 0) {
    spec.faults.down_links = c.faults.down_links;
    spec.faults.route_around = c.faults.route_around;
    spec.fault_step = step;
  }
  return CollectivePlan::CreateFor(topo, spec, chips);
}

absl::Status CheckMeshCollectives(const TrainConfig& c, const TrainMesh& mesh, const Topology& topo) {
  const int64_t data = mesh.size(MeshAxisKind::kData), fsdp = mesh.size(MeshAxisKind::kFsdp),
                tensor = mesh.size(MeshAxisKind::kTensor);
  const int64_t microbatch = c.global_batch_tokens / (data * fsdp) / c.num_microbatches;
  const int64_t f_t = c.mlp_dim / tensor;
  struct Use {
    CollectiveOp op;
    MeshAxisKind axis;
    int64_t elements;
    const char* what;
    const char* keys;
  };
  // What ChipTrainer, FsdpGather and ReduceGradient run, by whole-array size.
  const Use uses[] = {
      {CollectiveOp::kAllGather, MeshAxisKind::kTensor, microbatch * c.emb_dim, "the activations' all-gather",
       "global_batch_tokens, num_microbatches and emb_dim"},
      {CollectiveOp::kReduceScatter, MeshAxisKind::kTensor, microbatch * c.emb_dim,
       "the activations' reduce-scatter", "global_batch_tokens, num_microbatches and emb_dim"},
      {CollectiveOp::kAllGather, MeshAxisKind::kFsdp, c.emb_dim * f_t, "a layer's weight all-gather",
       "emb_dim and mlp_dim"},
      {CollectiveOp::kReduceScatter, MeshAxisKind::kFsdp, c.emb_dim * f_t, "a layer's gradient reduce-scatter",
       "emb_dim and mlp_dim"},
      {CollectiveOp::kAllReduce, MeshAxisKind::kData, c.emb_dim * f_t / fsdp, "a layer's gradient all-reduce",
       "emb_dim and mlp_dim"},
  };
  std::vector<Use> all(std::begin(uses), std::end(uses));
  if (c.embeddings()) {
    const int64_t v_t = c.vocab_size / tensor;
    all.insert(all.end(),
               {{CollectiveOp::kAllGather, MeshAxisKind::kTensor, microbatch * kLogitStats * tensor,
                 "the cross-entropy's statistics all-gather", "global_batch_tokens and num_microbatches"},
                {CollectiveOp::kAllGather, MeshAxisKind::kFsdp, c.emb_dim * v_t,
                 "the embedding's and vocabulary projection's all-gather", "emb_dim and vocab_size"},
                {CollectiveOp::kReduceScatter, MeshAxisKind::kFsdp, c.emb_dim * v_t,
                 "the embedding's and vocabulary projection's gradient reduce-scatter", "emb_dim and vocab_size"},
                {CollectiveOp::kAllReduce, MeshAxisKind::kData, c.emb_dim * v_t / fsdp,
                 "the embedding's and vocabulary projection's gradient all-reduce", "emb_dim and vocab_size"}});
  }
  for (const Use& u : all) {
    if (mesh.size(u.axis) == 1) continue;
    auto plan = PlanMeshCollective(c, mesh, topo, u.op, u.axis, static_cast<uint64_t>(u.elements), {});
    if (!plan.ok()) {
      // The planner's reason without its leading "`bytes` N: " (a key of
      // collective jobs, not of this one).
      const std::string why(plan.status().message());
      const size_t colon = why.find(": ");
      return absl::InvalidArgumentError(absl::StrCat(
          c.name, ": ", u.what, " over ", MeshAxisName(u.axis), " (", u.elements, " elements of ", c.dtype_bytes,
          " bytes) cannot run: ", colon == std::string::npos ? why : why.substr(colon + 2), ". Its size comes from ",
          u.keys));
    }
  }
  // The links down at a step are most at some link's first step (a set
  // that only grows there), and more links down never let more through.
  if (!c.faults.route_around) return absl::OkStatus();
  std::set<int> first_steps;  // before c.steps: CheckFaultsBegin
  for (const DownLink& d : c.faults.down_links) first_steps.insert(std::max(d.when.from_step, 0));
  for (int step : first_steps) {
    for (const Use& u : all) {
      if (mesh.size(u.axis) == 1) continue;
      auto plan = PlanMeshCollective(c, mesh, topo, u.op, u.axis, static_cast<uint64_t>(u.elements), {}, step);
      if (!plan.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(c.name, ": at step ", step, ", ", u.what, " over ",
                                                       MeshAxisName(u.axis), " cannot run: ", plan.status().message()));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tpuemu
