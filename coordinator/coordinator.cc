#include "coordinator/coordinator.h"

#include <functional>
#include <optional>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/field.h"
#include "core/job/kinds.h"
#include "core/pod/pod_config.h"
#include "core/train/job.h"
#include "spdlog/spdlog.h"
#include "services/cluster_conv.h"
#include "services/job_proto.h"
#include "services/proto_conv.h"

namespace tpuemu {

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(const CoordinatorOptions& options,
                                                                 Registry::ClientFactory factory) {
  auto topo = Topology::Create(options.topology);
  if (!topo.ok()) return topo.status();
  if (auto s = Validate(options); !s.ok()) return s;
  std::unique_ptr<JobDatabase> db;
  if (!options.data_dir.empty()) {
    auto opened = JobDatabase::Open(options.data_dir);
    if (!opened.ok()) return opened.status();
    db = *std::move(opened);
  }
  std::unique_ptr<Coordinator> c(new Coordinator(options, *topo, std::move(factory), std::move(db)));
  if (auto s = c->RestoreJobs(); !s.ok()) return s;
  return c;
}

absl::Status Coordinator::RestoreJobs() {
  const std::string why = absl::StrCat("the coordinator stopped while it ran (started again at ",
                                       absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::Now(), absl::UTCTimeZone()),
                                       ")");
  auto restored = store_.Restore(why);
  if (!restored.ok()) return restored.status();
  // Jobs that may restart by themselves go on from their latest checkpoint,
  // ahead of the queue: they were running. The others say what to do.
  for (const JobRecord& r : restored->interrupted) {
    auto planned = Plan(r.spec);
    if (planned.ok() && r.automatic_restarts < (*planned)->max_restarts()) {
      auto resumed = scheduler_.Resume(r.id,
                                       absl::StrCat("restart ", r.automatic_restarts + 1, " of ",
                                                    (*planned)->max_restarts(),
                                                    " (max_restarts): the coordinator restarted"),
                                       /*automatic=*/true, /*ahead=*/true);
      if (resumed.ok()) continue;
      spdlog::warn("{} could not resume: {}", r.id, std::string(resumed.status().message()));
    }
    const int allowed = planned.ok() ? (*planned)->max_restarts() : 0;
    store_.Update(r.id, [&](JobRecord& job) {
      if (allowed > 0 && r.automatic_restarts >= allowed) {
        absl::StrAppend(&job.error, "; not restarted: max_restarts (", allowed, ") used up");
      }
      absl::StrAppend(&job.error, "; `tpuemu resume` runs it again, from its latest checkpoint if it has one");
    });
  }
  for (const JobRecord& r : restored->pending) {
    // Planned again: the pod this coordinator serves may differ from the last one's.
    auto planned = Plan(r.spec);
    const absl::Status queued = planned.ok() ? scheduler_.Requeue(r, *std::move(planned)) : planned.status();
    if (!queued.ok()) {
      store_.Update(r.id, [&](JobRecord& job) {
        job.state = JobState::kFailed;
        job.error = absl::StrCat("queued when the coordinator restarted, and no longer fits this pod (",
                                 topo_.Describe(), "): ", queued.message());
      });
    }
  }
  return absl::OkStatus();
}

