#include "coordinator/scheduler.h"

#include <algorithm>
#include <random>
#include <set>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/fan_out.h"
#include "core/wire/run_number.h"
#include "core/job/kinds.h"
#include "spdlog/spdlog.h"

namespace tpuemu {
namespace {

// What a queued job waits for, then the jobs ahead of it that hold it back.
std::string AheadText(const std::string& why, int64_t ahead, const std::string& first_id) {
  return absl::StrCat(why, why.empty() ? "" : ", then ", ahead, " queued ahead of it (", first_id,
                      ahead > 1 ? " first)" : ")");
}

// The job's own kill_worker and pause_worker faults set off so far on the
// hosts that are lost now (`lost`, by the pod's host): the worker it lost may
// be one it asked to lose. `hosts`: the pod's hosts by the job's own host ids.
std::string FiredWorkerFaults(const PlannedJob& planned, uint64_t run, int next_step, const std::vector<int>& hosts,
                              const std::set<int>& lost) {
  if (!FirstAttempt(run)) return "";
  std::vector<std::string> fired;
  for (const WorkerFault& f : planned.WorkerFaults()) {
    const bool on_lost = f.host >= 0 && f.host < static_cast<int>(hosts.size()) && lost.count(hosts[f.host]);
    if (!(f.at_step < next_step && on_lost)) continue;
    // A job on part of the pod counts its own hosts; the lost worker is named by the pod's.
    const int pod_host = hosts[f.host];
    fired.push_back(pod_host == f.host ? f.Describe()
                                       : absl::StrCat(f.Describe(), " (the job's host ", f.host, ", the pod's host ",
                                                      pod_host, ")"));
  }
  if (fired.empty()) return "";
  return absl::StrCat("; the job's own faults had fired: ", absl::StrJoin(fired, "; "));
}

// Where a job's latest checkpoint was written, if it has one.
std::optional<Placement> CheckpointPlace(const JobRecord& r) {
  if (r.checkpoint_step == 0 || r.started_unix_s == 0) return std::nullopt;
  return r.placement;
}

// How `planned` lays out its checkpoints on `pod` (empty: it writes none).
std::string CheckpointLayout(const PlannedJob& planned, const Topology& pod) {
  const std::string layout = planned.CheckpointLayout();
  return layout.empty() ? layout : absl::StrCat(layout, " on ", pod.Describe());
}

// A checkpoint is one file per chip, each holding that chip's shards: it
// resumes only on the mesh and pod that wrote it (refused here, before
// anything changes, rather than by every worker when it reads its file).
absl::Status CheckpointFits(const JobRecord& r, const PlannedJob& planned, const Topology& pod) {
  if (r.checkpoint_step == 0 || r.checkpoint_layout.empty()) return absl::OkStatus();
  const std::string here = CheckpointLayout(planned, pod);
  if (here == r.checkpoint_layout) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      r.id, "'s checkpoint (steps 0-", r.checkpoint_step - 1, " done) was written by ", r.checkpoint_layout,
      "; this pod would run it as ", here,
      ". A checkpoint resumes only on the mesh and pod that wrote it: bring up a pod of that shape on this job "
      "store, or submit the job file again to start from step 0"));
}

// What a job on `part` waits for, for people: "the whole pod", "1 free
// slice of 2", "a free 2x2 block of hosts on 1 slice".
std::string WantedText(const Topology& pod, const PodPart& part) {
  if (part == PodPart{}) return "the whole pod";
  const int slices = part.num_slices == 0 ? pod.slices() : part.num_slices;
  if (part.whole_slices()) return absl::StrCat(slices, " free slice(s) of ", pod.slices());
  auto placed = PlacedTopology(pod, part);
  return absl::StrCat("a free ", placed.ok() ? placed->ShapeString() : "?", " block of hosts on ", slices,
                      " slice(s)");
}

}  // namespace

