#include "coordinator/coordinator.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/collective_plan.h"
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
  w.client = factory_(req.address());
  w.incarnation = next_incarnation_++;
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
  return absl::OkStatus();
}

bool Coordinator::AliveLocked(const Worker& w) const {
  return absl::Now() - w.last_heartbeat < options_.heartbeat_timeout;
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
    // A worker that stops heartbeating fails the running job: its RPC may
    // hang (a stopped process) rather than fail.
    if (!running_.empty()) {
      for (const auto& [host, w] : workers_) {
        if (AliveLocked(w)) continue;
        JobEntry& entry = jobs_[running_];
        if (!entry.cancel_requested) {
          entry.cancel_requested = true;
          const std::string why = absl::StrCat(WorkerNameLocked(host), " stopped sending heartbeats");
          UpdateJobLocked(entry, [&](v1::Job& j) { j.set_error(why); });
          for (const auto& [_, other] : workers_) {
            auto client = other.client;
            std::thread([client, n = entry.number, why] { client->Abort(n, why).IgnoreError(); }).detach();
          }
        }
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
  // Validate now so that bad input fails the submit, not a queued job.
  if (request.has_train()) {
    auto plan = PlanTrainJob(FromProto(request.train()), topo_, options_.time_scale);
    if (!plan.ok()) return plan.status();
  } else if (request.has_matmul()) {
    auto spec = FromProto(request.matmul());
    if (!spec.ok()) return spec.status();
    auto plan = PlanMatmulSpec(*spec, topo_);
    if (!plan.ok()) return plan.status();
  } else {
    auto spec = FromProto(request.collective());
    if (!spec.ok()) return spec.status();
    auto plan = PlanCollectiveJob(topo_, *spec);
    if (!plan.ok()) return plan.status();
  }
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
  JobEntry entry;
  entry.number = next_job_++;
  entry.job.set_id(absl::StrCat("job-", entry.number));
  entry.job.set_state(v1::JOB_STATE_PENDING);
  if (request.has_train()) {
    *entry.job.mutable_train() = request.train();
  } else if (request.has_matmul()) {
    *entry.job.mutable_matmul() = request.matmul();
  } else {
    *entry.job.mutable_collective() = request.collective();
  }
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
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job '", id, "' does not exist; see `tpuemu jobs`"));
  return it->second.job;
}

std::vector<v1::Job> Coordinator::ListJobs() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::Job> out;
  for (const auto& [_, e] : jobs_) out.push_back(e.job);
  std::sort(out.begin(), out.end(), [](const v1::Job& a, const v1::Job& b) {
    return a.submitted_unix_s() < b.submitted_unix_s();
  });
  return out;
}

absl::StatusOr<std::pair<v1::Job, int64_t>> Coordinator::WaitJob(const std::string& id, int64_t after_version,
                                                                 absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job '", id, "' does not exist; see `tpuemu jobs`"));
  cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return it->second.version != after_version || stop_; });
  return std::make_pair(it->second.job, it->second.version);
}

absl::StatusOr<v1::Job> Coordinator::CancelJob(const std::string& id) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job '", id, "' does not exist; see `tpuemu jobs`"));
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
  } else if (entry.job.state() == v1::JOB_STATE_RUNNING && !entry.cancel_requested) {
    entry.cancel_requested = true;
    for (const auto& [_, w] : workers_) {
      auto client = w.client;
      std::thread([client, n = entry.number, why] { client->Abort(n, why).IgnoreError(); }).detach();
    }
  }
}

void Coordinator::Drain(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = why;
  const std::deque<std::string> pending = queue_;
  for (const std::string& id : pending) CancelLocked(jobs_[id], why);
  if (!running_.empty()) CancelLocked(jobs_[running_], why);
}

absl::StatusOr<v1::JobTrace> Coordinator::GetJobTrace(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job '", id, "' does not exist; see `tpuemu jobs`"));
  if (!it->second.job.has_train()) {
    return absl::InvalidArgumentError(absl::StrCat(id, " is a ", it->second.job.has_matmul() ? "matmul" : "collective",
                                                   " job; traces are recorded for training jobs"));
  }
  v1::JobTrace trace = it->second.trace;
  trace.set_id(id);
  return trace;
}

void Coordinator::UpdateJobLocked(JobEntry& entry, const std::function<void(v1::Job&)>& change) {
  change(entry.job);
  ++entry.version;
  cv_.notify_all();
}

