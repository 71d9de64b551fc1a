// One host's share of a collective: a ChipCollective per local chip.
#pragma once

#include <memory>
#include <vector>

#include "core/collective/executor.h"
#include "core/collective/plan.h"
#include "core/host/job.h"
#include "core/wire/host_network.h"

namespace tpuemu {

class HostCollective : public HostJob {
 public:
  HostCollective(CollectivePlan plan, HostNetwork& net, const RunOptions& options);
  absl::Status Prepare() override;
  absl::StatusOr<std::vector<ChipRunResult>> Run(int step = 0) override;  // mismatches still 0
  std::vector<ChipCheck> Check() override;
  // Slow links only (the shared DCN fabric's: core/pod/dcn_fabric.h); a
  // down link or a straggler is the job's own, from its spec.
  absl::Status AddFaults(const Faults& added) override;

 private:
  const CollectivePlan plan_;
  HostNetwork& net_;
  Faults faults_;  // the spec's, and those added; the chips read them as they run
  const RunOptions options_;
  std::vector<std::unique_ptr<ChipCollective>> chips_;
  int start_barrier_rounds_ = 0;
  bool prepared_ = false;
};

}  // namespace tpuemu