Scheduler::Scheduler(JobStore& store, Registry& registry, const Topology& pod, DcnFabric fabric, Planner plan)
    : store_(store),
      registry_(registry),
      pod_(pod),
      run_epoch_(std::random_device()() & kRunEpochMask),
      fabric_(std::move(fabric)),
      plan_(std::move(plan)) {
  watch_thread_ = std::thread([this] { WatchWorkersLoop(); });
  job_thread_ = std::thread([this] { JobLoop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    // A running job's calls may wait on a stopped worker for good.
    for (auto& [_, r] : running_) r->calls->Cancel();
  }
  cv_.notify_all();
  watch_thread_.join();
  job_thread_.join();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return running_.empty(); });
  std::vector<std::thread> ended;
  ended.swap(ended_threads_);
  lock.unlock();
  for (std::thread& t : ended) t.join();
}

absl::StatusOr<JobRecord> Scheduler::Submit(JobSpec spec, const JobKind& kind,
                                            std::shared_ptr<const PlannedJob> planned, int priority) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!draining_.empty()) return absl::UnavailableError(absl::StrCat("the coordinator is not taking jobs: ", draining_));
  if (!registry_.Configured()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the pod is not ready: ", AliveWorkers(), " of ", pod_.num_hosts(),
        " workers registered and alive since the coordinator started; `tpuemu cluster status` lists those there. "
        "Start the missing ones again (a local pod's: `tpuemu cluster restart-worker HOST`; a container or Pod "
        "restarts by itself)"));
  }
  auto record = store_.Add(spec, priority);
  if (!record.ok()) return record.status();
  // What it will hold (training: its mesh and memory per chip), shown while it waits.
  if (JobReport preview = planned->Preview(); preview.has_value()) {
    store_.Update(record->id, [&](JobRecord& r) { r.summary = preview; });
    record->summary = std::move(preview);
  }
  EnqueueLocked(Queued{record->id, record->number, 0, &kind, std::move(spec), std::move(planned), std::nullopt, priority});
  return record;
}

void Scheduler::EnqueueLocked(Queued job) {
  auto behind = std::find_if(queue_.begin(), queue_.end(), [&](const Queued& q) {
    return !q.ahead && (job.ahead || q.priority < job.priority);
  });
  queue_.insert(behind, std::move(job));
  cv_.notify_all();
}

absl::Status Scheduler::Requeue(const JobRecord& record, std::shared_ptr<const PlannedJob> planned) {
  if (auto fits = CheckpointFits(record, *planned, pod_); !fits.ok()) return fits;
  std::lock_guard<std::mutex> lock(mu_);
  const JobKind* kind = *FindJobKind(record.spec.kind());  // it was planned: its kind exists
  EnqueueLocked(Queued{record.id, record.number, record.restarts, kind, record.spec, std::move(planned),
                       CheckpointPlace(record), record.priority, record.queued_ahead});
  return absl::OkStatus();
}

absl::StatusOr<JobRecord> Scheduler::Resume(const std::string& id, const std::string& why, bool automatic,
                                            bool ahead) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!draining_.empty()) return absl::UnavailableError(absl::StrCat("the coordinator is not taking jobs: ", draining_));
  auto record = store_.Get(id);
  if (!record.ok()) return record.status();
  if (!IsFinished(record->state) || record->state == JobState::kSucceeded) {
    return absl::FailedPreconditionError(absl::StrCat(
        id, " is ", record->state == JobState::kSucceeded ? "finished: it succeeded" : "still pending or running",
        "; only a failed, cancelled or interrupted job resumes",
        record->state == JobState::kSucceeded ? " (to run it again, submit its job file again)" : ""));
  }
  if (auto s = ResumeLocked(*record, why, automatic, ahead); !s.ok()) return s;
  return store_.Get(id);
}