absl::Status Coordinator::Validate(const CoordinatorOptions& options) {
  if (auto s = CheckTimeScale(options.time_scale, "--time-scale"); !s.ok()) return s;
  // Infinite: tests that time no heartbeats.
  if (options.heartbeat_timeout <= absl::ZeroDuration() ||
      (options.heartbeat_timeout > kMaxHeartbeatTimeout && options.heartbeat_timeout != absl::InfiniteDuration())) {
    return absl::InvalidArgumentError(absl::StrCat("--heartbeat-timeout ", absl::FormatDuration(options.heartbeat_timeout),
                                                   ": must be above 0 and at most ",
                                                   absl::FormatDuration(kMaxHeartbeatTimeout)));
  }
  if (auto s = CheckDcnOversubscription(options.dcn_oversubscription, "--dcn-oversubscription"); !s.ok()) return s;
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

Coordinator::Coordinator(const CoordinatorOptions& options, const Topology& topo, Registry::ClientFactory factory,
                         std::unique_ptr<JobDatabase> db)
    : options_(options),
      topo_(topo),
      store_(options.retention, std::move(db)),
      registry_(topo, PodConfig{options.topology, options.time_scale, {}, {}}, options.heartbeat_timeout,
                std::move(factory)),
      scheduler_(store_, registry_, topo, DcnFabric(topo, options.dcn_oversubscription),
                 [this](const JobSpec& spec) { return Plan(spec); }) {}

absl::StatusOr<std::shared_ptr<const PlannedJob>> Coordinator::Plan(const JobSpec& spec) const {
  auto kind = FindJobKind(spec.kind());
  if (!kind.ok()) return kind.status();
  auto planned = (*kind)->Plan(spec, topo_, options_.time_scale);
  if (!planned.ok()) return planned.status();
  return std::shared_ptr<const PlannedJob>(*std::move(planned));
}

absl::StatusOr<v1::Job> Coordinator::ResumeJob(const std::string& id) {
  auto record = scheduler_.Resume(id, "resumed by the user");
  if (!record.ok()) return record.status();
  return Published(*record);
}

// Waiters wake now; the scheduler then stops (its running job's calls cancelled).
Coordinator::~Coordinator() { store_.Close(); }

absl::StatusOr<v1::RegisterWorkerResponse> Coordinator::RegisterWorker(const v1::RegisterWorkerRequest& request) {
  auto place = registry_.RegisterWorker(FromProto(request));
  if (!place.ok()) return place.status();
  v1::RegisterWorkerResponse response = ToProto(*place);
  *response.mutable_spec() = ToProto(options_.topology, options_.time_scale);
  return response;
}

absl::Status Coordinator::Heartbeat(int global_host, uint64_t incarnation, uint64_t resident_bytes) {
  return registry_.Heartbeat(global_host, incarnation, resident_bytes);
}

std::vector<uint64_t> Coordinator::ForgottenJobs(const std::vector<uint64_t>& jobs) {
  std::vector<uint64_t> forgotten;
  for (uint64_t job : jobs) {
    if (store_.Forgotten(job)) forgotten.push_back(job);
  }
  return forgotten;
}

v1::ClusterStatus Coordinator::ClusterStatus() {
  v1::ClusterStatus s;
  *s.mutable_spec() = ToProto(options_.topology, options_.time_scale);
  s.set_description(options_.dcn_oversubscription > 1 && topo_.slices() > 1
                        ? absl::StrCat(topo_.Describe(), ", DCN fabric ",
                                       absl::StrFormat("%g", options_.dcn_oversubscription), ":1 oversubscribed")
                        : topo_.Describe());
  s.set_expected_workers(topo_.num_hosts());
  s.set_chips(topo_.num_chips());
  for (const RegisteredWorker& w : registry_.Workers()) {
    v1::WorkerInfo* info = s.add_workers();
    info->set_host(w.host);
    info->set_slice(w.slice);
    info->set_address(w.address);
    for (int chip : topo_.ChipsOfHost(w.host)) info->add_chips(chip);
    info->set_seconds_since_heartbeat(absl::ToDoubleSeconds(w.since_heartbeat));
    info->set_resident_bytes(w.resident_bytes);
    info->set_alive(w.alive);
    info->set_slow(w.slow);
  }
  s.set_ready(registry_.Ready());
  s.set_jobs_running(scheduler_.jobs_running());
  if (options_.heartbeat_timeout != absl::InfiniteDuration()) {
    s.set_heartbeat_timeout_s(absl::ToDoubleSeconds(options_.heartbeat_timeout));
  }
  return s;
}

absl::StatusOr<v1::Job> Coordinator::SubmitJob(const v1::SubmitJobRequest& request) {
  // Checked and planned now, once, so that bad input fails the submit, not a queued job.
  if (request.priority() < -kMaxPriority || request.priority() > kMaxPriority) {
    return absl::InvalidArgumentError(absl::StrCat(Field("priority"), " ", request.priority(), ": must be from ", -kMaxPriority,
                                                   " to ", kMaxPriority, " (higher runs first; 0 is the default)"));
  }
  auto spec = request.has_train_yaml() ? TrainJobFromText(request.train_yaml()) : JobSpecFromProto(request);
  if (!spec.ok()) return spec.status();
  auto kind = FindJobKind(spec->kind());
  if (!kind.ok()) return kind.status();
  auto planned = (*kind)->Plan(*spec, topo_, options_.time_scale);
  if (!planned.ok()) return planned.status();
  auto record = scheduler_.Submit(*std::move(spec), **kind, *std::move(planned), request.priority());
  if (!record.ok()) return record.status();
  return Published(*record);
}

v1::Job Coordinator::Published(const JobRecord& record) const {
  v1::Job job = ToProto(record);
  if (record.state == JobState::kPending) {
    auto [position, why] = scheduler_.QueuePlace(record.id);
    job.set_queue_position(position);
    job.set_waiting_for(why);
  }
  return job;
}

absl::StatusOr<v1::Job> Coordinator::GetJob(const std::string& id) {
  auto record = store_.Get(id);
  if (!record.ok()) return record.status();
  return Published(*record);
}

absl::StatusOr<JobSpec> Coordinator::TrainJobFromText(const std::string& yaml) {
  if (yaml.size() > kMaxJobFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the job file is ", yaml.size(), " bytes; a job file is at most ",
                                                   kMaxJobFileBytes, " (real ones are a few hundred)"));
  }
  auto spec = ParseTrainSpec(yaml, "the job file");
  if (!spec.ok()) return spec.status();
  return JobSpec(*std::move(spec));
}