void Coordinator::JobLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const std::string id = queue_.front();
    queue_.pop_front();
    JobEntry& entry = jobs_[id];
    running_ = id;
    UpdateJobLocked(entry, [](v1::Job& j) { j.set_state(v1::JOB_STATE_RUNNING); });
    v1::Job job = entry.job;
    const uint64_t number = entry.number;
    lock.unlock();
    absl::Status status = RunJob(id, number, job);
    lock.lock();
    running_.clear();
    UpdateJobLocked(entry, [&](v1::Job& j) {
      j.set_finished_unix_s(UnixSeconds());
      if (status.ok()) {
        j.set_state(v1::JOB_STATE_SUCCEEDED);
        if (job.has_result()) *j.mutable_result() = job.result();
        if (job.has_train_summary()) *j.mutable_train_summary() = job.train_summary();
        if (job.has_matmul_result()) *j.mutable_matmul_result() = job.matmul_result();
      } else if (entry.cancel_requested && j.error().empty()) {
        j.set_state(v1::JOB_STATE_CANCELLED);
      } else {
        j.set_state(v1::JOB_STATE_FAILED);
        if (j.error().empty()) j.set_error(std::string(status.message()));
      }
    });
  }
}

absl::Status Coordinator::RunJob(const std::string& id, uint64_t number, v1::Job& job) {
  if (job.has_matmul()) {
    auto spec = FromProto(job.matmul());
    if (!spec.ok()) return spec.status();
    auto plan = PlanMatmulSpec(*spec, topo_);
    if (!plan.ok()) return plan.status();
    std::vector<ChipRunResult> chips;
    std::vector<ChipCheck> checks;
    if (auto s = FanOut(id, number, *spec, 1, Keep(chips), checks); !s.ok()) return s;
    *job.mutable_matmul_result() = ToProto(SummarizeMatmul(*plan, chips, checks, topo_.num_chips()));
    return absl::OkStatus();
  }
  if (job.has_train()) return RunTraining(id, number, job);
  auto spec = FromProto(job.collective());
  if (!spec.ok()) return spec.status();
  auto plan = CollectivePlan::Create(topo_, *spec);
  if (!plan.ok()) return plan.status();
  std::vector<ChipRunResult> chips;
  std::vector<ChipCheck> checks;
  if (auto s = FanOut(id, number, *spec, 1, Keep(chips), checks); !s.ok()) return s;
  std::map<int, uint64_t> mismatches;
  for (const ChipCheck& c : checks) mismatches[c.chip] = c.mismatches;
  for (ChipRunResult& c : chips) c.mismatches = mismatches[c.chip];
  *job.mutable_result() = ToProto(Summarize(*plan, topo_, chips));
  return absl::OkStatus();
}

Coordinator::StepSink Coordinator::Keep(std::vector<ChipRunResult>& chips) {
  return [&chips](int, std::vector<ChipRunResult>&& ran) {
    chips = std::move(ran);
    return absl::OkStatus();
  };
}

absl::Status Coordinator::RunTraining(const std::string& id, uint64_t number, v1::Job& job) {
  const TrainSpec spec = FromProto(job.train());
  auto plan = PlanTrainJob(spec, topo_, options_.time_scale);
  if (!plan.ok()) return plan.status();
  const TrainConfig& config = plan->config;
  // Each finished step is published at once, so that `watch` sees it; a
  // cancel takes effect between steps (and aborts the step in flight).
  StepReport last;
  auto on_step = [&](int, std::vector<ChipRunResult>&& chips) -> absl::Status {
    last = SummarizeStep(config, topo_, chips);
    const v1::TrainStep step = ToProto(last);
    std::lock_guard<std::mutex> lock(mu_);
    JobEntry& entry = jobs_[id];
    for (const ChipRunResult& chip : chips) {
      for (const TraceEvent& e : chip.trace) {
        *entry.trace.add_events() = ToProto(TraceEvent{e.track, absl::StrCat("step ", last.step, ": ", e.name),
                                                       entry.traced_until_s + e.start_s,
                                                       entry.traced_until_s + e.end_s, e.bytes});
      }
    }
    entry.traced_until_s += last.emulated_s;
    UpdateJobLocked(entry, [&](v1::Job& j) { *j.add_steps() = step; });
    if (entry.cancel_requested) return absl::CancelledError("cancelled by the user");
    return absl::OkStatus();
  };
  // What the job will hold per chip, published before the first step.
  v1::TrainSummary& summary = *job.mutable_train_summary();
  summary.set_mesh(plan->mesh.Describe());
  summary.set_pipeline_schedule(config.pipeline_schedule);
  summary.set_stages(config.stages());
  summary.set_microbatches(config.num_microbatches);
  summary.set_repeats(config.pipeline_repeats);
  for (const MemoryItem& m : ChipMemory(config, plan->mesh)) *summary.add_memory_per_chip() = ToProto(m);
  summary.set_hbm_bytes(ChipHbmBytes(config, topo_));
  summary.set_model_flops_per_step(StepModelFlops(config));
  {
    std::lock_guard<std::mutex> lock(mu_);
    UpdateJobLocked(jobs_[id], [&](v1::Job& j) { *j.mutable_train_summary() = summary; });
  }
  std::vector<ChipCheck> checks;
  if (auto s = FanOut(id, number, spec, config.steps, on_step, checks); !s.ok()) return s;
  double squares = 0;
  for (const ChipCheck& c : checks) squares += c.param_squares;
  summary.set_param_l2(std::sqrt(squares));
  for (const LayerCost& l : PerLayerCosts(config, plan->mesh, topo_, last)) *summary.add_per_layer() = ToProto(l);
  return absl::OkStatus();
}