absl::Status Scheduler::ResumeLocked(const JobRecord& r, const std::string& why, bool automatic, bool ahead) {
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
  if (auto fits = CheckpointFits(r, **planned, pod_); !fits.ok()) return fits;
  const int done = r.checkpoint_step;
  store_.Rewind(r.id, done, [&](JobRecord& job) {
    job.spec = *spec;
    job.state = JobState::kPending;
    const std::string from = done > 0 ? absl::StrCat("its checkpoint (steps 0-", done - 1, " done), at step ", done)
                                      : std::string("the start (no checkpoint yet)");
    job.restart_reason =
        absl::StrCat(why, "; from ", from, r.error.empty() ? "" : absl::StrCat("; it had ended: ", r.error));
    job.queued_unix_s = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
    job.error.clear();
    ++job.restarts;
    if (automatic) ++job.automatic_restarts;
    job.queued_ahead = ahead;
  });
  EnqueueLocked(Queued{r.id, r.number, r.restarts + 1, *kind, *std::move(spec), *std::move(planned),
                       CheckpointPlace(r), r.priority, ahead});
  return absl::OkStatus();
}

absl::StatusOr<JobRecord> Scheduler::Cancel(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  CancelLocked(id, "cancelled by the user");
  return store_.Get(id);
}

absl::StatusOr<Faults> Scheduler::AddFaults(const std::string& id, const Faults& faults, int from_step) {
  std::lock_guard<std::mutex> lock(mu_);
  auto running = running_.find(id);
  if (running == running_.end()) {
    auto record = store_.Get(id);
    if (!record.ok()) return record.status();
    return absl::FailedPreconditionError(absl::StrCat(
        id, " is a ", record->spec.kind(), " job, ", JobStateName(record->state),
        ": faults join a running training job (a job file takes them from the start, in its faults: key; a "
        "collective or a matmul takes them when submitted)"));
  }
  Running& job = *running->second;
  return job.planned->AddFaults(faults, std::max(from_step, job.next_step));
}

void Scheduler::CancelLocked(const std::string& id, const std::string& why) {
  auto queued = std::find_if(queue_.begin(), queue_.end(), [&](const Queued& q) { return q.id == id; });
  if (queued != queue_.end()) {
    queue_.erase(queued);
    store_.Update(id, [&](JobRecord& r) {
      r.state = JobState::kCancelled;
      r.error = why;
    });
  } else if (auto running = running_.find(id); running != running_.end()) {
    EndRunningLocked(*running->second, why, /*failed=*/false);
  }
}

void Scheduler::EndRunningLocked(Running& job, const std::string& reason, bool failed) {
  if (job.end_requested) return;
  job.end_requested = true;
  std::string why = reason;
  if (failed && job.worker_lost) {
    std::set<int> lost;
    for (const RegisteredWorker& w : registry_.Workers()) {
      if (!w.alive) lost.insert(w.host);
    }
    absl::StrAppend(&why, FiredWorkerFaults(*job.planned, job.run, job.next_step, job.hosts, lost));
  }
  if (failed) {
    // Not "failed" yet: max_restarts may resume it (RunJobThread says which).
    spdlog::warn("{} stops: {}", job.id, why);
    store_.Update(job.id, [&](JobRecord& r) { r.error = why; });
  } else {
    job.cancel_why = why;
  }
  job.calls->Cancel();
  for (const RegisteredWorker& w : registry_.Workers()) {
    if (job.holds(w.host)) aborts_.Send(w.host, w.incarnation, w.worker, job.run, why);
  }
}

void Scheduler::Drain(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = why;
  if (store_.durable()) {
    keep_queue_ = true;
    for (auto& [_, r] : running_) {
      r->keep_record = true;
      EndRunningLocked(*r, why, /*failed=*/false);
    }
    return;
  }
  std::vector<std::string> ids;
  for (const Queued& q : queue_) ids.push_back(q.id);
  for (const auto& [id, _] : running_) ids.push_back(id);
  for (const std::string& id : ids) CancelLocked(id, why);
}

int Scheduler::jobs_running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(running_.size());
}

int Scheduler::jobs_queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size());
}

