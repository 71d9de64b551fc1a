// What a worker process counts about itself (issue 20), for the Prometheus
// text its --http-port serves at /metrics: jobs and steps it ran, calls that
// failed, aborts, frames other hosts sent it, and the emulated bytes its
// chips put on their links. The gauges (chips, links, memory, the running
// job) are read when scraped. Counters start at zero with the process.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/cluster/worker_interface.h"
#include "core/host/chip_result.h"
#include "core/pod/topology.h"

namespace tpuemu {

class WorkerMetrics {
 public:
  // The calls of the worker contract that do a job's work.
  enum Call { kPrepare = 0, kRun, kCheck, kNumCalls };

  void Succeeded(Call call) { calls_[call].fetch_add(1, std::memory_order_relaxed); }
  void Failed(Call call) { failures_[call].fetch_add(1, std::memory_order_relaxed); }
  void Aborted() { aborts_.fetch_add(1, std::memory_order_relaxed); }
  void FrameReceived(uint64_t payload_bytes) {
    frames_.fetch_add(1, std::memory_order_relaxed);
    frame_bytes_.fetch_add(payload_bytes, std::memory_order_relaxed);
  }
  // A step's (or a collective's, or a matmul's) results on this host's chips.
  void StepRan(const std::vector<ChipRunResult>& chips);

  // The text, with this host's place, chips and links (`topo` null before
  // the pod was configured) and its state as `status` says.
  std::string Text(const WorkerStatusView& status, const Topology* topo) const;

 private:
  std::array<std::atomic<uint64_t>, kNumCalls> calls_{};
  std::array<std::atomic<uint64_t>, kNumCalls> failures_{};
  std::atomic<uint64_t> aborts_{0};
  std::atomic<uint64_t> frames_{0};
  std::atomic<uint64_t> frame_bytes_{0};
  std::atomic<uint64_t> ici_bytes_{0};
  std::atomic<uint64_t> dcn_bytes_{0};
};

}  // namespace tpuemu
