// A whole pod in one test process over real gRPC: a Coordinator and one
// WorkerNode per host, each with its own server on a free port, talking over
// loopback exactly as separate processes would.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

#include "coordinator/coordinator.h"
#include "core/collective/spec.h"
#include "core/matmul/spec.h"
#include "core/train/job.h"
#include "services/coordinator_service.h"
#include "services/peer_service.h"
#include "services/server.h"
#include "services/worker_service.h"
#include "worker/worker_node.h"

namespace tpuemu {

struct TestPodOptions {
  // Finite: a thread heartbeats for every worker that is not stopped, as
  // their sessions would, every tenth of this.
  absl::Duration heartbeat_timeout = absl::InfiniteDuration();
  JobRetention retention;
  double dcn_oversubscription = 1;  // the coordinator's (core/pod/dcn_fabric.h)
};

class TestPod {
 public:
  TestPod(const TopologyRequest& topology, double time_scale, const TestPodOptions& options = {});
  ~TestPod();

  Coordinator& coordinator() { return *coordinator_; }
  int num_workers() const { return static_cast<int>(workers_.size()); }
  // Serves the coordinator over gRPC (as tpuemu-coordinator does) on a free
  // port, for clients; its address.
  std::string ServeCoordinator();
  WorkerNode& node(int host) { return *workers_[host].node; }
  std::string address(int host) const;
  uint64_t incarnation(int host) const { return workers_[host].incarnation; }
  // As SIGSTOP and SIGCONT do to a worker process: while stopped it sends no
  // heartbeats and every call to it waits (its chips already running go on).
  void Stop(int host);
  void Resume(int host);
  // Its heartbeats stop, but it answers every call: as a worker starved of
  // CPU whose heartbeats arrive late (or the coordinator handles late).
  void MuteHeartbeats(int host);
  // As a process that exited: its server stops, closing its connections.
  void Kill(int host);
  // Submits and waits; the job as the coordinator finished it.
  v1::Job Run(const CollectiveSpec& spec);
  v1::Job Run(const MatmulSpec& spec);
  v1::Job Run(const TrainSpec& spec);
  absl::StatusOr<v1::Job> Submit(const CollectiveSpec& spec);
  absl::StatusOr<v1::Job> Submit(const MatmulSpec& spec);
  absl::StatusOr<v1::Job> Submit(const TrainSpec& spec, int priority = 0);
  v1::Job Wait(const std::string& id);
  // Waits until job `id` has finished `steps` steps (or ended).
  v1::Job WaitForSteps(const std::string& id, int steps);
  // A job's trace, its pieces read from the coordinator and put together.
  absl::StatusOr<v1::JobTrace> Trace(const std::string& id);

 private:
  v1::Job Finish(const absl::StatusOr<v1::Job>& job);
  void HeartbeatLoop(absl::Duration every);

  // Its WorkerService's way into the node: every call waits first while the
  // worker is stopped.
  class StoppableWorker : public WorkerInterface {
   public:
    explicit StoppableWorker(WorkerInterface* worker) : worker_(worker) {}
    void SetStopped(bool stopped);
    bool stopped() const;
    absl::Status Configure(uint64_t incarnation, const PodConfig& config) override;
    absl::Status PrepareJob(uint64_t incarnation, uint64_t job, const JobSpec& spec, const Placement& placement,
                            Cancellation& cancel) override;
    absl::StatusOr<std::vector<ChipRunResult>> RunJob(uint64_t incarnation, uint64_t job, int step,
                                                      const Faults& added, Cancellation& cancel) override;
    absl::StatusOr<HostCheck> CheckJob(uint64_t incarnation, uint64_t job, Cancellation& cancel) override;
    absl::Status Abort(uint64_t incarnation, uint64_t job, const std::string& reason, absl::Duration timeout) override;
    absl::StatusOr<WorkerStatusView> Status(absl::Duration timeout) override;

   private:
    void WaitWhileStopped() const;
    WorkerInterface* worker_;
    mutable std::mutex mu_;
    mutable std::condition_variable resumed_;
    bool stopped_ = false;
  };
  struct Worker {
    std::unique_ptr<PeerServiceImpl> peer;  // outlives the node, whose fabric uses its queue
    std::unique_ptr<WorkerNode> node;
    std::unique_ptr<StoppableWorker> stoppable;
    std::unique_ptr<WorkerServiceImpl> service;
    RunningServer server;
    uint64_t incarnation = 0;
    bool muted = false;  // no heartbeats (MuteHeartbeats, Kill); under heartbeat_mu_
  };
  std::unique_ptr<Coordinator> coordinator_;
  std::vector<Worker> workers_;
  std::unique_ptr<CoordinatorServiceImpl> coordinator_service_;
  RunningServer coordinator_server_;
  std::mutex heartbeat_mu_;
  std::condition_variable heartbeat_cv_;
  bool stop_heartbeats_ = false;
  std::thread heartbeats_;
};

}  // namespace tpuemu