int Scheduler::AliveWorkers() const {
  int alive = 0;
  for (const RegisteredWorker& w : registry_.Workers()) alive += w.alive;
  return alive;
}

std::pair<int, std::string> Scheduler::QueuePlace(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto self = std::find_if(queue_.begin(), queue_.end(), [&](const Queued& q) { return q.id == id; });
  if (self == queue_.end()) return {0, ""};
  const int position = static_cast<int>(self - queue_.begin()) + 1;
  if (!registry_.Configured()) {
    std::string why = absl::StrCat("the pod to be ready (", AliveWorkers(), " of ", pod_.num_hosts(),
                                   " workers registered and alive)");
    if (position > 1) why = AheadText(why, position - 1, queue_.front().id);
    return {position, why};
  }
  // What holds it back: the first job ahead of it that waits for chips
  // (NextToStartLocked), or what it waits for itself.
  const auto first = WaitsForLostWorkerLocked(*self) ? self : HoldingBackLocked(self);
  std::string why = first->pinned ? absl::StrCat(DescribePlacement(*first->pinned), ", where its checkpoint is")
                                  : WantedText(pod_, first->planned->part());
  // The running jobs on hosts it could take; not those elsewhere (a job pinned
  // to its checkpoint's block was said to wait for one on another block).
  std::set<int> wanted;
  for (const Placement& p : PlacementsOf(*first)) {
    for (int host : PlacedHosts(pod_, p)) wanted.insert(host);
  }
  std::vector<std::string> held;
  for (const auto& [job, r] : running_) {
    if (absl::c_any_of(r->hosts, [&](int host) { return wanted.count(host) > 0; })) {
      held.push_back(absl::StrCat(job, " on ", DescribePlacement(r->placement)));
    }
  }
  if (!held.empty()) {
    const std::string last = held.back();
    held.pop_back();
    absl::StrAppend(&why, ", while ", held.empty() ? "" : absl::StrCat(absl::StrJoin(held, ", "), " and "), last,
                    held.empty() ? " runs" : " run");
  }
  // A lost worker's hosts take no job until it is back.
  std::vector<int> all(pod_.num_hosts());
  for (int h = 0; h < pod_.num_hosts(); ++h) all[h] = h;
  if (auto lost = registry_.FirstLost(all)) {
    absl::StrAppend(&why, "; ", *lost, ", and its hosts wait for it");
  } else if (WaitsForLostWorkerLocked(*first)) {
    // Nobody lost: a worker that came back, and those it joins, are taking
    // the pod's configuration.
    absl::StrAppend(&why, "; its workers are taking the pod's new configuration");
  } else if (running_.empty()) {
    why = "";  // nothing: it starts now
  }
  if (first != self) {
    // What the first job ahead waits for, said as its own: this job may want
    // something else (the whole pod, where that one wants a slice).
    const auto ahead = std::count_if(first, self, [&](const Queued& q) { return !WaitsForLostWorkerLocked(q); });
    const std::string its = why.empty() ? "" : absl::StrCat(", which waits for ", why);
    why = ahead > 1 ? absl::StrCat(ahead, " queued ahead of it to start (", first->id, " first", its, ")")
                    : absl::StrCat(first->id, ", queued ahead of it, to start",
                                   its.empty() ? "" : absl::StrCat(" (", its.substr(2), ")"));
  }
  return {position, why};
}

void Scheduler::WatchWorkersLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(200));
    if (stop_) return;
    for (auto& [_, r] : running_) {
      if (auto lost = registry_.FirstLost(r->hosts)) {
        r->worker_lost = true;
        EndRunningLocked(*r, *lost, /*failed=*/true);
      }
    }
  }
}

std::vector<Placement> Scheduler::PlacementsOf(const Queued& job) const {
  if (job.pinned) return {*job.pinned};
  return CandidatePlacements(pod_, job.planned->part());
}

