#include "coordinator/coordinator.h"

#include <malloc.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/job/kinds.h"
#include "services/cluster_conv.h"
#include "services/job_proto.h"
#include "services/proto_conv.h"
#include "spdlog/spdlog.h"

namespace tpuemu {
namespace {

double UnixSeconds() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

}  // namespace

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(const CoordinatorOptions& options,
                                                                 Registry::ClientFactory factory) {
  auto topo = Topology::Create(options.topology);
  if (!topo.ok()) return topo.status();
  if (auto s = Validate(options); !s.ok()) return s;
  return std::unique_ptr<Coordinator>(new Coordinator(options, *topo, std::move(factory)));
}

absl::Status Coordinator::Validate(const CoordinatorOptions& options) {
  if (options.time_scale < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--time-scale ", options.time_scale,
                                                   ": must be 0 (unpaced) or a positive stretch factor"));
  }
  const JobRetention& r = options.retention;
  if (r.finished_jobs < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--keep-finished-jobs ", r.finished_jobs,
                                                   ": must be at least 1 (the latest finished job is kept)"));
  }
  if (r.trace_spans_per_job < 1 || r.trace_spans_total < r.trace_spans_per_job || r.step_records_per_job < 1 ||
      r.finished_jobs < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job retention: trace_spans_per_job ", r.trace_spans_per_job, ", trace_spans_total ", r.trace_spans_total,
        ", step_records_per_job ", r.step_records_per_job, ", finished_jobs ", r.finished_jobs,
        ": each must be at least 1, and trace_spans_total at least trace_spans_per_job"));
  }
  return absl::OkStatus();
}

Coordinator::Coordinator(const CoordinatorOptions& options, const Topology& topo, Registry::ClientFactory factory)
    : options_(options),
      topo_(topo),
      registry_(topo, PodConfig{options.topology, options.time_scale, {}}, options.heartbeat_timeout,
                std::move(factory)) {
  watch_thread_ = std::thread([this] { WatchWorkersLoop(); });
  job_thread_ = std::thread([this] { JobLoop(); });
}

Coordinator::~Coordinator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    // A running job's calls may wait on a stopped worker for good.
    if (running_calls_) running_calls_->Cancel();
  }
  cv_.notify_all();
  watch_thread_.join();
  job_thread_.join();
}

absl::StatusOr<v1::RegisterWorkerResponse> Coordinator::RegisterWorker(const v1::RegisterWorkerRequest& request) {
  auto place = registry_.RegisterWorker(FromProto(request));
  if (!place.ok()) return place.status();
  v1::RegisterWorkerResponse response = ToProto(*place);
  *response.mutable_spec() = ToProto(options_.topology, options_.time_scale);
  return response;
}

absl::Status Coordinator::Heartbeat(int global_host, uint64_t incarnation) {
  return registry_.Heartbeat(global_host, incarnation);
}

v1::ClusterStatus Coordinator::ClusterStatus() {
  v1::ClusterStatus s;
  *s.mutable_spec() = ToProto(options_.topology, options_.time_scale);
  s.set_description(topo_.Describe());
  s.set_expected_workers(topo_.num_hosts());
  s.set_chips(topo_.num_chips());
  for (const RegisteredWorker& w : registry_.Workers()) {
    v1::WorkerInfo* info = s.add_workers();
    info->set_host(w.host);
    info->set_slice(w.slice);
    info->set_address(w.address);
    for (int chip : topo_.ChipsOfHost(w.host)) info->add_chips(chip);
    info->set_seconds_since_heartbeat(absl::ToDoubleSeconds(w.since_heartbeat));
    info->set_alive(w.alive);
  }
  s.set_ready(registry_.Ready());
  std::lock_guard<std::mutex> lock(mu_);
  s.set_jobs_running(running_.empty() ? 0 : 1);
  return s;
}

void Coordinator::WatchWorkersLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(200));
    if (stop_) return;
    if (running_.empty()) continue;
    if (auto lost = registry_.FirstLost()) EndRunningLocked(jobs_[running_], *lost, /*failed=*/true);
  }
}