absl::Status Coordinator::FanOut(const std::string& id, uint64_t job, const JobSpec& spec, int steps,
                                 const StepSink& on_step, std::vector<ChipCheck>& checks) {
  std::vector<std::pair<int, std::shared_ptr<WorkerClient>>> clients;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [host, w] : workers_) clients.emplace_back(host, w.client);
  }
  // Every worker prepares its chips' buffers, then all run their share at
  // once. The first failure aborts the others so nobody waits for data that
  // will never come.
  std::mutex result_mu;
  absl::Status first_error = absl::OkStatus();
  auto fail = [&](int host, const absl::Status& status) {
    std::lock_guard<std::mutex> lock(result_mu);
    if (!first_error.ok()) return;
    std::string name;
    {
      std::lock_guard<std::mutex> pod_lock(mu_);
      name = WorkerNameLocked(host);
      // Unreachable: count it as gone now rather than after its heartbeats lapse.
      if (status.code() == absl::StatusCode::kUnavailable) workers_[host].last_heartbeat = absl::InfinitePast();
    }
    first_error = absl::Status(status.code(), absl::StrCat(name, " failed: ", status.message()));
    spdlog::warn("{}: {}", id, first_error.ToString());
    for (auto& [other_host, other] : clients) {
      if (other_host != host) other->Abort(job, first_error.ToString()).IgnoreError();
    }
  };
  auto on_every_worker = [&](const std::function<void(int, WorkerClient&)>& fn) {
    std::vector<std::thread> threads;
    for (auto& [host, client] : clients) threads.emplace_back([&, host = host, client = client] { fn(host, *client); });
    for (auto& t : threads) t.join();
  };
  on_every_worker([&](int host, WorkerClient& client) {
    if (auto s = client.PrepareJob(job, spec); !s.ok()) fail(host, s);
  });
  if (!first_error.ok()) return first_error;
  for (int step = 0; step < steps; ++step) {
    JobSpec step_spec = spec;
    if (auto* train = std::get_if<TrainSpec>(&step_spec)) train->step = step;
    std::vector<ChipRunResult> chips;
    on_every_worker([&](int host, WorkerClient& client) {
      auto r = client.RunJob(job, step_spec);
      if (!r.ok()) return fail(host, r.status());
      std::lock_guard<std::mutex> lock(result_mu);
      chips.insert(chips.end(), r->begin(), r->end());
    });
    if (!first_error.ok()) return first_error;
    if (auto s = on_step(step, std::move(chips)); !s.ok()) {
      for (auto& [_, client] : clients) client->Abort(job, std::string(s.message())).IgnoreError();
      return s;
    }
  }
  // Checking starts only once every worker has stopped moving data.
  on_every_worker([&](int host, WorkerClient& client) {
    auto r = client.CheckJob(job);
    if (!r.ok()) return fail(host, r.status());
    std::lock_guard<std::mutex> lock(result_mu);
    checks.insert(checks.end(), r->begin(), r->end());
  });
  return first_error;
}

}  // namespace tpuemu
