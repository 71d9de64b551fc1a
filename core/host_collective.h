// One host's share of a collective, run on a thread per local chip.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collective_executor.h"
#include "core/collective_plan.h"
#include "core/host_network.h"

namespace tpuemu {

// One host's share of a collective: a thread per local chip, in three steps
// that a pod runs on every host at once, so that no chip's set-up or checking
// steals the cores another chip is moving data with: Prepare (buffers
// allocated and filled), Run (data moved, timed), Check (results verified).
class HostCollective {
 public:
  HostCollective(CollectivePlan plan, HostNetwork& net, const RunOptions& options);
  void Prepare();
  absl::StatusOr<std::vector<ChipRunResult>> Run();  // mismatches still 0
  // Mismatching elements per local chip, in local_chips() order.
  std::vector<uint64_t> Check();

 private:
  const CollectivePlan plan_;
  HostNetwork& net_;
  const RunOptions options_;
  std::vector<std::unique_ptr<ChipCollective>> chips_;
  bool prepared_ = false;
};

}  // namespace tpuemu