std::string Coordinator::MetricsText() const {
  std::string out;
  const JobStore::Listing listing = store_.List();
  std::map<std::string, int> states = {{"pending", 0},   {"running", 0},   {"succeeded", 0},
                                       {"failed", 0},    {"cancelled", 0}, {"interrupted", 0}};
  for (const JobRecord& r : listing.jobs) ++states[JobStateName(r.state)];
  WriteMetricHeader(out, "tpuemu_jobs", "gauge",
                    "Jobs the coordinator keeps, by state (finished ones beyond its retention are dropped).");
  for (const auto& [state, n] : states) WriteSample(out, "tpuemu_jobs", {{"state", state}}, n);
  // A gauge of kept records falls when retention drops one; alerts on
  // failures need a count that only grows.
  WriteMetricHeader(out, "tpuemu_jobs_finished_total", "counter",
                    "Jobs' endings since the coordinator started, by the state they ended in (a job run "
                    "again that ends again counts again).");
  for (JobState s : {JobState::kSucceeded, JobState::kFailed, JobState::kCancelled, JobState::kInterrupted}) {
    const auto n = listing.finished_here.find(s);
    WriteSample(out, "tpuemu_jobs_finished_total", {{"state", JobStateName(s)}},
                static_cast<double>(n == listing.finished_here.end() ? 0 : n->second));
  }
  WriteMetricHeader(out, "tpuemu_finished_jobs_dropped_total", "counter",
                    "Finished jobs' records dropped beyond the retention (--keep-finished-jobs).");
  WriteSample(out, "tpuemu_finished_jobs_dropped_total", {}, static_cast<double>(listing.finished_dropped));
  WriteMetricHeader(out, "tpuemu_queue_length", "gauge", "Jobs waiting to start.");
  WriteSample(out, "tpuemu_queue_length", {}, scheduler_.jobs_queued());
  WriteMetricHeader(out, "tpuemu_pod_ready", "gauge", "1 when every worker is registered, alive and configured.");
  WriteSample(out, "tpuemu_pod_ready", {}, registry_.Ready() ? 1 : 0);
  WriteMetricHeader(out, "tpuemu_pod_chips", "gauge", "Emulated chips of the pod.");
  WriteSample(out, "tpuemu_pod_chips", {}, topo_.num_chips());
  const std::vector<RegisteredWorker> workers = registry_.Workers();
  auto per_worker = [&](const std::string& name, const std::string& type, const std::string& help,
                        const std::function<std::optional<double>(const RegisteredWorker&)>& value) {
    WriteMetricHeader(out, name, type, help);
    for (const RegisteredWorker& w : workers) {
      if (const std::optional<double> v = value(w)) {
        WriteSample(out, name, {{"host", absl::StrCat(w.host)}, {"slice", absl::StrCat(w.slice)}, {"address", w.address}},
                    *v);
      }
    }
  };
  per_worker("tpuemu_worker_up", "gauge", "1 while the worker holding the host is alive (heartbeats or answers).",
             [](const RegisteredWorker& w) -> std::optional<double> { return w.alive ? 1 : 0; });
  per_worker("tpuemu_worker_slow", "gauge", "1 while its heartbeats are late but it answers the coordinator.",
             [](const RegisteredWorker& w) -> std::optional<double> { return w.slow ? 1 : 0; });
  per_worker("tpuemu_worker_heartbeat_age_seconds", "gauge", "Seconds since the worker's last heartbeat.",
             [](const RegisteredWorker& w) -> std::optional<double> { return absl::ToDoubleSeconds(w.since_heartbeat); });
  per_worker("tpuemu_worker_heartbeat_resident_bytes", "gauge",
             "The worker process's resident memory at its last heartbeat (none while it is lost, or before its first).",
             [](const RegisteredWorker& w) -> std::optional<double> {
               if (w.resident_bytes == 0) return std::nullopt;
               return static_cast<double>(w.resident_bytes);
             });
  scheduler_.step_metrics().Write(out);
  return out;
}