absl::StatusOr<v1::Job> Coordinator::SubmitJob(const v1::SubmitJobRequest& request) {
  // Checked and planned now, once, so that bad input fails the submit, not a queued job.
  auto spec = JobSpecFromProto(request);
  if (!spec.ok()) return spec.status();
  auto kind = FindJobKind(spec->kind());
  if (!kind.ok()) return kind.status();
  auto planned = (*kind)->Plan(*spec, topo_, options_.time_scale);
  if (!planned.ok()) return planned.status();
  std::lock_guard<std::mutex> lock(mu_);
  if (!draining_.empty()) return absl::UnavailableError(absl::StrCat("the coordinator is not taking jobs: ", draining_));
  if (!registry_.Ready()) {
    int alive = 0;
    for (const RegisteredWorker& w : registry_.Workers()) alive += w.alive;
    return absl::FailedPreconditionError(absl::StrCat(
        "the pod is not ready: ", alive, " of ", topo_.num_hosts(),
        " workers registered and alive; see `tpuemu cluster status`, or restart it with `tpuemu cluster down` "
        "and `tpuemu cluster up`"));
  }
  JobEntry entry(options_.retention.trace_spans_per_job);
  entry.number = next_job_++;
  entry.job.set_id(absl::StrCat("job-", entry.number));
  entry.job.set_state(v1::JOB_STATE_PENDING);
  SetJobSpec(*spec, entry.job);
  entry.kind = *kind;
  entry.spec = *std::move(spec);
  entry.planned = *std::move(planned);
  entry.job.set_submitted_unix_s(UnixSeconds());
  const std::string id = entry.job.id();
  v1::Job copy = entry.job;
  jobs_[id] = std::move(entry);
  queue_.push_back(id);
  cv_.notify_all();
  return copy;
}

absl::StatusOr<v1::Job> Coordinator::GetJob(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return MissingJobLocked(id);
  return it->second.job;
}

v1::ListJobsResponse Coordinator::ListJobs() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const JobEntry*> kept;
  for (const auto& [_, e] : jobs_) kept.push_back(&e);
  std::sort(kept.begin(), kept.end(), [](const JobEntry* a, const JobEntry* b) { return a->number < b->number; });
  v1::ListJobsResponse out;
  for (const JobEntry* e : kept) *out.add_jobs() = e->job;
  out.set_finished_jobs_dropped(finished_dropped_);
  out.set_finished_jobs_kept(options_.retention.finished_jobs);
  return out;
}

absl::Status Coordinator::MissingJobLocked(const std::string& id) const {
  uint64_t number = 0;
  if (absl::StartsWith(id, "job-") && absl::SimpleAtoi(id.substr(4), &number) && number > 0 && number < next_job_) {
    return absl::NotFoundError(absl::StrCat("job '", id, "' finished and its record was dropped: the coordinator keeps ",
                                            "the last ", options_.retention.finished_jobs, " finished jobs"));
  }
  return absl::NotFoundError(absl::StrCat("job '", id, "' does not exist; see `tpuemu jobs`"));
}

absl::StatusOr<std::pair<v1::Job, int64_t>> Coordinator::WaitJob(const std::string& id, int64_t after_version,
                                                                 absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  // Looked up again on every wake: a finished job's record may be dropped
  // meanwhile (RetireLocked).
  auto it = jobs_.find(id);
  cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
    it = jobs_.find(id);
    return it == jobs_.end() || it->second.version != after_version || stop_;
  });
  if (it == jobs_.end()) return MissingJobLocked(id);
  return std::make_pair(it->second.job, it->second.version);
}

absl::StatusOr<v1::Job> Coordinator::CancelJob(const std::string& id) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return MissingJobLocked(id);
  CancelLocked(it->second, "cancelled by the user");
  return it->second.job;
}

void Coordinator::CancelLocked(JobEntry& entry, const std::string& why) {
  if (entry.job.state() == v1::JOB_STATE_PENDING) {
    const std::string id = entry.job.id();
    queue_.erase(std::remove(queue_.begin(), queue_.end(), id), queue_.end());
    UpdateJobLocked(entry, [&](v1::Job& j) {
      j.set_state(v1::JOB_STATE_CANCELLED);
      j.set_error(why);
      j.set_finished_unix_s(UnixSeconds());
    });
  } else if (entry.job.state() == v1::JOB_STATE_RUNNING) {
    EndRunningLocked(entry, why, /*failed=*/false);
  }
}

void Coordinator::EndRunningLocked(JobEntry& entry, const std::string& why, bool failed) {
  if (entry.cancel_requested) return;
  entry.cancel_requested = true;
  if (failed) {
    spdlog::warn("{} failed: {}", entry.job.id(), why);
    UpdateJobLocked(entry, [&](v1::Job& j) { j.set_error(why); });
  } else {
    entry.cancel_why = why;
  }
  if (running_calls_) running_calls_->Cancel();
  for (const RegisteredWorker& w : registry_.Workers()) aborts_.Send(w.host, w.incarnation, w.worker, entry.number, why);
}

void Coordinator::Drain(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = why;
  const std::deque<std::string> pending = queue_;
  for (const std::string& id : pending) CancelLocked(jobs_[id], why);
  if (!running_.empty()) CancelLocked(jobs_[running_], why);
}

absl::StatusOr<std::unique_ptr<JobTraceReader>> Coordinator::ReadJobTrace(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return MissingJobLocked(id);
  if (!it->second.kind->traced()) {
    return absl::InvalidArgumentError(
        absl::StrCat(id, " is a ", it->second.kind->name(), " job; traces are recorded for training jobs"));
  }
  return std::make_unique<TracePieces>(id, it->second.trace.Read());
}

