// Plans a sharded matmul with the seed's four cases (seed 000, part 3):
//   1. no sharded contracting dimension: multiply the local blocks;
//   2. one operand's contracting dimension sharded: AllGather it, or slice the
//      other operand the same way and reduce the partial sums afterwards;
//   3. both sharded alike: multiply to C{U_X}, then AllReduce, or
//      ReduceScatter onto an output dimension, or keep it unreduced;
//   4. a kept dimension of each operand sharded on one axis: AllGather one.
// Rather than pattern-matching the cases, the planner enumerates how each
// dimension may be sharded during the local multiply (as in the operand, as
// in the other operand or the output, or not at all), keeps the shardings
// that use every mesh axis at most once, derives the communication each
// needs, prices it with the cost model (the seeds' collective times and the
// chip's roofline) and picks the cheapest. The four cases fall out as the
// valid, cheapest choices; where two are valid (the seed's questions 4 and 9),
// both are kept with their costs so --explain can show why one won.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collective/plan.h"
#include "core/collective/spec.h"
#include "core/matmul/problem.h"
#include "core/pod/topology.h"

namespace tpuemu {

enum class MatmulStepKind { kAllGather, kSlice, kMultiply, kAllReduce, kReduceScatter };
std::string StepKindName(MatmulStepKind kind);  // "AllGather", "DynamicSlice", ...

struct MatmulStep {
  MatmulStepKind kind = MatmulStepKind::kMultiply;
  int tensor = 0;        // 0: first operand, 1: second, 2: the product
  int dim = -1;          // gather, slice, reduce-scatter: the dimension
  std::string axes;      // mesh letters the step works over
  std::string notation;  // the seed's notation, e.g. "AllGather_X A[I_X, J] -> A[I, J]"
  // Collectives: the pod's plan for it, shared by every chip that runs it.
  std::shared_ptr<const CollectivePlan> plan;
  uint64_t bytes = 0;         // collectives: V, the array it is defined over (emulated bytes)
  std::map<std::string, uint64_t> bytes_per_chip;  // collectives: what each chip sends, by physical axis
  uint64_t flops = 0;         // multiply: per chip
  double predicted_s = 0;
};

struct MatmulCandidate {
  std::string summary;  // "AllGather_X A, multiply"
  std::vector<MatmulStep> steps;
  double compute_s = 0;
  double comm_s = 0;
  double predicted_s() const { return compute_s + comm_s; }
  uint64_t flops_per_chip = 0;
  uint64_t comm_bytes_per_chip = 0;
  uint64_t peak_local_elements = 0;  // the chip's blocks of A, B and C at their largest, together
};

struct MatmulOptions {
  int dtype_bytes = 2;
  uint64_t chunk_bytes = 1 << 20;
};

struct MatmulPlan {
  MatmulProblem problem;
  MatmulOptions options;
  std::vector<MatmulCandidate> candidates;  // cheapest first; [0] is the plan
  const MatmulCandidate& chosen() const { return candidates.front(); }
  std::string why;  // one line: the choice and the runner-up with both costs
};

absl::StatusOr<MatmulPlan> PlanMatmul(const MatmulProblem& problem, const Topology& topo,
                                      const MatmulOptions& options);

}  // namespace tpuemu
