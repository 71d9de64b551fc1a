// Which job runs when and where: a queue of checked and planned jobs, each
// placed on the part of the pod it asks for (slices, and a block of hosts in
// each; the first free placement, lowest slice and chip first; the whole pod
// unless it asks for less), all or none of its hosts (gang scheduling),
// in queue order: a job waiting for chips that running jobs hold holds back
// those behind it, so a large job is never starved by small ones; one
// waiting for a lost worker does not (the worker may never come back). Jobs on
// disjoint hosts run at the same time, each fanned out over the worker
// contract (fan_out.h) to its own hosts. It ends a running job when one of
// its workers is lost, the user cancels it or the coordinator drains, and
// records every change in the job store.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "coordinator/abort_delivery.h"
#include "coordinator/job_store.h"
#include "coordinator/metrics.h"
#include "coordinator/registry.h"
#include "core/base/cancellation.h"
#include "core/host/job_kind.h"
#include "core/pod/dcn_fabric.h"
#include "core/pod/placement.h"

namespace tpuemu {

class Scheduler {
 public:
  // Plans a spec on the pod (a resumed job's, again).
  using Planner = std::function<absl::StatusOr<std::shared_ptr<const PlannedJob>>(const JobSpec&)>;
  Scheduler(JobStore& store, Registry& registry, const Topology& pod, DcnFabric fabric, Planner plan);
  // Stops taking jobs; the running jobs' calls are cancelled.
  ~Scheduler();

  // Queues a job of `kind` planned as `planned` (checked already), behind
  // the queued jobs of its priority or higher.
  absl::StatusOr<JobRecord> Submit(JobSpec spec, const JobKind& kind, std::shared_ptr<const PlannedJob> planned,
                                   int priority);
  // Queues again a pending job a restarted coordinator read back from its
  // store (planned again on this pod), behind those already queued of its
  // priority or higher. Refused for a checkpoint another mesh or pod wrote.
  absl::Status Requeue(const JobRecord& record, std::shared_ptr<const PlannedJob> planned);
  absl::StatusOr<JobRecord> Cancel(const std::string& id);
  // `tpuemu fault`: faults join running job `id` from `from_step` or the
  // first step not yet sent to its workers, whichever is later; returns them
  // as they will be in force (their steps moved).
  absl::StatusOr<Faults> AddFaults(const std::string& id, const Faults& faults, int from_step);
  // Queues a finished job again from its latest complete checkpoint (from
  // the start if it has none), `why` kept as its restart_reason: in priority
  // order, or (a job that was running when the coordinator stopped) `ahead`
  // of every queued job, whatever their priority. `automatic`: by
  // max_restarts, which caps these (the user's resumes do not count).
  absl::StatusOr<JobRecord> Resume(const std::string& id, const std::string& why, bool automatic = false,
                                   bool ahead = false);
  // Stops taking jobs (SIGTERM). With a durable store the queue stays as it
  // is and the running jobs are stopped with their records left running, so
  // that the next coordinator on the store interrupts or resumes them as
  // after a crash; without one, the queued and running jobs are cancelled.
  void Drain(const std::string& why);
  int jobs_running() const;
  int jobs_queued() const;
  // Every finished step's figures, for /metrics.
  const StepMetrics& step_metrics() const { return step_metrics_; }
  // A queued job's place (1: the next to start) and what it waits for;
  // {0, ""} for a job that is not queued.
  std::pair<int, std::string> QueuePlace(const std::string& id) const;

 private:
  struct Queued {
    std::string id;
    uint64_t number = 0;
    int attempt = 0;  // 0, then one more each time it is resumed
    const JobKind* kind = nullptr;
    JobSpec spec;
    std::shared_ptr<const PlannedJob> planned;
    // A job resumed from a checkpoint goes back where it ran: the workers
    // there wrote the checkpoint.
    std::optional<Placement> pinned;
    int priority = 0;
    bool ahead = false;  // running when the coordinator stopped: before every other queued job
  };
  struct Running {
    std::string id;
    uint64_t run = 0;  // the number workers know this attempt by (core/wire/run_number.h)
    Placement placement;
    std::vector<int> hosts;  // the pod's hosts of its placement
    bool holds(int host) const { return std::find(hosts.begin(), hosts.end(), host) != hosts.end(); }
    bool end_requested = false;
    // It ended because a worker, or a link between workers, was lost: max_restarts may resume it.
    bool worker_lost = false;
    bool keep_record = false;  // stopped by a durable drain: its record stays as it was
    std::string cancel_why;  // a cancelled job: the reason it ends with
    std::shared_ptr<Cancellation> calls;  // its calls to workers
    std::shared_ptr<const PlannedJob> planned;
    int next_step = 0;  // the first step not yet sent to its workers
    std::thread thread;  // runs it
  };

