#include "coordinator/coordinator.h"

#include <malloc.h>

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/job/kinds.h"
#include "services/job_proto.h"
#include "services/proto_conv.h"
#include "spdlog/spdlog.h"

namespace tpuemu {
namespace {

double UnixSeconds() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

}  // namespace

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(const CoordinatorOptions& options,
                                                                 ClientFactory factory) {
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

Coordinator::Coordinator(const CoordinatorOptions& options, const Topology& topo, ClientFactory factory)
    : options_(options), topo_(topo), factory_(std::move(factory)) {
  pod_thread_ = std::thread([this] { PodLoop(); });
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
  pod_thread_.join();
  job_thread_.join();
}

absl::StatusOr<v1::RegisterWorkerResponse> Coordinator::RegisterWorker(const v1::RegisterWorkerRequest& req) {
  const std::string who = absl::StrCat("the worker at ", req.address(), " (place from ",
                                       req.place_source().empty() ? "--slice/--host" : req.place_source(), ")");
  if (req.address().empty()) return absl::InvalidArgumentError("register: the worker gave no address to reach it");
  if (req.num_slices() != 0 && req.num_slices() != topo_.slices()) {
    return absl::InvalidArgumentError(absl::StrCat("MEGASCALE_NUM_SLICES=", req.num_slices(), " of ", who,
                                                   ": this pod (", topo_.Describe(), ") has ", topo_.slices(),
                                                   " slice(s)"));
  }
  if (req.slice() < -1 || req.slice() >= topo_.slices()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": slice ", req.slice(), " is outside the pod ",
                                                   topo_.Describe(), ", which has slices 0 to ", topo_.slices() - 1));
  }
  if (req.host() < -1 || req.host() >= topo_.hosts_per_slice()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": host ", req.host(), " is outside its slice: each slice of ",
                                                   topo_.Describe(), " has hosts 0 to ",
                                                   topo_.hosts_per_slice() - 1));
  }
  if (req.slice() < 0 && req.host() >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": host ", req.host(), " given without its slice"));
  }
  // A place whose holder still heartbeats is given to another worker only if
  // that holder does not answer now: a worker restarted on a new address, or
  // a compose container recreated, must not wait for its dead predecessor's
  // heartbeats to lapse.
  const bool claimed = req.host() >= 0;
  std::set<int> unanswered;
  for (bool holders_asked = false;; holders_asked = true) {
    std::vector<std::pair<int, std::shared_ptr<WorkerClient>>> holders;
    std::string holder_address, holder_source;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (claimed) {
        const int global = req.slice() * topo_.hosts_per_slice() + req.host();
        auto it = workers_.find(global);
        if (it == workers_.end() || it->second.address == req.address() || !AliveLocked(it->second) ||
            unanswered.count(global) > 0) {
          return TakePlaceLocked(global, req);
        }
        if (holders_asked) {
          return absl::AlreadyExistsError(absl::StrCat(
              who, " claims slice ", req.slice(), " host ", req.host(), ", which the live worker at ",
              it->second.address, " holds (place from ", it->second.place_source,
              "); give each worker its own place (see `tpuemu-worker --help`) or stop the other one"));
        }
        holders.emplace_back(global, it->second.client);
      } else {
        auto place = AssignPlaceLocked(req.address(), req.slice(), unanswered);
        if (place.ok()) return TakePlaceLocked(*place, req);
        if (holders_asked) return absl::Status(place.status().code(), absl::StrCat(who, ": ", place.status().message()));
        for (const auto& [g, w] : workers_) {
          if (req.slice() < 0 || topo_.SliceOfHost(g) == req.slice()) holders.emplace_back(g, w.client);
        }
      }
    }
    for (const auto& [global, client] : holders) {
      if (!client->Ping(absl::Seconds(1)).ok()) unanswered.insert(global);
    }
  }
}

