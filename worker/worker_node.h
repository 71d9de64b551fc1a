// One emulated TPU host: its chips, their links (paced, clocked) and the
// gRPC fabric to the other hosts. Runs its chips' share of each job.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "core/wire/host_network.h"
#include "core/host/job_kind.h"
#include "services/grpc_fabric.h"
#include "services/worker_service.h"

namespace tpuemu {

class WorkerNode : public WorkerBackend {
 public:
  explicit WorkerNode(int global_host) : host_(global_host) {}
  // The place and incarnation the coordinator gave this process's latest
  // registration: calls meant for another incarnation are refused.
  void set_registration(int global_host, uint64_t incarnation);
  // Until set_registration: calls wait (2 s at most) for the registration's
  // answer, which the coordinator's first calls may overtake.
  void AwaitRegistration();

  absl::Status CheckIncarnation(uint64_t incarnation, const std::string& call) override;
  absl::Status Configure(const PodConfig& config) override;
  absl::Status PrepareJob(uint64_t job, const JobSpec& spec) override;
  absl::StatusOr<std::vector<ChipRunResult>> RunJob(uint64_t job, int step) override;
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
  struct PreparedJob {
    std::shared_ptr<HostJob> host;
    std::shared_ptr<JobAbort> abort;
  };
  std::shared_ptr<Pod> pod();
  std::shared_ptr<HostJob> FindJob(uint64_t job);
  // Stops the job's compute and wakes its receives.
  static void AbortPrepared(const PreparedJob& prepared, Pod& pod, uint64_t job, const std::string& reason);

  std::mutex mu_;
  std::condition_variable registered_;
  int host_;
  uint64_t incarnation_ = 0;  // 0 until the first registration is answered
  bool awaiting_registration_ = false;
  std::shared_ptr<Pod> pod_;
  uint64_t running_job_ = 0;
  // Prepared jobs, until they are checked or aborted (training jobs run a
  // step per RunJob in between).
  std::map<uint64_t, PreparedJob> jobs_;
  std::mutex run_mu_;  // one job at a time
};

}  // namespace tpuemu
