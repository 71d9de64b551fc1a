#include "coordinator/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/fan_out.h"
#include "core/host/run_number.h"
#include "core/job/kinds.h"
#include "spdlog/spdlog.h"

namespace tpuemu {

Scheduler::Scheduler(JobStore& store, Registry& registry, int hosts, Planner plan)
    : store_(store), registry_(registry), hosts_(hosts), plan_(std::move(plan)) {
  watch_thread_ = std::thread([this] { WatchWorkersLoop(); });
  job_thread_ = std::thread([this] { JobLoop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    // A running job's calls may wait on a stopped worker for good.
    if (running_) running_->calls->Cancel();
  }
  cv_.notify_all();
  watch_thread_.join();
  job_thread_.join();
}

absl::StatusOr<JobRecord> Scheduler::Submit(JobSpec spec, const JobKind& kind,
                                            std::shared_ptr<const PlannedJob> planned) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!draining_.empty()) return absl::UnavailableError(absl::StrCat("the coordinator is not taking jobs: ", draining_));
  if (!registry_.Ready()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the pod is not ready: ", AliveWorkers(), " of ", hosts_,
        " workers registered and alive; see `tpuemu cluster status`, or restart it with `tpuemu cluster down` "
        "and `tpuemu cluster up`"));
  }
  auto record = store_.Add(spec);
  if (!record.ok()) return record.status();
  // What it will hold (training: its mesh and memory per chip), shown while it waits.
  if (JobReport preview = planned->Preview(); preview.has_value()) {
    store_.Update(record->id, [&](JobRecord& r) { r.summary = preview; });
    record->summary = std::move(preview);
  }
  queue_.push_back(Queued{record->id, record->number, 0, &kind, std::move(spec), std::move(planned)});
  cv_.notify_all();
  return record;
}

void Scheduler::Requeue(const JobRecord& record, std::shared_ptr<const PlannedJob> planned) {
  std::lock_guard<std::mutex> lock(mu_);
  const JobKind* kind = *FindJobKind(record.spec.kind());  // it was planned: its kind exists
  queue_.push_back(Queued{record.id, record.number, record.restarts, kind, record.spec, std::move(planned)});
  cv_.notify_all();
}

absl::StatusOr<JobRecord> Scheduler::Resume(const std::string& id, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!draining_.empty()) return absl::UnavailableError(absl::StrCat("the coordinator is not taking jobs: ", draining_));
  auto record = store_.Get(id);
  if (!record.ok()) return record.status();
  if (!IsFinished(record->state) || record->state == JobState::kSucceeded) {
    return absl::FailedPreconditionError(absl::StrCat(
        id, " is ", record->state == JobState::kSucceeded ? "finished: it succeeded" : "still pending or running",
        "; only a failed, cancelled or interrupted job resumes"));
  }
  if (auto s = ResumeLocked(*record, why); !s.ok()) return s;
  return store_.Get(id);
}

