// A collective over one chip's block of a sharded tensor, the form the
// steps of a matmul and of a training step take: AllGather joins the group's
// blocks along `dim`, ReduceScatter keeps this chip's block of the sum along
// `dim`, AllReduce sums the block in place.
#pragma once

#include "absl/status/statusor.h"
#include "core/collective/executor.h"
#include "core/collective/plan.h"
#include "core/wire/host_network.h"
#include "core/tensor/local_tensor.h"

namespace tpuemu {

// Runs from `start_s` on the chip's emulated clock; `links` carries the
// chip's link clocks from one collective of a job to the next. The report's
// emulated_s is when the chip's result was complete.
absl::StatusOr<ChipRunResult> RunTensorCollective(const CollectivePlan& plan, int chip, HostNetwork& net,
                                                  const RunOptions& options, LinkClocks* links, double start_s,
                                                  LocalTensor& t, int dim);

}  // namespace tpuemu
