// Runs one chip's share of a planned matmul: makes its operand blocks, walks
// the plan's steps (collectives over its links, local slices, the BLIS
// multiply) on both clocks, and checks its block of the result against a
// one-device BLIS product of the same block.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collective/executor.h"
#include "core/collective/plan.h"
#include "core/wire/host_network.h"
#include "core/tensor/local_tensor.h"
#include "core/matmul/spec.h"

namespace tpuemu {

// A spec and its plan, built once per host and shared by its chips.
struct MatmulProgram {
  MatmulSpec spec;
  MatmulPlan plan;

  static absl::StatusOr<std::shared_ptr<const MatmulProgram>> Create(const MatmulSpec& spec, const Topology& topo);
};

struct MatmulCheck {
  double max_abs_err = 0;  // max |C - reference| over the chip's block
  double max_abs_ref = 0;  // max |reference|
};

class ChipMatmul {
 public:
  ChipMatmul(std::shared_ptr<const MatmulProgram> program, int chip, HostNetwork& net, const RunOptions& options);
  // Makes this chip's blocks of both operands (not timed).
  void Prepare();
  // The plan's steps, timed on both clocks.
  absl::StatusOr<ChipRunResult> Run();
  MatmulCheck Check() const;

 private:
  int ShardIndex(const std::string& letters) const;
  absl::Status Step(size_t i);
  // Step i's collective on `t` along `dim`.
  absl::Status RunCollective(size_t i, LocalTensor& t, int dim);
  void Multiply();

  std::shared_ptr<const MatmulProgram> program_;
  const MatmulProblem& problem_;
  const int chip_;
  HostNetwork& net_;
  const RunOptions options_;
  TensorSpec spec_[3];     // current sharding of A, B and the product
  LocalTensor value_[3];   // this chip's blocks of them
  std::vector<std::string> multiply_contract_axes_;  // sharding of each contracted dim during the multiply
  LinkClocks links_;
  double now_ = 0;        // emulated clock
  double compute_s_ = 0;
  uint64_t flops_ = 0;
  ChipRunResult last_;
};

}  // namespace tpuemu
