// The pods a transport-neutral test runs on (as Arrow Flight's suites run over
// every transport): the same coordinator with its workers either in-process
// (called through the worker contract, chips talking over an in-memory
// fabric: no servers, no ports) or over real gRPC on loopback (TestPod).
#pragma once

#include <memory>
#include <string>

#include "coordinator/coordinator.h"

namespace tpuemu {

class PodTransport {
 public:
  virtual ~PodTransport() = default;
  virtual Coordinator& coordinator() = 0;
  // Submits and waits; the job as the coordinator finished it (a refused
  // submit fails the test and returns an empty job).
  v1::Job Run(const v1::SubmitJobRequest& request);
};

enum class Transport { kInProcess, kGrpc };
std::string TransportName(Transport transport);

// A ready pod of `topology` on `transport`, unpaced.
std::unique_ptr<PodTransport> MakePod(Transport transport, const TopologyRequest& topology);

}  // namespace tpuemu