absl::StatusOr<int> Coordinator::AssignPlaceLocked(const std::string& address, int slice,
                                                   const std::set<int>& unanswered) const {
  const int first = slice < 0 ? 0 : slice * topo_.hosts_per_slice();
  const int last = slice < 0 ? topo_.num_hosts() : first + topo_.hosts_per_slice();
  // The same worker back keeps its place; else the first place nobody holds;
  // else the first whose holder stopped heartbeating or did not answer.
  for (int g = first; g < last; ++g) {
    auto it = workers_.find(g);
    if (it != workers_.end() && it->second.address == address) return g;
  }
  for (int g = first; g < last; ++g) {
    if (workers_.count(g) == 0) return g;
  }
  for (int g = first; g < last; ++g) {
    if (!AliveLocked(workers_.at(g)) || unanswered.count(g) > 0) return g;
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "no free place: all ", last - first, " hosts of ", slice < 0 ? "the pod " : absl::StrCat("slice ", slice, " of "),
      topo_.Describe(), " are held by live workers; scale the workers to ", topo_.num_hosts(),
      " or start a pod with a bigger topology"));
}

v1::RegisterWorkerResponse Coordinator::TakePlaceLocked(int global, const v1::RegisterWorkerRequest& req) {
  Worker& w = workers_[global];
  if (!w.address.empty() && w.address != req.address()) {
    spdlog::info("host {} re-registered: {} replaces {}", global, req.address(), w.address);
  }
  w.host = global;
  w.slice = topo_.SliceOfHost(global);
  w.address = req.address();
  w.last_heartbeat = absl::Now();
  w.lost_because.clear();
  w.incarnation = next_incarnation_++;
  w.client = factory_(req.address(), w.incarnation);
  w.place_source = req.place_source().empty() ? "--slice/--host" : req.place_source();
  ++generation_;
  cv_.notify_all();
  const int host = global % topo_.hosts_per_slice();
  spdlog::info("worker registered: slice {} host {} (global {}) at {}; place from {}", w.slice, host, global,
               w.address, req.place_source().empty() ? "--slice/--host" : req.place_source());
  v1::RegisterWorkerResponse resp;
  resp.set_global_host(global);
  resp.set_slice(w.slice);
  resp.set_host(host);
  resp.set_incarnation(w.incarnation);
  *resp.mutable_spec() = ToProto(options_.topology, options_.time_scale);
  return resp;
}

absl::Status Coordinator::Heartbeat(int global_host, uint64_t incarnation) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(global_host);
  if (it == workers_.end()) {
    return absl::NotFoundError(absl::StrCat("host ", global_host, " is not registered; register first"));
  }
  if (it->second.incarnation != incarnation) {
    spdlog::warn("refused a stale heartbeat for host {} (incarnation {}; the worker at {} holds it now)", global_host,
                 incarnation, it->second.address);
    return absl::FailedPreconditionError(absl::StrCat("host ", global_host, " is now held by the worker at ",
                                                      it->second.address, "; this registration was replaced"));
  }
  it->second.last_heartbeat = absl::Now();
  it->second.lost_because.clear();
  return absl::OkStatus();
}

bool Coordinator::AliveLocked(const Worker& w) const {
  return w.lost_because.empty() && absl::Now() - w.last_heartbeat < options_.heartbeat_timeout;
}

std::string Coordinator::LostReasonLocked(const Worker& w) const {
  if (!w.lost_because.empty()) return w.lost_because;
  return absl::StrCat("no heartbeat for ", absl::FormatDuration(absl::Trunc(absl::Now() - w.last_heartbeat,
                                                                            absl::Milliseconds(100))),
                      " (the limit is ", absl::FormatDuration(options_.heartbeat_timeout), ")");
}

bool Coordinator::ReadyLocked() const {
  if (static_cast<int>(workers_.size()) != topo_.num_hosts()) return false;
  for (const auto& [_, w] : workers_) {
    if (!AliveLocked(w)) return false;
  }
  return configured_generation_ == generation_;
}

std::string Coordinator::WorkerNameLocked(int host) const {
  auto it = workers_.find(host);
  return absl::StrCat("worker host ", host, " (slice ", topo_.SliceOfHost(host), ", ",
                      it == workers_.end() ? "unregistered" : it->second.address, ")");
}

