#include "worker/worker_node.h"

#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "core/base/process_memory.h"
#include "core/wire/run_number.h"
#include "core/job/kinds.h"
#include "core/tensor/matmul_gate.h"
#include "worker/idle_release.h"
#include "worker/machine_share.h"
#include "spdlog/spdlog.h"

namespace tpuemu {

namespace {

// How long a call may wait for this process's registration to be answered:
// the coordinator configures a worker as soon as it has registered it, which
// may be before the answer has reached the worker.
constexpr auto kRegistrationAnswerWait = std::chrono::seconds(2);

// A worker that answers is not lost. To the coordinator kUnavailable means
// the call did not reach the worker (WorkerInterface), so an answer's own
// (a link to a peer that would not connect or broke, a checkpoint the disk
// refused) goes back as kAborted, its message naming what failed: it once
// had a live worker counted lost in place of the dead peer.
absl::Status Answered(absl::Status status) {
  return absl::IsUnavailable(status) ? absl::AbortedError(status.message()) : status;
}

bool SamePod(const TopologyRequest& a, const TopologyRequest& b) {
  return a.topology == b.topology && a.slices == b.slices && a.chips_per_host == b.chips_per_host &&
         a.wraparound == b.wraparound;
}

}  // namespace

void WorkerNode::AwaitRegistration() {
  std::lock_guard<std::mutex> lock(mu_);
  awaiting_registration_ = true;
}

void WorkerNode::set_registration(int global_host, uint64_t incarnation) {
  std::map<uint64_t, PreparedJob> before;
  std::shared_ptr<Pod> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Registered again (the coordinator restarted, or had lost this worker):
    // the jobs of the registration before are over, whatever the coordinator
    // remembers of them, and calls for them are refused from now on.
    if (incarnation_ != 0 && incarnation != incarnation_) {
      before.swap(jobs_);
      p = pod_;
    }
    host_ = global_host;
    incarnation_ = incarnation;
    awaiting_registration_ = false;
  }
  registered_.notify_all();
  if (!p) return;
  for (const auto& [job, prepared] : before) {
    AbortPrepared(prepared, *p, job, "this worker registered with its coordinator again");
  }
  before.clear();
  // After the aborts above, so that those jobs' aborts are forgotten too once they close.
  p->net->mailbox().ForgetAborts();
}

absl::Status WorkerNode::CheckIncarnation(uint64_t incarnation, const std::string& call) {
  std::unique_lock<std::mutex> lock(mu_);
  if (awaiting_registration_) {
    registered_.wait_for(lock, kRegistrationAnswerWait, [&] { return incarnation_ != 0 || incarnation == 0; });
  }
  if (incarnation == incarnation_) return absl::OkStatus();
  // A coordinator still talking to the process this one replaced (at a
  // reused address), or one that restarted and lost track.
  spdlog::warn("refused {} meant for incarnation {}: this worker (host {}) is incarnation {}", call, incarnation,
               host_, incarnation_);
  return absl::FailedPreconditionError(absl::StrCat(
      call, " was meant for the worker registered as incarnation ", incarnation, "; this process ",
      incarnation_ == 0 ? "has not been registered"
                        : absl::StrCat("is incarnation ", incarnation_, " (the place changed hands)"),
      ", so the call is refused"));
}

int WorkerNode::global_host() {
  std::lock_guard<std::mutex> lock(mu_);
  return host_;
}

void WorkerNode::ShareMachine(const PodConfig& config) {
  const MachineShare share = ShareOfMachine(config, machine_, machine_cpus_);
  std::lock_guard<std::mutex> lock(mu_);
  if (share.workers == 0 || share.matmuls_at_once == matmul_share_) return;
  matmul_share_ = share.matmuls_at_once;
  ProcessMatmulGate().set_limit(share.matmuls_at_once);
  spdlog::info("chips multiply {} at a time: {} worker(s) of the pod share this machine's {} CPU(s)",
               share.matmuls_at_once, share.workers, machine_cpus_);
}

int WorkerNode::matmul_share() {
  std::lock_guard<std::mutex> lock(mu_);
  return matmul_share_;
}

std::shared_ptr<WorkerNode::Pod> WorkerNode::pod() {
  std::lock_guard<std::mutex> lock(mu_);
  return pod_;
}