  // Queues `job` behind every queued job of its priority or higher.
  void EnqueueLocked(Queued job);
  // Starts queued jobs as they fit, in order.
  void JobLoop();
  // Where `job` may run: its checkpoint's placement, or every one its part fits.
  std::vector<Placement> PlacementsOf(const Queued& job) const;
  // Where `job` would run now, if it fits.
  std::optional<Placement> FreePlacementLocked(const Queued& job) const;
  // Every placement `job` may take has a lost (or unconfigured) worker.
  bool WaitsForLostWorkerLocked(const Queued& job) const;
  // The first queued job before `until` that does not wait for a lost
  // worker (it holds back those behind it), or `until`.
  std::deque<Queued>::const_iterator HoldingBackLocked(std::deque<Queued>::const_iterator until) const;
  // The queued job to start now, and where.
  std::optional<std::pair<std::deque<Queued>::iterator, Placement>> NextToStartLocked();
  // Runs `job` on its placement, then records how it ended.
  void RunJobThread(const Queued& job, Running* running);
  // Workers registered and alive now, for "not ready" messages.
  int AliveWorkers() const;
  // A worker that stops heartbeating fails the job running on it: its calls
  // may hang (a stopped process) rather than fail.
  void WatchWorkersLoop();
  void CancelLocked(const std::string& id, const std::string& why);
  // Queues job `r` again from its latest checkpoint, `why` recorded as the reason.
  absl::Status ResumeLocked(const JobRecord& r, const std::string& why, bool automatic, bool ahead);
  // A job that ended with `failure` because a worker was lost: queued again
  // from its checkpoint if max_restarts allows (true), else left to fail.
  bool TryRestartLocked(const Queued& job, const absl::Status& failure);
  // Ends a running job now, as a failure (`reason` is its error, naming the
  // job's own worker faults that fired if a worker was lost) or a cancel:
  // its calls in flight are cancelled (a stopped worker's would never
  // return) and each of its workers is told to abort it.
  void EndRunningLocked(Running& job, const std::string& reason, bool failed);
  // Runs outside the lock, whatever its kind; returns its summary.
  absl::StatusOr<JobReport> Run(const Queued& job, const Running& running);
  // Publishes a finished step at once, so that `watch` sees it: its figures
  // and trace spans, if the kind has them.
  absl::Status PublishStep(const Queued& job, int step, const std::vector<ChipRunResult>& chips);
  // A worker's call failed: the job ends with the error this returns.
  absl::Status WorkerFailed(const Queued& job, int host, const absl::Status& failure);

  JobStore& store_;
  Registry& registry_;
  const Topology pod_;
  // This coordinator's epoch in its runs' numbers (core/wire/run_number.h), drawn at start.
  const uint32_t run_epoch_;
  const DcnFabric fabric_;  // what multislice jobs running at once share
  const Planner plan_;
  StepMetrics step_metrics_;
  mutable std::mutex mu_;  // taken before store_'s and registry_'s own
  std::condition_variable cv_;
  std::deque<Queued> queue_;
  std::map<std::string, std::unique_ptr<Running>> running_;  // by id
  std::vector<std::thread> ended_threads_;  // of jobs that ended, to join
  bool stop_ = false;
  std::string draining_;  // why new jobs are refused, once shutting down
  bool keep_queue_ = false;  // a durable drain: nothing more starts, the queue stays recorded
  // After registry_, which it reads: destroyed (its threads joined) before it.
  AbortDelivery aborts_{[this](int host, uint64_t incarnation) { return registry_.Holds(host, incarnation); }};
  std::thread watch_thread_;
  std::thread job_thread_;
};

}  // namespace tpuemu
