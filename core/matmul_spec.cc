#include "core/matmul_spec.h"

namespace tpuemu {

absl::StatusOr<MatmulPlan> PlanMatmulSpec(const MatmulSpec& spec, const Topology& topo) {
  if (spec.dtype_bytes != 2 && spec.dtype_bytes != 4) {
    return absl::InvalidArgumentError("--dtype: allowed: bf16, f32");
  }
  auto expr = ParseMatmulExpr(spec.expr);
  if (!expr.ok()) return expr.status();
  auto mesh = Mesh::Create(spec.mesh, topo);
  if (!mesh.ok()) return mesh.status();
  auto problem = BindMatmul(*expr, spec.dims, *mesh);
  if (!problem.ok()) return problem.status();
  return PlanMatmul(*problem, topo, MatmulOptions{spec.dtype_bytes, spec.chunk_bytes});
}

}  // namespace tpuemu
