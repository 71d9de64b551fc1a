// One emulated TPU host: its chips, their links (paced, clocked) and the
// gRPC fabric to the other hosts. Runs its chips' share of each job.
#pragma once

#include <memory>
#include <mutex>

#include <map>

#include "core/host_network.h"
#include "core/host_job.h"
#include "services/grpc_fabric.h"
#include "services/worker_service.h"

namespace tpuemu {

class WorkerNode : public WorkerBackend {
 public:
  explicit WorkerNode(int global_host) : host_(global_host) {}
  void set_global_host(int host);

  absl::Status Configure(const PodConfig& config) override;
  absl::Status PrepareJob(uint64_t job, const JobSpec& spec) override;
  absl::StatusOr<std::vector<ChipRunResult>> RunJob(uint64_t job, const JobSpec& spec) override;
  absl::StatusOr<std::vector<ChipCheck>> CheckJob(uint64_t job) override;
  void Abort(uint64_t job, const std::string& reason) override;
  WorkerStatusView Status() override;

  // PeerService hands every received frame here.
  void DeliverPeerFrame(Frame&& frame);

 private:
  struct Pod {
    Topology topo;
    std::unique_ptr<GrpcFabric> fabric;
    std::unique_ptr<HostNetwork> net;
  };
  std::shared_ptr<Pod> pod();

  std::mutex mu_;
  int host_;
  std::shared_ptr<Pod> pod_;
  uint64_t running_job_ = 0;
  std::shared_ptr<HostJob> FindJob(uint64_t job);
  // Prepared jobs, until they are checked or aborted (training jobs run a
  // step per RunJob in between).
  std::map<uint64_t, std::shared_ptr<HostJob>> jobs_;
  std::mutex run_mu_;  // one job at a time
};

}  // namespace tpuemu
