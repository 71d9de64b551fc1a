#include "core/train/job.h"

#include "absl/strings/str_cat.h"
#include "core/base/field.h"
#include "core/pod/host_memory.h"
#include "core/train/mesh_plan.h"
#include "core/train/report.h"

namespace tpuemu {

absl::StatusOr<TrainSpec> ParseTrainSpec(const std::string& yaml_text, const std::string& source, bool shape_only) {
  auto config = ParseTrainConfig(yaml_text, source, shape_only);
  if (!config.ok()) return config.status();
  return TrainSpec{*std::move(config), source};
}

absl::StatusOr<TrainJob> PlanTrainJob(const TrainSpec& spec, const Topology& topo, double pod_time_scale) {
  // Checked again whoever sent it: a request need not come from the CLI.
  if (auto s = ValidateTrainConfig(spec.config, spec.source.empty() ? "job file" : spec.source); !s.ok()) return s;
  TrainConfig config = spec.config;
  // Links are paced per pod, so a job cannot choose its own pacing.
  if (config.time_scale >= 0 && config.time_scale != pod_time_scale) {
    return absl::InvalidArgumentError(absl::StrCat(
        config.name, ": time_scale: ", config.time_scale, ", but the pod runs at ", Field("time_scale"), " ", pod_time_scale,
        "; drop the key, or start a pod with ", Field("time_scale"), " ", config.time_scale));
  }
  if (auto s = ResolveMesh(config, topo); !s.ok()) return s;
  auto mesh = TrainMesh::Create(config, topo);
  if (!mesh.ok()) return mesh.status();
  if (auto s = CheckMemory(config, *mesh, topo); !s.ok()) return s;
  if (auto s = CheckFaults(config.faults, topo, "faults"); !s.ok()) return s;
  if (auto s = CheckFaultsBegin(config.faults, config.steps, "faults"); !s.ok()) return s;
  if (auto s = CheckMeshCollectives(config, *mesh, topo); !s.ok()) return s;
  // A shape-only job holds no tensors' values on the host.
  const double host = config.shape_only() ? 0
                                          : ChipHostBytes(config, *mesh) * topo.num_chips() +
                                                HostTeacherBytes(config) * topo.num_hosts();
  if (auto s = CheckPodHostBytes(host, topo.num_chips(),
                                 absl::StrCat(config.name, ": emb_dim=", config.emb_dim, ", mlp_dim=",
                                              config.mlp_dim, ", num_layers=", config.num_layers,
                                              ", global_batch_tokens=", config.global_batch_tokens),
                                 "every host keeps the whole teacher and every chip its shards and activations: "
                                 "make the model or the batch smaller");
      !s.ok()) {
    return s;
  }
  if (spec.resume_step < 0 || spec.resume_step >= config.steps) {
    return absl::InvalidArgumentError(absl::StrCat(config.name, ": resume_step ", spec.resume_step,
                                                   ": must be from 0 to steps - 1 (", config.steps - 1, ")"));
  }
  return TrainJob{std::move(config), *mesh, spec.resume_step};
}

}  // namespace tpuemu
