#include "core/collective/tensor_collective.h"

#include <cstring>

namespace tpuemu {

absl::StatusOr<ChipRunResult> RunTensorCollective(const CollectivePlan& plan, int chip, HostNetwork& net,
                                                  const RunOptions& options, LinkClocks* links, double start_s,
                                                  LocalTensor& t, int dim) {
  const CollectiveOp op = plan.spec().op;
  const int n = plan.group_size();
  const int rank = plan.GroupRank(chip);
  const int64_t local = t.elements();
  // The collective's virtual buffer: the group's blocks one after another
  // (AllGather, ReduceScatter), or the block itself (AllReduce).
  // A shape-only tensor runs the collective on no buffer: the same
  // transfers and clocks, no values (ChipCollective::PrepareOn).
  const bool values = t.has_values();
  std::shared_ptr<float[]> buffer;
  if (values && op == CollectiveOp::kAllGather) {
    buffer.reset(new float[local * n]);
    std::memcpy(buffer.get() + rank * local, t.data.get(), local * sizeof(float));
  } else if (values && op == CollectiveOp::kReduceScatter) {
    buffer.reset(new float[local]);
    SplitBlocks(t, n, dim, buffer.get());
  } else {
    buffer = t.data;  // AllReduce in place, or none
  }
  ChipCollective collective(plan, chip, net, options);
  collective.PrepareOn(buffer, start_s, links);
  if (auto s = collective.Move(); !s.ok()) return s;
  auto report = collective.Report();
  if (!report.ok()) return report.status();
  if (op == CollectiveOp::kAllGather) {
    if (!values) {
      t.shape[dim] *= n;
    } else {
      t = ConcatBlocks(buffer.get(), n, t.shape, dim);
    }
  } else if (op == CollectiveOp::kReduceScatter) {
    t.shape[dim] /= n;
    if (!values) return report;
    // The chip's reduced block, read in place from the collective's buffer.
    t.data = std::shared_ptr<float[]>(buffer, buffer.get() + rank * t.elements());
  }
  return report;
}

}  // namespace tpuemu