v1::ListJobsResponse Coordinator::ListJobs() {
  JobStore::Listing listing = store_.List();
  v1::ListJobsResponse out;
  for (const JobRecord& r : listing.jobs) *out.add_jobs() = Published(r);
  out.set_finished_jobs_dropped(listing.finished_dropped);
  out.set_finished_jobs_kept(listing.finished_kept);
  return out;
}

absl::StatusOr<std::pair<v1::Job, int64_t>> Coordinator::WaitJob(const std::string& id, int64_t after_version,
                                                                 absl::Duration timeout) {
  auto waited = store_.Wait(id, after_version, timeout);
  if (!waited.ok()) return waited.status();
  return std::make_pair(Published(waited->first), waited->second);
}

absl::StatusOr<v1::Job> Coordinator::CancelJob(const std::string& id) {
  auto record = scheduler_.Cancel(id);
  if (!record.ok()) return record.status();
  return Published(*record);
}

absl::StatusOr<v1::AddFaultsResponse> Coordinator::AddFaults(const v1::AddFaultsRequest& request) {
  auto faults = FromProto(request.faults());
  if (!faults.ok()) return faults.status();
  if (faults->empty() && !faults->route_around) {
    return absl::InvalidArgumentError(
        "faults: none given; give a slow link, a straggler or a down link (or on_down_link: route)");
  }
  if (request.from_step() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(Field("from_step"), " ", request.from_step(), ": a step, 0 or more"));
  }
  if (auto s = CheckFaultValues(*faults, "faults"); !s.ok()) return s;
  auto added = scheduler_.AddFaults(request.id(), *faults, request.from_step());
  if (!added.ok()) return added.status();
  v1::AddFaultsResponse response;
  *response.mutable_added() = ToProto(*added);
  for (std::string& line : added->Described()) response.add_described(line);
  auto job = GetJob(request.id());
  if (job.ok()) *response.mutable_job() = *std::move(job);
  return response;
}

void Coordinator::Drain(const std::string& why) { scheduler_.Drain(why); }

absl::StatusOr<std::unique_ptr<JobTraceReader>> Coordinator::ReadJobTrace(const std::string& id,
                                                                         int64_t latest_steps) {
  auto snapshot = store_.ReadTrace(id, latest_steps);
  if (!snapshot.ok()) return snapshot.status();
  return std::make_unique<TracePieces>(id, *std::move(snapshot));
}

}  // namespace tpuemu
