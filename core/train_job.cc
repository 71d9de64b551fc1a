#include "core/train_job.h"

#include "core/train_report.h"

namespace tpuemu {

absl::StatusOr<TrainJob> PlanTrainJob(const TrainSpec& spec, const Topology& topo) {
  auto config = ParseTrainConfig(spec.yaml, spec.source.empty() ? "job file" : spec.source);
  if (!config.ok()) return config.status();
  if (auto s = ResolveMesh(*config, topo); !s.ok()) return s;
  auto mesh = TrainMesh::Create(*config, topo);
  if (!mesh.ok()) return mesh.status();
  if (auto s = CheckMemory(*config, *mesh, topo); !s.ok()) return s;
  return TrainJob{*config, *mesh};
}

}  // namespace tpuemu
