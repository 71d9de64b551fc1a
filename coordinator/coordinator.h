// The coordinator's logic: a queue of jobs (collectives, matmuls, training)
// fanned out over the worker contract to every worker its registry holds. No
// gRPC server here; services/coordinator_service.cc exposes it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "coordinator/abort_delivery.h"
#include "coordinator/bounded_trace.h"
#include "coordinator/registry.h"
#include "core/base/cancellation.h"
#include "core/host/job_kind.h"
#include "core/pod/pod_config.h"
#include "services/coordinator_service.h"

namespace tpuemu {

// What the coordinator keeps of jobs, so that its memory stays bounded
// however many jobs run and however long (docs/jobs.md, "What the
// coordinator keeps"). A kept span costs about 40 bytes.
struct JobRetention {
  int64_t trace_spans_per_job = 1'000'000;  // a job's trace: its latest steps' spans, at most this many
  int64_t trace_spans_total = 2'000'000;    // all traces: the oldest finished jobs' go first
  int step_records_per_job = 1'000;         // a job's step records: its latest steps'
  int finished_jobs = 100;                  // finished jobs' records: the oldest go first
};

struct CoordinatorOptions {
  TopologyRequest topology;
  double time_scale = 0;
  absl::Duration heartbeat_timeout = absl::Seconds(3);
  JobRetention retention;
};

class Coordinator : public CoordinatorBackend {
 public:
  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(const CoordinatorOptions& options,
                                                             Registry::ClientFactory factory);
  // What Create checks beyond the topology (for --check-config).
  static absl::Status Validate(const CoordinatorOptions& options);
  ~Coordinator() override;

  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(const v1::RegisterWorkerRequest& request) override;
  absl::Status Heartbeat(int global_host, uint64_t incarnation) override;
  v1::ClusterStatus ClusterStatus() override;
  absl::StatusOr<v1::Job> SubmitJob(const v1::SubmitJobRequest& request) override;
  absl::StatusOr<v1::Job> GetJob(const std::string& id) override;
  v1::ListJobsResponse ListJobs() override;
  absl::StatusOr<std::pair<v1::Job, int64_t>> WaitJob(const std::string& id, int64_t after_version,
                                                      absl::Duration timeout) override;
  absl::StatusOr<v1::Job> CancelJob(const std::string& id) override;
  absl::StatusOr<std::unique_ptr<JobTraceReader>> ReadJobTrace(const std::string& id) override;

  // Stops taking jobs and cancels the queued and running ones (SIGTERM).
  void Drain(const std::string& why);

  const Topology& topology() const { return topo_; }

 private:
  struct JobEntry {
    explicit JobEntry(int64_t trace_spans = 0) : trace(trace_spans) {}
    v1::Job job;
    uint64_t number = 0;
    int64_t version = 0;
    bool cancel_requested = false;
    std::string cancel_why;       // a running job cancelled: the reason it ends with
    BoundedTrace trace;           // traced kinds' jobs (training): their latest steps' spans
    double traced_until_s = 0;    // where the next step's spans start
    const JobKind* kind = nullptr;
    // Checked and planned once, at submit; dropped once the job has run.
    std::optional<JobSpec> spec;
    std::shared_ptr<const PlannedJob> planned;
  };

  Coordinator(const CoordinatorOptions& options, const Topology& topo, Registry::ClientFactory factory);
  // A worker that stops heartbeating fails the running job: its calls may
  // hang (a stopped process) rather than fail.
  void WatchWorkersLoop();
  void JobLoop();
  void CancelLocked(JobEntry& entry, const std::string& why);
  // Ends the running job now, as a failure (`why` is its error) or a cancel:
  // its calls in flight are cancelled (a stopped worker's would never
  // return) and every worker is told to abort it.
  void EndRunningLocked(JobEntry& entry, const std::string& why, bool failed);
  void UpdateJobLocked(JobEntry& entry, const std::function<void(v1::Job&)>& change);
  // Keeping memory bounded (options_.retention): a job that just finished
  // joins finished_, whose oldest records go past the cap; traces past the
  // pod-wide budget are dropped, the oldest finished jobs' first.
  void RetireLocked(const std::string& id);
  void AddTraceStepLocked(JobEntry& entry, int64_t step, const std::vector<ChipRunResult>& chips);
  // A job that is not there: never submitted, or its record dropped.
  absl::Status MissingJobLocked(const std::string& id) const;
  // Runs outside the lock, whatever its kind, and fills in its summary.
  // `calls` is cancelled when the job is ended early.
  absl::Status RunJob(const std::string& id, uint64_t number, const JobKind& kind, const JobSpec& spec,
                      const PlannedJob& planned, JobReport& summary, Cancellation& calls);
  // Publishes a finished step at once, so that `watch` sees it: its
  // figures and trace spans, if the kind has them.
  absl::Status PublishStep(const std::string& id, const JobKind& kind, const PlannedJob& planned, int step,
                           const std::vector<ChipRunResult>& chips);
  // Gets every step's results from all workers; a non-OK return stops the job.
  using StepSink = std::function<absl::Status(int step, std::vector<ChipRunResult>&& chips)>;
  // Prepare on every worker, Run `steps` times, then Check; the first
  // failure aborts all.
  absl::Status FanOut(const std::string& id, uint64_t job, const JobSpec& spec, int steps, const StepSink& on_step,
                      std::vector<ChipCheck>& checks, Cancellation& calls);

  const CoordinatorOptions options_;
  const Topology topo_;
  Registry registry_;

  mutable std::mutex mu_;  // taken before registry_'s own
  std::condition_variable cv_;
  std::map<std::string, JobEntry> jobs_;
  std::deque<std::string> finished_;    // finished jobs kept, oldest first
  uint64_t finished_dropped_ = 0;       // finished jobs' records dropped
  int64_t trace_spans_ = 0;             // kept in all jobs' traces
  std::deque<std::string> queue_;
  std::string running_;                 // id of the running job, if any
  std::shared_ptr<Cancellation> running_calls_;  // the running job's calls to workers
  uint64_t next_job_ = 1;
  bool stop_ = false;
  std::string draining_;                // why new jobs are refused, once shutting down
  // After registry_, which it reads: destroyed (its threads joined) first.
  AbortDelivery aborts_{[this](int host, uint64_t incarnation) { return registry_.Holds(host, incarnation); }};
  std::thread watch_thread_;
  std::thread job_thread_;
};

}  // namespace tpuemu
