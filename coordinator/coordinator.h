// The coordinator: its registry of workers (registry.h), its jobs' records
// (job_store.h) and the scheduler that runs them over the worker contract
// (scheduler.h), behind the face services/coordinator_service.cc serves. The
// parts hold domain types; tpuemu.v1 messages are made here, at that face.
#pragma once

#include <memory>

#include "coordinator/job_store.h"
#include "coordinator/registry.h"
#include "coordinator/scheduler.h"
#include "core/pod/pod_config.h"
#include "services/coordinator_service.h"

namespace tpuemu {

struct CoordinatorOptions {
  TopologyRequest topology;
  double time_scale = 0;
  // How long a worker may go without a heartbeat (and, once asked, without
  // answering) before it is lost: registry.h, liveness.h.
  absl::Duration heartbeat_timeout = absl::Seconds(3);
  JobRetention retention;
  // Where the job store lives (coordinator/job_database.h); empty: in
  // memory only, gone with the process.
  std::string data_dir;
  // The DCN fabric's R:1 (core/pod/dcn_fabric.h): 1, none of the jobs'
  // DCN traffic waits for another's.
  double dcn_oversubscription = 1;
};

class Coordinator : public CoordinatorBackend {
 public:
  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(const CoordinatorOptions& options,
                                                             Registry::ClientFactory factory);
  // What Create checks beyond the topology (for --check-config).
  static absl::Status Validate(const CoordinatorOptions& options);
  ~Coordinator() override;

  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(const v1::RegisterWorkerRequest& request) override;
  absl::Status Heartbeat(int global_host, uint64_t incarnation, uint64_t resident_bytes) override;
  std::vector<uint64_t> ForgottenJobs(const std::vector<uint64_t>& jobs) override;
  v1::ClusterStatus ClusterStatus() override;
  absl::StatusOr<v1::Job> SubmitJob(const v1::SubmitJobRequest& request) override;
  absl::StatusOr<v1::Job> GetJob(const std::string& id) override;
  v1::ListJobsResponse ListJobs() override;
  absl::StatusOr<std::pair<v1::Job, int64_t>> WaitJob(const std::string& id, int64_t after_version,
                                                      absl::Duration timeout) override;
  absl::StatusOr<v1::Job> CancelJob(const std::string& id) override;
  absl::StatusOr<v1::AddFaultsResponse> AddFaults(const v1::AddFaultsRequest& request) override;
  absl::StatusOr<v1::Job> ResumeJob(const std::string& id) override;
  absl::StatusOr<std::unique_ptr<JobTraceReader>> ReadJobTrace(const std::string& id, int64_t latest_steps) override;

  // The pod's metrics in Prometheus' text format (coordinator/metrics.h):
  // jobs by state, the queue, workers' liveness and memory, finished steps.
  std::string MetricsText() const;

  // Stops taking jobs (SIGTERM): scheduler.h says what becomes of the queue.
  void Drain(const std::string& why);

  const Topology& topology() const { return topo_; }

 private:
  Coordinator(const CoordinatorOptions& options, const Topology& topo, Registry::ClientFactory factory,
              std::unique_ptr<JobDatabase> db);
  // The store's records read back: jobs that were running are interrupted,
  // pending ones planned again on this pod and queued.
  absl::Status RestoreJobs();
  // A training job file's text, read and checked (SubmitJobRequest.train_yaml).
  static absl::StatusOr<JobSpec> TrainJobFromText(const std::string& yaml);
  // A spec planned on this pod.
  absl::StatusOr<std::shared_ptr<const PlannedJob>> Plan(const JobSpec& spec) const;
  // A record as users see it, with its place in the queue.
  v1::Job Published(const JobRecord& record) const;

  const CoordinatorOptions options_;
  const Topology topo_;
  JobStore store_;
  Registry registry_;
  // After store_ and registry_, which it uses: destroyed (its threads joined) first.
  Scheduler scheduler_;
};

}  // namespace tpuemu
