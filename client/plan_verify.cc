#include "client/plan_verify.h"

#include <chrono>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/job/inprocess_pod.h"
#include "core/job/symmetric_pod.h"
#include "core/train/job.h"
#include "core/train/report.h"

namespace tpuemu {
namespace {

// Every chip a thread is fine up to here; beyond, only one chip for all.
constexpr int kMostChipsEveryChip = 64;

// A one-line reason (the memory check lists its items below its first line).
Verified NotRun(const std::string& why) {
  Verified v;
  v.why_not = why.substr(0, why.find('\n'));
  if (!v.why_not.empty() && v.why_not.back() == ':') v.why_not.resize(v.why_not.rfind(". ") + 1);  // "Largest items:"
  return v;
}

}  // namespace

Verified VerifyPlan(const MeshPlan& plan, const ModelShape& model, const Topology& topo, double batch_tokens) {
  if (absl::StrContains(plan.mesh, "sub-ring") || absl::StrContains(plan.mesh, "/")) {
    return NotRun("a sub-ring of an axis is not a training mesh (a job's logical axes take whole physical axes)");
  }
  // The planner's prediction for the MLP blocks alone.
  ModelShape mlp = model;
  mlp.query_heads = mlp.kv_heads = mlp.head_dim = mlp.vocab = 0;
  auto mlp_plans = PlanMeshes({mlp, batch_tokens}, topo);
  if (!mlp_plans.ok()) return NotRun(std::string(mlp_plans.status().message()));
  Verified v;
  for (const MeshPlan& p : *mlp_plans) {
    if (p.mesh == plan.mesh) v.predicted = p;
  }
  // A batch both the emulator and the planner can split: a multiple of
  // the batch shards (and of a pipeline's microbatches).
  const int64_t ways = int64_t{plan.data} * topo.slices() * plan.microbatches;
  v.batch_tokens = std::floor(batch_tokens / static_cast<double>(ways)) * static_cast<double>(ways);
  if (v.batch_tokens < 1) return NotRun(absl::StrCat("the batch is smaller than its ", ways, " shards"));
  if (v.batch_tokens != batch_tokens) {
    auto again = PlanMeshes({mlp, v.batch_tokens}, topo);
    for (const MeshPlan& p : again.ok() ? *again : std::vector<MeshPlan>{}) {
      if (p.mesh == plan.mesh) v.predicted = p;
    }
  }
  const std::string job = absl::StrCat(
      "name: verify\nvalues: none\nemb_dim: ", model.emb_dim, "\nmlp_dim: ", model.mlp_dim,
      "\nnum_layers: ", model.layers, "\nglobal_batch_tokens: ", static_cast<int64_t>(v.batch_tokens),
      model.mlp_matrices == 3 ? "\nmlp_activations: [silu, linear]" : "",
      "\nici_data_parallelism: ", plan.fsdp ? 1 : plan.data, "\nici_fsdp_parallelism: ", plan.fsdp ? plan.data : 1,
      "\nici_tensor_parallelism: ", plan.tensor, "\ndcn_data_parallelism: ", topo.slices(),
      // The formulas hide a pass's weight gathers behind its matmuls: the
      // emulated chips gather the next layer's during this one's (a
      // pipeline's stage, once per step).
      plan.stages > 1
          ? absl::StrCat("\nici_pipeline_parallelism: ", plan.stages, "\nnum_pipeline_microbatches: ",
                         plan.microbatches, "\npipeline_fsdp_ag_once: true")
          : absl::StrCat("\nfsdp_prefetch: ", plan.fsdp && plan.data > 1 ? "true" : "false"),
      "\n");
  auto spec = ParseTrainSpec(job, "the plan's job");
  auto planned = spec.ok() ? PlanTrainJob(*spec, topo, 0) : absl::StatusOr<TrainJob>(spec.status());
  if (!planned.ok()) return NotRun(std::string(planned.status().message()));
  const absl::Status alike = CheckOneChipStandsForAll(*spec, topo);
  if (!alike.ok() && topo.num_chips() > kMostChipsEveryChip) {
    return NotRun(absl::StrCat(alike.message(), "; every chip a thread goes up to ", kMostChipsEveryChip, " chips"));
  }
  v.engine = alike.ok() ? "one chip for all" : "every chip";
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<JobRun> run = alike.ok() ? SymmetricPod(topo).Run(*spec) : InProcessPod(topo, 0).Run(JobSpec(*spec));
  v.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!run.ok()) return NotRun(std::string(run.status().message()));
  const StepReport& step = std::any_cast<const StepReport&>(run->steps.front());
  v.job_mesh = std::any_cast<const TrainReport&>(run->report).mesh;
  v.step_s = step.emulated_s;
  v.compute_s = step.compute_s;
  for (int a = 0; a < kMeshAxes; ++a) {
    v.exposed_comm_s += step.exposed_comm_s[a];
    v.busy_comm_s += step.comm_s[a];
  }
  v.ran = true;
  return v;
}

nlohmann::json VerifiedJson(const Verified& v) {
  if (!v.ran) return {{"ran", false}, {"why_not", v.why_not}};
  return {{"ran", true},
          {"engine", v.engine},
          {"job_mesh", v.job_mesh},
          {"batch_tokens", v.batch_tokens},
          {"predicted_step_s", v.predicted.step_s},
          {"predicted_compute_s", v.predicted.compute_s},
          {"predicted_comms_s", v.predicted.comms_s + v.predicted.dcn_s},
          {"emulated_step_s", v.step_s},
          {"emulated_compute_s", v.compute_s},
          {"emulated_comm_s", v.busy_comm_s},
          {"emulated_exposed_comm_s", v.exposed_comm_s},
          {"wall_s", v.wall_s}};
}

}  // namespace tpuemu
