// What a matmul job asks for, as the user typed it, and its plan on a pod.
// Workers re-plan from the same spec with the same code, so the coordinator
// ships the few strings below, never a plan.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/tensor/local_tensor.h"
#include "core/matmul/plan.h"
#include "core/pod/topology.h"

namespace tpuemu {

struct MatmulSpec {
  static constexpr char kKind[] = "matmul";
  std::string expr;   // "A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]"
  std::string dims;   // "I=1024,J=512,K=2048"
  std::string mesh;   // "" (X=x, Y=y, Z=z) or "X=x,Y=dcn"
  uint64_t seed = 1;
  int dtype_bytes = 2;
  ValueKind values = ValueKind::kUniform;
  uint64_t chunk_bytes = 1 << 20;
};

// Wire chunks a matmul's collectives may use (`tpuemu matmul --chunk`): below
// 4 KiB per-chunk overhead swamps the data (1 B would send a frame per
// byte); at most a collective's kMaxChunkBytes. Chunks hold whole fp32
// elements.
inline constexpr uint64_t kMinChunkBytes = 4 << 10;

absl::StatusOr<MatmulPlan> PlanMatmulSpec(const MatmulSpec& spec, const Topology& topo);

// Largest max|C - reference| / max|reference| a correct result may show:
// fp32 sums of up to 2^20 terms in a different order than the reference.
inline constexpr double kMatmulTolerance = 1e-5;

}  // namespace tpuemu