absl::Status WorkerNode::ConfigurePod(const PodConfig& config) {
  auto topo = Topology::Create(config.topology);
  if (!topo.ok()) return topo.status();
  ShareMachine(config);
  // The same pod with a worker back at a new address (the coordinator tells
  // every worker when one registers again): only the links to it change, so
  // that jobs on other slices run on untouched.
  if (std::shared_ptr<Pod> p = pod(); p && SamePod(p->topo.request(), config.topology) &&
                                      p->net->time_scale() == config.time_scale) {
    p->fabric->UpdatePeers(config.host_addresses);
    return absl::OkStatus();
  }
  std::unique_lock<std::mutex> run_lock(run_mu_, std::try_to_lock);
  if (!run_lock.owns_lock()) {
    return absl::FailedPreconditionError("worker is running a job; configure it when idle");
  }
  const int host = global_host();
  if (host < 0 || host >= topo->num_hosts()) {
    return absl::InvalidArgumentError(absl::StrCat("host ", host, " is not in ", topo->Describe()));
  }
  // Made in place: a Pod, with its destructor, does not move.
  std::shared_ptr<Pod> pod(new Pod{*topo, make_fabric_(config, *topo, host), nullptr, nullptr});
  pod->net = std::make_unique<HostNetwork>(*topo, topo->ChipsOfHost(host), config.time_scale, pod->fabric.get());
  // 5 s: Configure answers within the coordinator's 10 s whatever the peers do.
  if (auto s = pod->fabric->Connect(pod->net->mailbox(), pod->net->local_chips(), {}, absl::Seconds(5)); !s.ok()) {
    return s;
  }
  // An idle worker's connections hold their last read buffers (1-2 MiB
  // each); they are closed with the rest of what it gives back, and opened
  // again when the next job is prepared.
  pod->idle_disconnect = IdleRelease::Process().AlsoRelease([fabric = pod->fabric.get()] { fabric->Disconnect(); });
  std::map<uint64_t, PreparedJob> stale;
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

absl::Status WorkerNode::Prepare(uint64_t job, const JobSpec& spec, const Placement& placement) {
  std::shared_ptr<Pod> p = pod();
  if (!p) return absl::FailedPreconditionError("worker is not configured yet; wait for the pod to be ready");
  RunOptions options;
  options.job = job;
  options.checkpoint_dir = checkpoint_dir_;
  options.worker_fault_action = worker_fault_action_;
  // A host runs one job at a time (placements are made of whole hosts, and
  // the coordinator starts a job on a host once the one before has ended
  // there), though not in number order (priorities, resumes): any other job
  // still here is one the coordinator ended without this worker hearing the
  // abort (the process was stopped, say). Its chips would hold this host
  // until their receives time out, and its buffers the memory.
  std::map<uint64_t, PreparedJob> superseded;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (jobs_.count(job) > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(RunName(job), " is already prepared on this worker; a second PrepareJob for it is refused"));
    }
    superseded.swap(jobs_);
    // Listed while it prepares, so that an abort that comes meanwhile (a
    // cancel, another host's failure) reaches this job's own JobAbort.
    jobs_[job] = PreparedJob{nullptr, options.abort, 0, nullptr, /*preparing=*/true};
  }
  for (const auto& [old, prepared] : superseded) {
    AbortPrepared(prepared, *p, old, absl::StrCat(RunName(job), " started, so the coordinator had ended it"));
  }
  superseded.clear();  // their buffers, before this job's
  // However the preparing ends early, the job is no longer listed.
  absl::Cleanup unlist = [this, job] {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = jobs_.find(job); it != jobs_.end() && it->second.preparing) jobs_.erase(it);
  };
  // The job's memory is what the process holds from here to its check.
  std::shared_ptr<void> hold = IdleRelease::Process().Hold();
  // Links closed while the worker was idle open again, before anything is
  // timed. Preparing has no deadline of its own, so a slow connection
  // between containers (a CI run saw one miss 5 s after a peer restarted)
  // gets 15 s before the job fails.
  std::vector<int> job_chips;
  if (!placement.whole_pod()) {
    job_chips = PlacedChips(p->topo, placement);
    std::sort(job_chips.begin(), job_chips.end());
  }
  if (auto s = p->fabric->Connect(p->net->mailbox(), p->net->local_chips(), job_chips, absl::Seconds(15)); !s.ok()) {
    return s;
  }
  const uint64_t resident_before = ResidentBytes();
  ResetPeakResident();
  HostNetwork* net = p->net.get();
  std::shared_ptr<PlacedNetwork> placed;
  if (!placement.whole_pod()) {
    auto made = PlacedNetwork::Create(p->topo, placement, global_host(), net->time_scale(), p->fabric.get(), &net->mailbox());
    if (!made.ok()) return made.status();
    placed = *std::move(made);
    net = &placed->net();
  }
  // Planned on the pod it runs on: the whole pod, or its placement's part.
  auto planned = PlanJob(spec, net->topology(), net->time_scale());
  if (!planned.ok()) return planned.status();
  auto host = (*planned)->MakeHostJob(*net, options);
  if (!host.ok()) return host.status();
  if (auto s = (*host)->Prepare(); !s.ok()) return s;
  // The links a job sends on (a placed job's own, on the pod's fabric and
  // mailbox) live as long as it does, even past a reconfiguration.
  std::shared_ptr<HostJob> shared((*host).release(), [placed, p](HostJob* h) mutable {
    delete h;
    placed.reset();  // before the pod it sends through
  });
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = jobs_.find(job); it != jobs_.end() && it->second.preparing) {
      it->second = PreparedJob{std::move(shared), options.abort, resident_before, std::move(hold)};
      std::move(unlist).Cancel();
      return absl::OkStatus();
    }
  }
  // Ended while it prepared (aborted, superseded, or the pod configured
  // again): its buffers go now, then its hold, and nothing runs it.
  shared.reset();
  const absl::Status why = options.abort->status();
  return why.ok() ? absl::AbortedError(absl::StrCat(RunName(job), " was ended while this worker prepared it")) : why;
}