bool Scheduler::WaitsForLostWorkerLocked(const Queued& job) const {
  for (const Placement& p : PlacementsOf(job)) {
    if (registry_.HostsReady(PlacedHosts(pod_, p))) return false;
  }
  return true;
}

std::optional<Placement> Scheduler::FreePlacementLocked(const Queued& job) const {
  std::vector<bool> busy(pod_.num_hosts(), false);
  for (const auto& [_, r] : running_) {
    for (int host : r->hosts) busy[host] = true;
  }
  // Free: no running job holds its hosts, and their workers are alive and
  // configured (a lost worker's hosts wait for it; the others take jobs).
  for (const Placement& p : PlacementsOf(job)) {
    const std::vector<int> hosts = PlacedHosts(pod_, p);
    if (std::none_of(hosts.begin(), hosts.end(), [&](int host) { return busy[host]; }) &&
        registry_.HostsReady(hosts)) {
      return p;
    }
  }
  return std::nullopt;
}

std::deque<Scheduler::Queued>::const_iterator Scheduler::HoldingBackLocked(
    std::deque<Queued>::const_iterator until) const {
  return std::find_if(queue_.begin(), until, [&](const Queued& q) { return !WaitsForLostWorkerLocked(q); });
}

std::optional<std::pair<std::deque<Scheduler::Queued>::iterator, Placement>> Scheduler::NextToStartLocked() {
  // In queue order. A job waiting for chips that running jobs hold holds
  // back those behind it (a large job is never starved by small ones); one
  // waiting for a lost worker does not: the worker may never come back.
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (auto placement = FreePlacementLocked(*it)) return std::make_pair(it, *placement);
    if (!WaitsForLostWorkerLocked(*it)) break;
  }
  return std::nullopt;
}

void Scheduler::JobLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    // A job starts once the workers of its placement are alive and
    // configured (a lost worker's hosts wait for it to come back, or be
    // replaced, rather than fail job after job) and no other job holds them.
    // Liveness lapses without a notify: look again every tick.
    std::optional<std::pair<std::deque<Queued>::iterator, Placement>> next;
    while (!stop_ && (queue_.empty() || !registry_.Configured() || keep_queue_ || !(next = NextToStartLocked()))) {
      cv_.wait_for(lock, std::chrono::milliseconds(200));
      store_.CatchUp();  // what the disk refused, written once it takes it
    }
    if (stop_) return;  // the destructor joins the ended jobs' threads
    std::vector<std::thread> ended;
    ended.swap(ended_threads_);
    const Placement placement = next->second;
    Queued job = std::move(*next->first);
    queue_.erase(next->first);
    auto running = std::make_unique<Running>();
    running->id = job.id;
    running->run = RunNumber(job.number, job.attempt, run_epoch_);
    running->placement = placement;
    running->hosts = PlacedHosts(pod_, placement);
    running->calls = std::make_shared<Cancellation>();
    running->planned = job.planned;
    running->next_step = job.planned->first_step();
    store_.Update(job.id, [&](JobRecord& r) {
      r.state = JobState::kRunning;
      r.placement = placement;
      r.checkpoint_layout = CheckpointLayout(*job.planned, pod_);
      r.started_unix_s = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
    });
    Running* r = running.get();
    running_[job.id] = std::move(running);
    // Under the lock: the thread takes it before it ends, so `thread` is
    // set by then.
    r->thread = std::thread([this, job = std::move(job), r] { RunJobThread(job, r); });
    lock.unlock();
    for (std::thread& t : ended) t.join();
    lock.lock();
  }
}

