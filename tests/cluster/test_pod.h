// A whole pod in one test process over real gRPC: a Coordinator and one
// WorkerNode per host, each with its own server on a free port, talking over
// loopback exactly as separate processes would.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "coordinator/coordinator.h"
#include "services/coordinator_service.h"
#include "services/peer_service.h"
#include "services/server.h"
#include "worker/worker_node.h"

namespace tpuemu {

class TestPod {
 public:
  TestPod(const TopologyRequest& topology, double time_scale, const JobRetention& retention = {});
  ~TestPod();

  Coordinator& coordinator() { return *coordinator_; }
  int num_workers() const { return static_cast<int>(workers_.size()); }
  // Serves the coordinator over gRPC (as tpuemu-coordinator does) on a free
  // port, for clients; its address.
  std::string ServeCoordinator();
  // Submits and waits; the job as the coordinator finished it.
  v1::Job Run(const CollectiveSpec& spec);
  v1::Job Run(const MatmulSpec& spec);
  v1::Job Run(const TrainSpec& spec);
  absl::StatusOr<v1::Job> Submit(const CollectiveSpec& spec);
  absl::StatusOr<v1::Job> Submit(const MatmulSpec& spec);
  absl::StatusOr<v1::Job> Submit(const TrainSpec& spec);
  v1::Job Wait(const std::string& id);
  // A job's trace, its pieces read from the coordinator and put together.
  absl::StatusOr<v1::JobTrace> Trace(const std::string& id);

 private:
  v1::Job Finish(const absl::StatusOr<v1::Job>& job);
  struct Worker {
    std::unique_ptr<WorkerNode> node;
    std::unique_ptr<WorkerServiceImpl> service;
    std::unique_ptr<PeerServiceImpl> peer;
    RunningServer server;
  };
  std::unique_ptr<Coordinator> coordinator_;
  std::vector<Worker> workers_;
  std::unique_ptr<CoordinatorServiceImpl> coordinator_service_;
  RunningServer coordinator_server_;
};

}  // namespace tpuemu