void WorkerNode::AbortPrepared(const PreparedJob& prepared, Pod& pod, uint64_t job, const std::string& reason) {
  const absl::Status why = absl::AbortedError(absl::StrCat("job aborted: ", reason));
  prepared.abort->Abort(why);
  // The mailbox takes aborts of jobs this worker has (prepared, preparing or
  // running) only, and is told while `prepared` still holds the job, so that
  // the abort outlives it for a RunJob that comes after.
  if (!pod.net->mailbox().AbortJob(job, why) && !prepared.host && !prepared.preparing) {
    spdlog::warn("ignored an abort of {}, which this worker does not have: {}", RunName(job), reason);
    return;
  }
  spdlog::warn("aborting {}: {}", RunName(job), reason);
}

std::shared_ptr<HostJob> WorkerNode::FindJob(uint64_t job) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : it->second.host;  // none while it prepares
}

absl::StatusOr<std::vector<ChipRunResult>> WorkerNode::Run(uint64_t job, int step, const Faults& added) {
  // Not prepared: aborted, or superseded by a later job (a call that waited
  // in a stopped process, say). Preparing it now would run a job the
  // coordinator has ended.
  std::shared_ptr<HostJob> host = FindJob(job);
  if (!host) return absl::AbortedError(absl::StrCat(RunName(job), " is not prepared on this worker (aborted or ended)"));
  std::lock_guard<std::mutex> run_lock(run_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_job_ = job;
  }
  // Between steps: none of the job's chips runs now.
  const absl::Status faulted = host->AddFaults(added);
  auto result = faulted.ok() ? host->Run(step) : absl::StatusOr<std::vector<ChipRunResult>>(faulted);
  std::lock_guard<std::mutex> lock(mu_);
  running_job_ = 0;
  // Its own entry only: a run of the same number may have been prepared since
  // (a coordinator restarted without its job store numbers jobs from 1 again).
  if (auto it = jobs_.find(job); !result.ok() && it != jobs_.end() && it->second.host == host) jobs_.erase(it);
  return result;
}