void Coordinator::UpdateJobLocked(JobEntry& entry, const std::function<void(v1::Job&)>& change) {
  const bool was_finished = IsTerminal(entry.job.state());
  change(entry.job);
  ++entry.version;
  cv_.notify_all();
  if (!was_finished && IsTerminal(entry.job.state())) RetireLocked(entry.job.id());
}

void Coordinator::RetireLocked(const std::string& id) {
  JobEntry& entry = jobs_[id];
  entry.spec.reset();
  entry.planned.reset();
  finished_.push_back(id);
  bool dropped = false;
  while (static_cast<int>(finished_.size()) > options_.retention.finished_jobs) {
    auto oldest = jobs_.find(finished_.front());
    trace_spans_ -= oldest->second.trace.spans();
    jobs_.erase(oldest);
    finished_.pop_front();
    ++finished_dropped_;
    dropped = true;
  }
  // A dropped record may have held a trace of tens of MB in many small
  // blocks; glibc keeps freed blocks for reuse, so the process would stay at
  // its high-water mark. Give them back (a few ms, once per finished job).
  if (dropped) malloc_trim(0);
}

void Coordinator::AddTraceStepLocked(JobEntry& entry, int64_t step, const std::vector<ChipRunResult>& chips) {
  const int64_t before = entry.trace.spans();
  entry.trace.AddStep(step, entry.traced_until_s, chips);
  trace_spans_ += entry.trace.spans() - before;
  const std::string why = absl::StrCat("the coordinator keeps at most ", options_.retention.trace_spans_total,
                                       " spans of traces; newer jobs' took the room");
  for (auto it = finished_.begin(); trace_spans_ > options_.retention.trace_spans_total && it != finished_.end(); ++it) {
    BoundedTrace& old = jobs_.at(*it).trace;
    trace_spans_ -= old.spans();
    old.Clear(why);
  }
}

void Coordinator::JobLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    // A job starts once every worker is alive and configured: after a worker
    // is lost the queue waits for it to come back (or be replaced) rather
    // than fail job after job. Liveness lapses without a notify: look again
    // every tick.
    while (!stop_ && (queue_.empty() || !registry_.Ready())) cv_.wait_for(lock, std::chrono::milliseconds(200));
    if (stop_) return;
    const std::string id = queue_.front();
    queue_.pop_front();
    JobEntry& entry = jobs_[id];
    running_ = id;
    UpdateJobLocked(entry, [](v1::Job& j) { j.set_state(v1::JOB_STATE_RUNNING); });
    const uint64_t number = entry.number;
    const JobSpec spec = *std::move(entry.spec);
    const std::shared_ptr<const PlannedJob> planned = std::move(entry.planned);
    entry.spec.reset();
    auto calls = std::make_shared<Cancellation>();
    running_calls_ = calls;
    lock.unlock();
    JobReport summary;
    absl::Status status = RunJob(id, number, *entry.kind, spec, *planned, summary, *calls);
    lock.lock();
    running_.clear();
    running_calls_.reset();
    UpdateJobLocked(entry, [&](v1::Job& j) {
      j.set_finished_unix_s(UnixSeconds());
      if (status.ok()) {
        j.set_state(v1::JOB_STATE_SUCCEEDED);
        AddJobReport(summary, j);
      } else if (entry.cancel_requested && j.error().empty()) {
        j.set_state(v1::JOB_STATE_CANCELLED);
        j.set_error(entry.cancel_why);
      } else {
        j.set_state(v1::JOB_STATE_FAILED);
        if (j.error().empty()) j.set_error(std::string(status.message()));
      }
    });
  }
}

absl::Status Coordinator::RunJob(const std::string& id, uint64_t number, const JobKind& kind, const JobSpec& spec,
                                 const PlannedJob& planned, JobReport& summary, Cancellation& calls) {
  // What the job will hold (training: per chip), published before the first step.
  if (JobReport preview = planned.Preview(); preview.has_value()) {
    std::lock_guard<std::mutex> lock(mu_);
    UpdateJobLocked(jobs_[id], [&](v1::Job& j) { AddJobReport(preview, j); });
  }
  // A cancel takes effect between steps (and aborts the step in flight).
  std::vector<ChipRunResult> last;
  auto on_step = [&](int step, std::vector<ChipRunResult>&& chips) -> absl::Status {
    last = std::move(chips);
    return PublishStep(id, kind, planned, step, last);
  };
  std::vector<ChipCheck> checks;
  if (auto s = FanOut(id, number, spec, planned.steps(), on_step, checks, calls); !s.ok()) return s;
  summary = planned.Summarize(last, checks);
  return absl::OkStatus();
}