void Scheduler::RunJobThread(const Queued& job, Running* running) {
  absl::StatusOr<JobReport> summary = Run(job, *running);
  std::lock_guard<std::mutex> lock(mu_);
  const std::unique_ptr<Running> ended = std::move(running_.at(job.id));
  running_.erase(job.id);
  ended_threads_.push_back(std::move(ended->thread));
  cv_.notify_all();
  // Stopping (Drain): the record stays as it is, for the next coordinator
  // to resume; but a job that finished meanwhile is recorded as such.
  if (ended->keep_record && !summary.ok()) return;
  // A lost worker: the job goes on from its latest checkpoint once the
  // worker is back (pinned to its checkpoint's hosts, if it has one), if it may.
  // Straight from running to pending: a client following it never sees it fail.
  // Not a job the user cancelled first, whatever was lost after.
  if (!summary.ok() && ended->worker_lost && ended->cancel_why.empty() && TryRestartLocked(job, summary.status())) {
    spdlog::info("{} queued again (max_restarts), to go on from its latest checkpoint or the start", job.id);
    return;
  }
  store_.Update(job.id, [&](JobRecord& r) {
    if (summary.ok()) {
      r.state = JobState::kSucceeded;
      // A worker lost after every host had answered ended nothing.
      r.error.clear();
      if (summary->has_value()) r.summary = *std::move(summary);
    } else if (ended->end_requested && r.error.empty()) {
      r.state = JobState::kCancelled;
      r.error = ended->cancel_why;
    } else {
      r.state = JobState::kFailed;
      if (r.error.empty()) r.error = std::string(summary.status().message());
      spdlog::warn("{} failed: {}", job.id, r.error);
    }
  });
}

bool Scheduler::TryRestartLocked(const Queued& job, const absl::Status& failure) {
  auto record = store_.Get(job.id);
  if (!record.ok()) return false;
  const int allowed = job.planned->max_restarts();
  if (record->automatic_restarts >= allowed) {
    if (allowed > 0) {
      store_.Update(job.id, [&](JobRecord& r) {
        if (!r.error.empty()) absl::StrAppend(&r.error, "; not restarted: max_restarts (", allowed, ") used up");
      });
    }
    return false;
  }
  if (record->error.empty()) record->error = std::string(failure.message());
  const absl::Status resumed = ResumeLocked(
      *record, absl::StrCat("restart ", record->automatic_restarts + 1, " of ", allowed, " (max_restarts)"),
      /*automatic=*/true,
      // In priority order: pinned to its checkpoint's hosts (if any), it waits for
      // its lost worker, and jobs behind it that fit elsewhere pass it.
      /*ahead=*/false);
  if (!resumed.ok()) {
    spdlog::warn("{} could not resume: {}", job.id, std::string(resumed.message()));
    store_.Update(job.id, [&](JobRecord& r) {
      if (r.error.empty()) r.error = std::string(failure.message());
      absl::StrAppend(&r.error, "; not restarted: ", resumed.message());
    });
  }
  return resumed.ok();
}

absl::StatusOr<JobReport> Scheduler::Run(const Queued& job, const Running& running) {
  // What the job will hold (training: per chip), published before the first step.
  if (JobReport preview = job.planned->Preview(); preview.has_value()) {
    store_.Update(job.id, [&](JobRecord& r) { r.summary = preview; });
  }
  // A cancel takes effect between steps (and aborts the step in flight).
  std::vector<ChipRunResult> last;
  FanOutCalls fan;
  fan.job = running.run;
  fan.spec = &job.spec;
  fan.placement = running.placement;
  fan.first_step = job.planned->first_step();
  fan.steps = job.planned->steps();
  fan.calls = running.calls.get();
  fan.on_step = [&](int step, std::vector<ChipRunResult>&& chips) {
    last = std::move(chips);
    return PublishStep(job, step, last);
  };
  fan.on_failure = [&](int host, const absl::Status& failure) { return WorkerFailed(job, host, failure); };
  fan.added_faults = [&](int step) {
    std::lock_guard<std::mutex> lock(mu_);
    running_.at(job.id)->next_step = step + 1;  // faults added from now on start after it
    // The DCN fabric as the jobs running now share it, for this step.
    std::vector<PlacedJob> running_now;
    for (const auto& [id, other] : running_) running_now.push_back({id, other->placement});
    job.planned->ShareDcn(step, fabric_.ShareAt({job.id, running.placement}, running_now, step));
    return job.planned->AddedFaults();
  };
  std::vector<ChipCheck> checks;
  std::vector<HostMemoryUse> memory;
  std::vector<RegisteredWorker> workers;
  for (const RegisteredWorker& w : registry_.Workers()) {
    if (running.holds(w.host)) workers.push_back(w);
  }
  if (auto s = FanOut(workers, fan, checks, memory); !s.ok()) return s;
  store_.Update(job.id, [&](JobRecord& r) { r.worker_memory = std::move(memory); });
  return job.planned->Summarize(last, checks);
}

