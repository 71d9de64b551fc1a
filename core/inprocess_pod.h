// A whole pod in one process: every chip a thread, every link through memory
// (still paced and clocked like any other link). The reference transport of
// the core tests and the "all memory" case of the data-path benchmark.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "core/collective_report.h"
#include "core/host_network.h"

namespace tpuemu {

class InProcessPod : public Fabric {
 public:
  InProcessPod(const Topology& topo, double time_scale);
  absl::Status Deliver(Frame&& frame) override;
  absl::StatusOr<CollectiveReport> Run(const CollectiveSpec& spec);
  HostNetwork& network() { return *net_; }

 private:
  Topology topo_;
  std::unique_ptr<HostNetwork> net_;
  uint64_t next_job_ = 1;
};

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