absl::Status Coordinator::PublishStep(const std::string& id, const JobKind& kind, const PlannedJob& planned, int step,
                                      const std::vector<ChipRunResult>& chips) {
  const JobReport report = planned.SummarizeStep(chips);
  std::lock_guard<std::mutex> lock(mu_);
  JobEntry& entry = jobs_[id];
  if (kind.traced()) {
    AddTraceStepLocked(entry, step, chips);
    // The next step's spans start where this one's slowest chip ended.
    double step_s = 0;
    for (const ChipRunResult& c : chips) step_s = std::max(step_s, c.emulated_s);
    entry.traced_until_s += step_s;
  }
  if (report.has_value()) {
    UpdateJobLocked(entry, [&](v1::Job& j) {
      AddJobReport(report, j);
      const int excess = j.steps_size() - options_.retention.step_records_per_job;
      if (excess > 0) {
        j.mutable_steps()->DeleteSubrange(0, excess);
        j.set_steps_dropped(j.steps_dropped() + excess);
      }
    });
  }
  if (entry.cancel_requested) return absl::CancelledError("cancelled by the user");
  return absl::OkStatus();
}

absl::Status Coordinator::FanOut(const std::string& id, uint64_t job, const JobSpec& spec, int steps,
                                 const StepSink& on_step, std::vector<ChipCheck>& checks, Cancellation& calls) {
  const std::vector<RegisteredWorker> workers = registry_.Workers();
  // Every worker prepares its chips' buffers, then all run their share at
  // once. The first failure ends the job (EndRunningLocked): the others'
  // calls are cancelled and they are told to abort, so that nobody waits
  // for data that will never come, nor for a worker that does not answer.
  std::mutex result_mu;
  absl::Status first_error = absl::OkStatus();
  auto fail = [&](int host, const absl::Status& status) {
    std::lock_guard<std::mutex> lock(result_mu);
    if (!first_error.ok()) return;
    std::lock_guard<std::mutex> pod_lock(mu_);
    if (calls.cancelled()) {
      // Cut short because the job was ended (a worker lost, a cancel): not this worker's failure.
      first_error = absl::CancelledError(absl::StrCat(id, " was ended"));
      return;
    }
    if (status.code() == absl::StatusCode::kUnavailable) {
      // Count it as gone now rather than after its heartbeats lapse.
      const std::string because = absl::StrCat("the connection to it was reset or closed (", status.message(), ")");
      registry_.MarkLost(host, because);
      first_error = absl::UnavailableError(absl::StrCat(registry_.WorkerName(host), " was lost: ", because));
    } else {
      first_error =
          absl::Status(status.code(), absl::StrCat(registry_.WorkerName(host), " failed: ", status.message()));
    }
    EndRunningLocked(jobs_[id], std::string(first_error.message()), /*failed=*/true);
  };
  auto on_every_worker = [&](const std::function<void(int, uint64_t, WorkerInterface&)>& fn) {
    std::vector<std::thread> threads;
    for (const RegisteredWorker& w : workers) threads.emplace_back([&] { fn(w.host, w.incarnation, *w.worker); });
    // Each returns promptly once `calls` is cancelled.
    for (auto& t : threads) t.join();
  };
  auto ended = [&] { return !first_error.ok() || calls.cancelled(); };
  auto end_status = [&] { return first_error.ok() ? absl::CancelledError(absl::StrCat(id, " was ended")) : first_error; };
  on_every_worker([&](int host, uint64_t incarnation, WorkerInterface& worker) {
    if (auto s = worker.PrepareJob(incarnation, job, spec, calls); !s.ok()) fail(host, s);
  });
  if (ended()) return end_status();
  for (int step = 0; step < steps; ++step) {
    std::vector<ChipRunResult> chips;
    on_every_worker([&](int host, uint64_t incarnation, WorkerInterface& worker) {
      auto r = worker.RunJob(incarnation, job, step, calls);
      if (!r.ok()) return fail(host, r.status());
      std::lock_guard<std::mutex> lock(result_mu);
      chips.insert(chips.end(), r->begin(), r->end());
    });
    if (ended()) return end_status();
    if (auto s = on_step(step, std::move(chips)); !s.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      EndRunningLocked(jobs_[id], std::string(s.message()), /*failed=*/false);
      return s;
    }
  }
  // Checking starts only once every worker has stopped moving data.
  on_every_worker([&](int host, uint64_t incarnation, WorkerInterface& worker) {
    auto r = worker.CheckJob(incarnation, job, calls);
    if (!r.ok()) return fail(host, r.status());
    std::lock_guard<std::mutex> lock(result_mu);
    checks.insert(checks.end(), r->begin(), r->end());
  });
  return first_error;
}

}  // namespace tpuemu
