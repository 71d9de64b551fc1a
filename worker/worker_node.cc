#include "worker/worker_node.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tpuemu {

void WorkerNode::set_global_host(int host) {
  std::lock_guard<std::mutex> lock(mu_);
  host_ = host;
}

std::shared_ptr<WorkerNode::Pod> WorkerNode::pod() {
  std::lock_guard<std::mutex> lock(mu_);
  return pod_;
}

absl::Status WorkerNode::Configure(const PodConfig& config) {
  auto topo = Topology::Create(config.topology);
  if (!topo.ok()) return topo.status();
  std::unique_lock<std::mutex> run_lock(run_mu_, std::try_to_lock);
  if (!run_lock.owns_lock()) {
    return absl::FailedPreconditionError("worker is running a job; configure it when idle");
  }
  int host;
  {
    std::lock_guard<std::mutex> lock(mu_);
    host = host_;
  }
  if (host < 0 || host >= topo->num_hosts()) {
    return absl::InvalidArgumentError(absl::StrCat("host ", host, " is not in ", topo->Describe()));
  }
  auto pod = std::make_shared<Pod>(Pod{*topo, nullptr, nullptr});
  pod->fabric = std::make_unique<GrpcFabric>(*topo, host, config.host_addresses);
  pod->net = std::make_unique<HostNetwork>(*topo, topo->ChipsOfHost(host), config.time_scale, pod->fabric.get());
  pod->fabric->set_local_mailbox(&pod->net->mailbox());
  if (auto s = pod->fabric->ConnectLinks(pod->net->local_chips()); !s.ok()) return s;
  std::map<uint64_t, std::shared_ptr<HostJob>> stale;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::swap(pod_, pod);
    // Jobs prepared on the previous pod's links cannot run on the new ones.
    std::swap(jobs_, stale);
  }
  stale.clear();
  // The previous pod's links close outside mu_: frames arriving meanwhile
  // (DeliverPeerFrame) must not wait for them.
  pod.reset();
  spdlog::info("configured as host {} of {} (time scale {})", host, topo->Describe(), config.time_scale);
  return absl::OkStatus();
}

absl::Status WorkerNode::PrepareJob(uint64_t job, const JobSpec& spec) {
  std::shared_ptr<Pod> p = pod();
  if (!p) return absl::FailedPreconditionError("worker is not configured yet; wait for the pod to be ready");
  RunOptions options;
  options.job = job;
  auto host = MakeHostJob(spec, *p->net, options);
  if (!host.ok()) return host.status();
  (*host)->Prepare();
  std::lock_guard<std::mutex> lock(mu_);
  jobs_[job] = std::shared_ptr<HostJob>(*std::move(host));
  return absl::OkStatus();
}

std::shared_ptr<HostJob> WorkerNode::FindJob(uint64_t job) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : it->second;
}

absl::StatusOr<std::vector<ChipRunResult>> WorkerNode::RunJob(uint64_t job, const JobSpec& spec) {
  std::shared_ptr<HostJob> host = FindJob(job);
  if (!host) {
    if (auto s = PrepareJob(job, spec); !s.ok()) return s;
    host = FindJob(job);
    if (!host) return absl::AbortedError(absl::StrCat("job ", job, " was aborted while it was being prepared"));
  }
  const auto* train = std::get_if<TrainSpec>(&spec);
  std::lock_guard<std::mutex> run_lock(run_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_job_ = job;
  }
  auto result = host->Run(train != nullptr ? train->step : 0);
  std::lock_guard<std::mutex> lock(mu_);
  running_job_ = 0;
  if (!result.ok()) jobs_.erase(job);
  return result;
}

absl::StatusOr<std::vector<ChipCheck>> WorkerNode::CheckJob(uint64_t job) {
  std::shared_ptr<HostJob> host;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(job);
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job ", job, " has not run on this worker"));
    host = std::move(it->second);
    jobs_.erase(it);
  }
  return host->Check();
}

void WorkerNode::Abort(uint64_t job, const std::string& reason) {
  std::shared_ptr<Pod> p = pod();
  if (!p) return;
  // The mailbox takes aborts of jobs this worker has (prepared, preparing or
  // running) only; it is told before the job is dropped, so that the abort
  // outlives the job for a RunJob that comes after it.
  if (!p->net->mailbox().AbortJob(job, absl::AbortedError(absl::StrCat("job aborted: ", reason)))) {
    spdlog::warn("ignored an abort of job {}, which this worker does not have: {}", job, reason);
    return;
  }
  spdlog::warn("aborting job {}: {}", job, reason);
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.erase(job);
}

void WorkerNode::DeliverPeerFrame(Frame&& frame) {
  std::shared_ptr<Pod> p = pod();
  if (p) p->net->mailbox().Put(std::move(frame));
}

WorkerStatusView WorkerNode::Status() {
  std::shared_ptr<Pod> p = pod();
  std::lock_guard<std::mutex> lock(mu_);
  WorkerStatusView s;
  s.host = host_;
  s.configured = p != nullptr;
  s.running_job = running_job_;
  if (p) {
    s.chips = p->net->local_chips();
    s.frames_waiting = p->net->mailbox().pending();
    s.frames_dropped = p->net->mailbox().dropped_frames();
  }
  return s;
}

}  // namespace tpuemu
