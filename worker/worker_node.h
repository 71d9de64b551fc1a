// One emulated TPU host: its chips, their links (paced, clocked) and its end
// of the fabric to the other hosts, which the factory it is given makes (gRPC
// in a worker process, memory in a test). Runs its chips' share of each job;
// the worker contract's in-process implementation.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/cluster/host_fabric.h"
#include "core/cluster/worker_interface.h"
#include "core/host/job_kind.h"
#include "core/wire/host_network.h"
#include "core/wire/placed_network.h"
#include "worker/worker_metrics.h"

namespace tpuemu {

class WorkerNode : public WorkerInterface {
 public:
  WorkerNode(int global_host, FabricFactory fabric) : host_(global_host), make_fabric_(std::move(fabric)) {}
  // The place and incarnation the coordinator gave this process's latest
  // registration: calls meant for another incarnation are refused, and a new
  // one ends the jobs of the one before (and their remembered aborts).
  void set_registration(int global_host, uint64_t incarnation);
  // Until set_registration: calls wait (2 s at most) for the registration's
  // answer, which the coordinator's first calls may overtake.
  void AwaitRegistration();
  // Where this host's chips keep training checkpoints (before any job).
  void set_checkpoint_dir(std::string dir) { checkpoint_dir_ = std::move(dir); }
  // How the process carries out a training job's kill_worker and
  // pause_worker (worker/self_faults.h); none: such a job fails, saying so.
  void set_worker_fault_action(WorkerFaultAction action) { worker_fault_action_ = std::move(action); }
  // Lets this host's chips multiply on an equal share of `cpus` with the
  // pod's other workers on `machine`, counted at every configuration
  // (worker/machine_share.h). Unset, the process's gate stays as it is.
  // Before serving.
  void share_machine(std::string machine, int cpus) {
    machine_ = std::move(machine);
    machine_cpus_ = cpus;
  }
  // The share the last configuration gave (0: none yet, or not sharing).
  int matmul_share();

  // The calls do the work themselves: a job's calls end when the job is
  // aborted, not when `cancel` is; timeouts do not apply.
  absl::Status Configure(uint64_t incarnation, const PodConfig& config) override;
  absl::Status PrepareJob(uint64_t incarnation, uint64_t job, const JobSpec& spec, const Placement& placement,
                          Cancellation& cancel) override;
  absl::StatusOr<std::vector<ChipRunResult>> RunJob(uint64_t incarnation, uint64_t job, int step,
                                                    const Faults& added, Cancellation& cancel) override;
  absl::StatusOr<HostCheck> CheckJob(uint64_t incarnation, uint64_t job, Cancellation& cancel) override;
  absl::Status Abort(uint64_t incarnation, uint64_t job, const std::string& reason, absl::Duration timeout) override;
  absl::StatusOr<WorkerStatusView> Status(absl::Duration timeout) override;
  // As the process itself sees it (readiness, tests).
  WorkerStatusView Status();

  // For a worker shutting down: ends every job prepared here (their running
  // calls return `reason`) and closes its links to other workers. It would
  // otherwise wait for receives from peers that are shutting down too, and
  // their streams into it, until its exit deadline.
  void ShutDown(const std::string& reason);

  // PeerService hands every received frame here.
  void DeliverPeerFrame(Frame&& frame);

  // This process's metrics in Prometheus' text format (worker_metrics.h).
  std::string MetricsText();

 private:
  struct Pod {
    // The links close before the network (and its mailbox, which a link's
    // failed frame aborts jobs in) goes.
    ~Pod() {
      if (fabric) fabric->Disconnect();
    }
    Topology topo;
    std::unique_ptr<HostFabric> fabric;
    std::unique_ptr<HostNetwork> net;
    // Closes the fabric's links while the process is idle (IdleRelease);
    // last, so that it goes first.
    std::shared_ptr<void> idle_disconnect;
  };
  struct PreparedJob {
    std::shared_ptr<HostJob> host;
    std::shared_ptr<JobAbort> abort;
    uint64_t resident_before = 0;  // the process's, before the job was prepared
    std::shared_ptr<void> hold;     // keeps the process from giving memory back (IdleRelease)
    bool preparing = false;         // listed while PrepareJob makes it: `abort` only
  };
  // OK when `incarnation` is this process's registration; `call` names the
  // call for the refusal.
  absl::Status CheckIncarnation(uint64_t incarnation, const std::string& call);
  absl::Status ConfigurePod(const PodConfig& config);
  // The chips' share of the machine's cores, from the pod's configuration.
  void ShareMachine(const PodConfig& config);
  absl::Status Prepare(uint64_t job, const JobSpec& spec, const Placement& placement);
  absl::StatusOr<std::vector<ChipRunResult>> Run(uint64_t job, int step, const Faults& added);
  absl::StatusOr<HostCheck> Check(uint64_t job);
  void AbortJob(uint64_t job, const std::string& reason);
  std::shared_ptr<Pod> pod();
  int global_host();  // this process's place, as the latest registration gave it
  std::shared_ptr<HostJob> FindJob(uint64_t job);
  // Stops the job's compute and wakes its receives.
  static void AbortPrepared(const PreparedJob& prepared, Pod& pod, uint64_t job, const std::string& reason);

  std::mutex mu_;
  std::condition_variable registered_;
  int host_;
  const FabricFactory make_fabric_;
  std::string checkpoint_dir_;
  std::string machine_;  // share_machine's
  int machine_cpus_ = 0;
  int matmul_share_ = 0;  // the share last set, under mu_
  WorkerFaultAction worker_fault_action_;
  uint64_t incarnation_ = 0;  // 0 until the first registration is answered
  bool awaiting_registration_ = false;
  std::shared_ptr<Pod> pod_;
  uint64_t running_job_ = 0;
  // The job being prepared or prepared, until it is checked or aborted
  // (training jobs run a step per RunJob in between): each PrepareJob
  // supersedes whatever else is here.
  std::map<uint64_t, PreparedJob> jobs_;
  std::mutex run_mu_;  // one job at a time
  WorkerMetrics metrics_;
};

}  // namespace tpuemu