v1::ClusterStatus Coordinator::ClusterStatus() {
  std::lock_guard<std::mutex> lock(mu_);
  v1::ClusterStatus s;
  *s.mutable_spec() = ToProto(options_.topology, options_.time_scale);
  s.set_description(topo_.Describe());
  s.set_expected_workers(topo_.num_hosts());
  s.set_chips(topo_.num_chips());
  for (const auto& [host, w] : workers_) {
    v1::WorkerInfo* info = s.add_workers();
    info->set_host(host);
    info->set_slice(w.slice);
    info->set_address(w.address);
    for (int chip : topo_.ChipsOfHost(host)) info->add_chips(chip);
    info->set_seconds_since_heartbeat(absl::ToDoubleSeconds(absl::Now() - w.last_heartbeat));
    info->set_alive(AliveLocked(w));
  }
  s.set_ready(ReadyLocked());
  s.set_jobs_running(running_.empty() ? 0 : 1);
  return s;
}

void Coordinator::PodLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(200));
    if (stop_) return;
    // A worker that stops heartbeating fails the running job: its calls may
    // hang (a stopped process) rather than fail.
    if (!running_.empty()) {
      for (const auto& [host, w] : workers_) {
        if (AliveLocked(w)) continue;
        EndRunningLocked(jobs_[running_], absl::StrCat(WorkerNameLocked(host), " was lost: ", LostReasonLocked(w)),
                         /*failed=*/true);
        break;
      }
    }
    if (static_cast<int>(workers_.size()) != topo_.num_hosts() || configured_generation_ == generation_) continue;
    // Everyone is here (again): tell every worker where its peers are.
    PodConfig config{options_.topology, options_.time_scale, {}};
    std::vector<std::pair<int, std::shared_ptr<WorkerClient>>> clients;
    for (const auto& [host, w] : workers_) {
      config.host_addresses[host] = w.address;
      clients.emplace_back(host, w.client);
    }
    const int64_t generation = generation_;
    lock.unlock();
    absl::Status all = absl::OkStatus();
    for (auto& [host, client] : clients) {
      absl::Status s = client->Configure(config);
      if (!s.ok()) {
        spdlog::warn("configuring host {} failed: {}", host, s.ToString());
        all = s;
      }
    }
    lock.lock();
    if (all.ok()) {
      configured_generation_ = generation;
      spdlog::info("pod ready: {}", topo_.Describe());
    }
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
  if (!ReadyLocked()) {
    int alive = 0;
    for (const auto& [_, w] : workers_) alive += AliveLocked(w);
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
  for (const auto& [host, w] : workers_) aborts_.Send(host, w.incarnation, w.client, entry.number, why);
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
    while (!stop_ && (queue_.empty() || !ReadyLocked())) cv_.wait_for(lock, std::chrono::milliseconds(200));
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
  std::vector<std::pair<int, std::shared_ptr<WorkerClient>>> clients;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [host, w] : workers_) clients.emplace_back(host, w.client);
  }
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
      workers_[host].lost_because = absl::StrCat("the connection to it was reset or closed (", status.message(), ")");
      first_error = absl::UnavailableError(
          absl::StrCat(WorkerNameLocked(host), " was lost: ", workers_[host].lost_because));
    } else {
      first_error = absl::Status(status.code(), absl::StrCat(WorkerNameLocked(host), " failed: ", status.message()));
    }
    EndRunningLocked(jobs_[id], std::string(first_error.message()), /*failed=*/true);
  };
  auto on_every_worker = [&](const std::function<void(int, WorkerClient&)>& fn) {
    std::vector<std::thread> threads;
    for (auto& [host, client] : clients) threads.emplace_back([&, host = host, client = client] { fn(host, *client); });
    // Each returns promptly once `calls` is cancelled.
    for (auto& t : threads) t.join();
  };
  auto ended = [&] { return !first_error.ok() || calls.cancelled(); };
  auto end_status = [&] { return first_error.ok() ? absl::CancelledError(absl::StrCat(id, " was ended")) : first_error; };
  on_every_worker([&](int host, WorkerClient& client) {
    if (auto s = client.PrepareJob(job, spec, calls); !s.ok()) fail(host, s);
  });
  if (ended()) return end_status();
  for (int step = 0; step < steps; ++step) {
    std::vector<ChipRunResult> chips;
    on_every_worker([&](int host, WorkerClient& client) {
      auto r = client.RunJob(job, step, calls);
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
  on_every_worker([&](int host, WorkerClient& client) {
    auto r = client.CheckJob(job, calls);
    if (!r.ok()) return fail(host, r.status());
    std::lock_guard<std::mutex> lock(result_mu);
    checks.insert(checks.end(), r->begin(), r->end());
  });
  return first_error;
}

}  // namespace tpuemu
