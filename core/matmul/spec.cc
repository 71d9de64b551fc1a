#include "core/matmul/spec.h"

#include "absl/strings/str_cat.h"
#include "core/base/field.h"
#include "core/base/units.h"
#include "core/pod/host_memory.h"

namespace tpuemu {

absl::StatusOr<MatmulPlan> PlanMatmulSpec(const MatmulSpec& spec, const Topology& topo) {
  if (spec.dtype_bytes != 2 && spec.dtype_bytes != 4) {
    return absl::InvalidArgumentError(absl::StrCat(Field("dtype"), ": allowed: bf16, f32"));
  }
  if (spec.chunk_bytes < kMinChunkBytes || spec.chunk_bytes > kMaxChunkBytes || spec.chunk_bytes % 4 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(Field("chunk"), " ", FormatBytes(spec.chunk_bytes),
                                                   ": must be between 4KiB and 4MiB and a multiple of 4 bytes"));
  }
  auto expr = ParseMatmulExpr(spec.expr);
  if (!expr.ok()) return expr.status();
  auto mesh = Mesh::Create(spec.mesh, topo);
  if (!mesh.ok()) return mesh.status();
  auto problem = BindMatmul(*expr, spec.dims, *mesh);
  if (!problem.ok()) return problem.status();
  auto plan = PlanMatmul(*problem, topo, MatmulOptions{spec.dtype_bytes, spec.chunk_bytes});
  if (!plan.ok()) return plan.status();
  // Host memory, fp32: each chip's blocks at their largest, twice (collective
  // buffers and copies), every chip of the pod; a local pod's chips all share
  // this machine.
  const double bytes = 4.0 * 2 * static_cast<double>(plan->chosen().peak_local_elements) * topo.num_chips();
  if (auto s = CheckPodHostBytes(bytes, topo.num_chips(), absl::StrCat(Field("dims"), " '", spec.dims, "'"), "use smaller sizes");
      !s.ok()) {
    return s;
  }
  return plan;
}

}  // namespace tpuemu