absl::Status Scheduler::ResumeLocked(const JobRecord& r, const std::string& why) {
  if (r.restarts + 1 >= kMaxAttempts) {
    return absl::FailedPreconditionError(
        absl::StrCat(r.id, " was resumed ", r.restarts, " times already, the most a job may be; submit it again"));
  }
  auto kind = FindJobKind(r.spec.kind());
  if (!kind.ok()) return kind.status();
  auto spec = (*kind)->Resumed(r.spec, r.checkpoint_step);
  if (!spec.ok()) return spec.status();
  auto planned = plan_(*spec);
  if (!planned.ok()) return planned.status();
  const int done = r.checkpoint_step;
  store_.Rewind(r.id, done, [&](JobRecord& job) {
    job.spec = *spec;
    job.state = JobState::kPending;
    job.restart_reason = absl::StrCat(why, "; from ", done > 0 ? absl::StrCat("the checkpoint after step ", done)
                                                                : std::string("the start (no checkpoint yet)"),
                                      r.error.empty() ? "" : absl::StrCat("; it had ended: ", r.error));
    job.error.clear();
    ++job.restarts;
  });
  queue_.push_back(Queued{r.id, r.number, r.restarts + 1, *kind, *std::move(spec), *std::move(planned)});
  cv_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<JobRecord> Scheduler::Cancel(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  CancelLocked(id, "cancelled by the user");
  return store_.Get(id);
}

void Scheduler::CancelLocked(const std::string& id, const std::string& why) {
  auto queued = std::find_if(queue_.begin(), queue_.end(), [&](const Queued& q) { return q.id == id; });
  if (queued != queue_.end()) {
    queue_.erase(queued);
    store_.Update(id, [&](JobRecord& r) {
      r.state = JobState::kCancelled;
      r.error = why;
    });
  } else if (running_ && running_->id == id) {
    EndRunningLocked(why, /*failed=*/false);
  }
}

void Scheduler::EndRunningLocked(const std::string& why, bool failed) {
  if (running_->end_requested) return;
  running_->end_requested = true;
  if (failed) {
    spdlog::warn("{} failed: {}", running_->id, why);
    store_.Update(running_->id, [&](JobRecord& r) { r.error = why; });
  } else {
    running_->cancel_why = why;
  }
  running_->calls->Cancel();
  for (const RegisteredWorker& w : registry_.Workers()) {
    aborts_.Send(w.host, w.incarnation, w.worker, running_->run, why);
  }
}

void Scheduler::Drain(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = why;
  if (store_.durable()) {
    keep_queue_ = true;
    if (running_) {
      running_->keep_record = true;
      EndRunningLocked(why, /*failed=*/false);
    }
    return;
  }
  std::vector<std::string> ids;
  for (const Queued& q : queue_) ids.push_back(q.id);
  if (running_) ids.push_back(running_->id);
  for (const std::string& id : ids) CancelLocked(id, why);
}

int Scheduler::jobs_running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ ? 1 : 0;
}

int Scheduler::AliveWorkers() const {
  int alive = 0;
  for (const RegisteredWorker& w : registry_.Workers()) alive += w.alive;
  return alive;
}

std::pair<int, std::string> Scheduler::QueuePlace(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(queue_.begin(), queue_.end(), [&](const Queued& q) { return q.id == id; });
  if (it == queue_.end()) return {0, ""};
  const int position = static_cast<int>(it - queue_.begin()) + 1;
  std::string why;
  if (running_) {
    why = absl::StrCat(running_->id, ", running on the whole pod");
  } else if (!registry_.Ready()) {
    why = absl::StrCat("the pod to be ready (", AliveWorkers(), " of ", hosts_, " workers registered and alive)");
  } else {
    why = "nothing: it is starting";
  }
  if (position > 1) why = absl::StrCat(why, ", then ", position - 1, " queued ahead of it (", queue_.front().id,
                                       position > 2 ? " first)" : ")");
  return {position, why};
}

void Scheduler::WatchWorkersLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(200));
    if (stop_) return;
    if (!running_) continue;
    if (auto lost = registry_.FirstLost()) {
      running_->worker_lost = true;
      EndRunningLocked(*lost, /*failed=*/true);
    }
  }
}

void Scheduler::JobLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    // A job starts once every worker is alive and configured: after a worker
    // is lost the queue waits for it to come back (or be replaced) rather
    // than fail job after job. Liveness lapses without a notify: look again
    // every tick.
    while (!stop_ && (queue_.empty() || !registry_.Ready() || keep_queue_)) {
      cv_.wait_for(lock, std::chrono::milliseconds(200));
    }
    if (stop_) return;
    const Queued job = std::move(queue_.front());
    queue_.pop_front();
    running_ = std::make_unique<Running>(
        Running{.id = job.id, .run = RunNumber(job.number, job.attempt), .calls = std::make_shared<Cancellation>()});
    store_.Update(job.id, [](JobRecord& r) { r.state = JobState::kRunning; });
    const std::shared_ptr<Cancellation> calls = running_->calls;
    lock.unlock();
    absl::StatusOr<JobReport> summary = Run(job, *calls);
    lock.lock();
    const std::unique_ptr<Running> ended = std::move(running_);
    if (ended->keep_record) continue;
    // A lost worker: the job goes on from its latest checkpoint once the
    // worker is back (the queue waits for the pod to be ready), if it may.
    // Straight from running to pending: a client following it never sees it fail.
    if (!summary.ok() && ended->worker_lost && TryRestartLocked(job, summary.status())) continue;
    store_.Update(job.id, [&](JobRecord& r) {
      if (summary.ok()) {
        r.state = JobState::kSucceeded;
        if (summary->has_value()) r.summary = *std::move(summary);
      } else if (ended->end_requested && r.error.empty()) {
        r.state = JobState::kCancelled;
        r.error = ended->cancel_why;
      } else {
        r.state = JobState::kFailed;
        if (r.error.empty()) r.error = std::string(summary.status().message());
      }
    });
  }
}