absl::Status Scheduler::PublishStep(const Queued& job, int step, const std::vector<ChipRunResult>& chips) {
  step_metrics_.RecordStep(job.kind->name(), chips);
  JobReport report = job.planned->SummarizeStep(chips);
  if (job.kind->traced()) store_.AddTraceStep(job.id, step, chips);
  if (report.has_value()) store_.AddStep(job.id, std::move(report));
  // Every worker ran the step, so every host wrote its chips' checkpoint.
  if (job.planned->CheckpointAfter(step)) store_.Update(job.id, [&](JobRecord& r) { r.checkpoint_step = step + 1; });
  std::lock_guard<std::mutex> lock(mu_);
  if (running_.at(job.id)->end_requested) return absl::CancelledError("cancelled by the user");
  return absl::OkStatus();
}

absl::Status Scheduler::WorkerFailed(const Queued& job, int host, const absl::Status& failure) {
  if (failure.code() == absl::StatusCode::kAborted) {
    // A live worker whose link to a peer broke: a peer that died is found
    // lost within moments (its connection drops and it answers nothing), so
    // the verdict is awaited briefly, outside the lock, to name the worker
    // that was lost rather than the one that noticed.
    std::vector<int> hosts;
    std::shared_ptr<Cancellation> calls;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hosts = running_.at(job.id)->hosts;
      calls = running_.at(job.id)->calls;
    }
    for (const absl::Time until = absl::Now() + absl::Seconds(2);
         !calls->cancelled() && !registry_.FirstLost(hosts) && absl::Now() < until;) {
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  Running& running = *running_.at(job.id);
  if (running.calls->cancelled()) {
    // Cut short because the job was ended (a worker lost, a cancel): not this worker's failure.
    return absl::CancelledError(absl::StrCat(job.id, " was ended"));
  }
  absl::Status error;
  if (failure.code() == absl::StatusCode::kUnavailable) {
    // Count it as gone now rather than after its heartbeats lapse.
    const std::string because = absl::StrCat("the connection to it was reset or closed (", failure.message(), ")");
    registry_.MarkLost(host, because);
    running.worker_lost = true;
    error = absl::UnavailableError(absl::StrCat(registry_.WorkerName(host), " was lost: ", because));
  } else if (auto lost = registry_.FirstLost(running.hosts)) {
    // A worker telling of a link that broke, when the worker at its other
    // end is already known to be gone: the loss is the news.
    running.worker_lost = true;
    error = absl::UnavailableError(*lost);
  } else if (failure.code() == absl::StatusCode::kAborted) {
    // A live worker whose link to a peer would not connect or broke (or
    // whose disk refused a checkpoint): the peer, if it is gone, is found
    // lost by its own heartbeats; the job may restart as after a loss.
    running.worker_lost = true;
    error = absl::AbortedError(absl::StrCat(registry_.WorkerName(host), " failed: ", failure.message()));
  } else {
    // The job's own failure (a down link it needs, a file it cannot write),
    // not the host's: the host is where it was found.
    error = absl::Status(failure.code(),
                         absl::StrCat("the job failed on ", registry_.WorkerName(host), ": ", failure.message()));
  }
  EndRunningLocked(running, std::string(error.message()), /*failed=*/true);
  return error;
}

}  // namespace tpuemu