absl::StatusOr<HostCheck> WorkerNode::Check(uint64_t job) {
  std::shared_ptr<HostJob> host;
  std::shared_ptr<void> hold;
  HostCheck out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(job);
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat(RunName(job), " has not run on this worker"));
    if (it->second.preparing) {
      return absl::FailedPreconditionError(absl::StrCat(RunName(job), " is still being prepared on this worker"));
    }
    host = std::move(it->second.host);
    hold = std::move(it->second.hold);
    out.memory.before_bytes = it->second.resident_before;
    out.memory.host = host_;
    jobs_.erase(it);
  }
  out.chips = host->Check();
  out.memory.peak_bytes = PeakResidentBytes();
  // The job's buffers go now; the heap they came from goes back to the
  // system once the worker has been idle for a moment (IdleRelease).
  host.reset();
  return out;
}

void WorkerNode::AbortJob(uint64_t job, const std::string& reason) {
  std::shared_ptr<Pod> p = pod();
  if (!p) return;
  PreparedJob prepared{nullptr, std::make_shared<JobAbort>(), 0, nullptr};  // a job not prepared here: its mailbox only
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = jobs_.find(job); it != jobs_.end()) {
      prepared = std::move(it->second);
      jobs_.erase(it);
    }
  }
  AbortPrepared(prepared, *p, job, reason);
  prepared.host.reset();  // before its hold
}

void WorkerNode::ShutDown(const std::string& reason) {
  std::shared_ptr<Pod> p = pod();
  if (!p) return;
  std::map<uint64_t, PreparedJob> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.swap(jobs_);
  }
  for (const auto& [job, prepared] : all) AbortPrepared(prepared, *p, job, reason);
  p->fabric->Disconnect();
}

absl::Status WorkerNode::Configure(uint64_t incarnation, const PodConfig& config) {
  if (auto s = CheckIncarnation(incarnation, "Configure"); !s.ok()) return s;
  return Answered(ConfigurePod(config));
}

absl::Status WorkerNode::PrepareJob(uint64_t incarnation, uint64_t job, const JobSpec& spec, const Placement& placement,
                                   Cancellation&) {
  if (auto s = CheckIncarnation(incarnation, "PrepareJob"); !s.ok()) return s;
  absl::Status prepared = Prepare(job, spec, placement);
  prepared.ok() ? metrics_.Succeeded(WorkerMetrics::kPrepare) : metrics_.Failed(WorkerMetrics::kPrepare);
  return Answered(prepared);
}

absl::StatusOr<std::vector<ChipRunResult>> WorkerNode::RunJob(uint64_t incarnation, uint64_t job, int step,
                                                              const Faults& added, Cancellation&) {
  if (auto s = CheckIncarnation(incarnation, "RunJob"); !s.ok()) return s;
  auto ran = Run(job, step, added);
  if (ran.ok()) {
    metrics_.Succeeded(WorkerMetrics::kRun);
    metrics_.StepRan(*ran);
  } else {
    metrics_.Failed(WorkerMetrics::kRun);
    return Answered(ran.status());
  }
  return ran;
}

absl::StatusOr<HostCheck> WorkerNode::CheckJob(uint64_t incarnation, uint64_t job, Cancellation&) {
  if (auto s = CheckIncarnation(incarnation, "CheckJob"); !s.ok()) return s;
  auto checked = Check(job);
  if (!checked.ok()) {
    metrics_.Failed(WorkerMetrics::kCheck);
    return Answered(checked.status());
  }
  metrics_.Succeeded(WorkerMetrics::kCheck);
  return checked;
}

absl::Status WorkerNode::Abort(uint64_t incarnation, uint64_t job, const std::string& reason, absl::Duration) {
  if (auto s = CheckIncarnation(incarnation, "Abort"); !s.ok()) return s;
  metrics_.Aborted();
  AbortJob(job, reason);
  return absl::OkStatus();
}

void WorkerNode::DeliverPeerFrame(Frame&& frame) {
  metrics_.FrameReceived(frame.elements() * sizeof(float));
  std::shared_ptr<Pod> p = pod();
  // In the peer queue's thread, which holds nothing a chip's work waits for:
  // a chip waiting for this frame is run on here, its next hops written from
  // here, rather than woken (core/collective/executor.cc).
  if (p) p->net->mailbox().Put(std::move(frame), /*may_run=*/true);
}

std::string WorkerNode::MetricsText() {
  std::shared_ptr<Pod> p = pod();
  return metrics_.Text(Status(), p ? &p->topo : nullptr);
}

absl::StatusOr<WorkerStatusView> WorkerNode::Status(absl::Duration) { return Status(); }

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