bool Scheduler::TryRestartLocked(const Queued& job, const absl::Status& failure) {
  auto record = store_.Get(job.id);
  if (!record.ok() || record->restarts >= job.planned->max_restarts()) return false;
  if (record->error.empty()) record->error = std::string(failure.message());
  const absl::Status resumed = ResumeLocked(
      *record, absl::StrCat("restart ", record->restarts + 1, " of ", job.planned->max_restarts(), " (max_restarts)"));
  if (!resumed.ok()) spdlog::warn("{} could not resume: {}", job.id, std::string(resumed.message()));
  return resumed.ok();
}

absl::StatusOr<JobReport> Scheduler::Run(const Queued& job, Cancellation& calls) {
  // What the job will hold (training: per chip), published before the first step.
  if (JobReport preview = job.planned->Preview(); preview.has_value()) {
    store_.Update(job.id, [&](JobRecord& r) { r.summary = preview; });
  }
  // A cancel takes effect between steps (and aborts the step in flight).
  std::vector<ChipRunResult> last;
  double traced_until_s = 0;  // where the next step's spans start
  FanOutCalls fan;
  fan.job = RunNumber(job.number, job.attempt);
  fan.spec = &job.spec;
  fan.first_step = job.planned->first_step();
  fan.steps = job.planned->steps();
  fan.calls = &calls;
  fan.on_step = [&](int step, std::vector<ChipRunResult>&& chips) {
    last = std::move(chips);
    return PublishStep(job, step, last, traced_until_s);
  };
  fan.on_failure = [&](int host, const absl::Status& failure) { return WorkerFailed(job, host, failure); };
  std::vector<ChipCheck> checks;
  std::vector<HostMemoryUse> memory;
  if (auto s = FanOut(registry_.Workers(), fan, checks, memory); !s.ok()) return s;
  store_.Update(job.id, [&](JobRecord& r) { r.worker_memory = std::move(memory); });
  return job.planned->Summarize(last, checks);
}

absl::Status Scheduler::PublishStep(const Queued& job, int step, const std::vector<ChipRunResult>& chips,
                                    double& traced_until_s) {
  JobReport report = job.planned->SummarizeStep(chips);
  if (job.kind->traced()) {
    store_.AddTraceStep(job.id, step, traced_until_s, chips);
    // The next step's spans start where this one's slowest chip ended.
    double step_s = 0;
    for (const ChipRunResult& c : chips) step_s = std::max(step_s, c.emulated_s);
    traced_until_s += step_s;
  }
  if (report.has_value()) store_.AddStep(job.id, std::move(report));
  // Every worker ran the step, so every host wrote its chips' checkpoint.
  if (job.planned->CheckpointAfter(step)) store_.Update(job.id, [&](JobRecord& r) { r.checkpoint_step = step + 1; });
  std::lock_guard<std::mutex> lock(mu_);
  if (running_->end_requested) return absl::CancelledError("cancelled by the user");
  return absl::OkStatus();
}

absl::Status Scheduler::WorkerFailed(const Queued& job, int host, const absl::Status& failure) {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_->calls->cancelled()) {
    // Cut short because the job was ended (a worker lost, a cancel): not this worker's failure.
    return absl::CancelledError(absl::StrCat(job.id, " was ended"));
  }
  absl::Status error;
  if (failure.code() == absl::StatusCode::kUnavailable) {
    // Count it as gone now rather than after its heartbeats lapse.
    const std::string because = absl::StrCat("the connection to it was reset or closed (", failure.message(), ")");
    registry_.MarkLost(host, because);
    running_->worker_lost = true;
    error = absl::UnavailableError(absl::StrCat(registry_.WorkerName(host), " was lost: ", because));
  } else {
    error = absl::Status(failure.code(), absl::StrCat(registry_.WorkerName(host), " failed: ", failure.message()));
  }
  EndRunningLocked(std::string(error.message()), /*failed=*/true);
  return error;
}

}  // namespace tpuemu
