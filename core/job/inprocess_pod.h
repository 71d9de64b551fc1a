// A whole pod in one process: every chip a thread, every link through memory
// (still paced and clocked like any other link). The reference transport of
// the core tests and the "all memory" case of the data-path benchmark.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "core/collective/report.h"
#include "core/collective/host.h"
#include "core/matmul/host.h"
#include "core/matmul/report.h"
#include "core/wire/host_network.h"

namespace tpuemu {

class InProcessPod : public Fabric {
 public:
  InProcessPod(const Topology& topo, double time_scale);
  absl::Status Deliver(Frame&& frame) override;
  absl::StatusOr<CollectiveReport> Run(const CollectiveSpec& spec);
  absl::StatusOr<MatmulReport> RunMatmul(const MatmulSpec& spec);
  HostNetwork& network() { return *net_; }

 private:
  Topology topo_;
  std::unique_ptr<HostNetwork> net_;
  uint64_t next_job_ = 1;
};

}  // namespace tpuemu
