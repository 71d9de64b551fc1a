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
  {
    std::lock_guard<std::mutex> lock(mu_);
    pod_ = std::move(pod);
  }
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
  prepared_[job] = *std::move(host);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ChipRunResult>> WorkerNode::RunJob(uint64_t job, const JobSpec& spec) {
  std::unique_ptr<HostJob> host;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = prepared_.find(job);
    if (it != prepared_.end()) {
      host = std::move(it->second);
      prepared_.erase(it);
    }
  }
  if (!host) {
    if (auto s = PrepareJob(job, spec); !s.ok()) return s;
    return RunJob(job, spec);
  }
  std::lock_guard<std::mutex> run_lock(run_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_job_ = job;
  }
  auto result = host->Run();
  std::lock_guard<std::mutex> lock(mu_);
  running_job_ = 0;
  if (result.ok()) ran_[job] = std::move(host);
  return result;
}

absl::StatusOr<std::vector<ChipCheck>> WorkerNode::CheckJob(uint64_t job) {
  std::unique_ptr<HostJob> host;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ran_.find(job);
    if (it == ran_.end()) return absl::NotFoundError(absl::StrCat("job ", job, " has not run on this worker"));
    host = std::move(it->second);
    ran_.erase(it);
  }
  return host->Check();
}

void WorkerNode::Abort(uint64_t job, const std::string& reason) {
  std::shared_ptr<Pod> p = pod();
  if (!p) return;
  spdlog::warn("aborting job {}: {}", job, reason);
  {
    std::lock_guard<std::mutex> lock(mu_);
    prepared_.erase(job);
    ran_.erase(job);
  }
  p->net->mailbox().AbortJob(job, absl::AbortedError(absl::StrCat("job aborted: ", reason)));
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
  }
  return s;
}

}  // namespace tpuemu
