#include "client/cluster_restart_commands.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/cli_checks.h"
#include "client/cli_errors.h"
#include "client/coordinator_client.h"
#include "client/local_pod.h"
#include "client/pod_state.h"
#include "client/processes.h"
#include "client/progress.h"
#include "core/pod/placement.h"
#include "core/pod/topology.h"
#include "services/proto_conv.h"
#include "views/job_views.h"

namespace tpuemu {
namespace {

// Stops `old` if it is still the recorded process, starts its command line
// again and records the new process in the pod file before anything waits
// on it.
absl::StatusOr<StartedProcess> Replace(PodState& state, StartedProcess& old) {
  if (IsRunning(old)) StopProcesses({old}, 5);
  auto started = SpawnDetached(old.argv, old.log);
  if (!started.ok()) return started.status();
  old = *started;
  if (auto s = SavePodState(state); !s.ok()) return s;
  return *started;
}

void WaitUntilAnswering(const std::string& coordinator, absl::Duration within) {
  for (const absl::Time deadline = absl::Now() + within; absl::Now() < deadline;) {
    if (CoordinatorClient(coordinator).Status(1).ok()) return;
    absl::SleepFor(absl::Milliseconds(100));
  }
}

int RestartCoordinator(double timeout_s) {
  auto state = LoadPodState();
  if (!state.ok()) return Fail(state.status());
  Progress progress(true);
  // The recorded command line listens on the pod's port, where the workers
  // keep heartbeating; they register again once it answers.
  auto started = Replace(*state, state->coordinator_process);
  if (!started.ok()) return Fail(started.status());
  auto status = WaitUntilReady(*state, timeout_s, progress);
  if (!status.ok() && IsRunning(state->coordinator_process)) {
    // What is missing is a worker that is gone: the coordinator is said to
    // be back once it answers, so that the next command finds it.
    WaitUntilAnswering(state->coordinator, absl::Seconds(10));
    return Fail(absl::Status(status.status().code(),
                             absl::StrCat("the coordinator restarted (pid ", started->pid, ") at ", state->coordinator,
                                          ", but the pod is not ready: ", status.status().message(),
                                          "\nStart a worker that is not running again with `tpuemu cluster "
                                          "restart-worker HOST`; `tpuemu cluster status` shows the pod")));
  }
  if (!status.ok()) return Fail(status.status());
  std::cout << "coordinator restarted (pid " << started->pid << ") at " << state->coordinator << "; "
            << status->workers_size() << "/" << status->expected_workers() << " workers registered again\n";
  return 0;
}

// The running jobs on global host `host`, as "job-3 (train)".
std::vector<std::string> JobsRunningOn(CoordinatorClient& client, const v1::ClusterStatus& status, int host) {
  auto pod = Topology::Create(FromProto(status.spec()));
  auto jobs = client.List();
  std::vector<std::string> out;
  if (!pod.ok() || !jobs.ok()) return out;
  for (const v1::Job& job : jobs->jobs()) {
    if (job.state() != v1::JOB_STATE_RUNNING) continue;
    const std::vector<int> hosts = PlacedHosts(*pod, FromProto(job.placement()));
    if (std::find(hosts.begin(), hosts.end(), host) != hosts.end()) {
      out.push_back(absl::StrCat(job.id(), " (", ViewOf(job).kind, ")"));
    }
  }
  return out;
}

int RestartWorker(int host, double timeout_s, bool force) {
  auto state = LoadPodState();
  if (!state.ok()) return Fail(state.status());
  const int hosts = static_cast<int>(state->workers.size());
  if (host < 0 || host >= hosts) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("HOST ", host, ": the pod's hosts are 0 to ", hosts - 1,
                                                        " (the HOST column of `tpuemu cluster status`)")));
  }
  // Its address now, to know when the new process has taken the place: a
  // worker listens on a new port each time it starts.
  std::string old_address;
  CoordinatorClient client(state->coordinator);
  if (auto before = client.Status(2); before.ok()) {
    for (const auto& w : before->workers()) {
      if (w.host() == host) old_address = w.address();
    }
    // Restarting a worker ends the jobs on it: said before, not after.
    if (const auto running = JobsRunningOn(client, *before, host);
        !force && !running.empty() && IsRunning(state->workers[host].process)) {
      return Fail(absl::FailedPreconditionError(absl::StrCat(
          "worker host ", host, " runs ", absl::StrJoin(running, ", "),
          ": restarting it ends that (a job with max_restarts resumes from its checkpoint). Give --force to restart "
          "it anyway, or `tpuemu cancel` the job first")));
    }
  }
  Progress progress(true);
  auto started = Replace(*state, state->workers[host].process);
  if (!started.ok()) return Fail(started.status());
  auto status = WaitUntilReady(*state, timeout_s, progress, [&](const v1::ClusterStatus& s) {
    for (const auto& w : s.workers()) {
      if (w.host() == host) return w.alive() && w.address() != old_address;
    }
    return false;
  });
  if (!status.ok()) return Fail(status.status());
  std::cout << "worker host " << host << " restarted (pid " << started->pid << "); the pod is ready\n";
  return 0;
}

}  // namespace

void AddClusterRestartCommands(CLI::App& cluster, int* exit_code) {
  auto timeout = std::make_shared<double>(60);
  auto* coordinator = cluster.add_subcommand(
      "restart-coordinator",
      "start the coordinator of the pod `cluster up` started again, on the same address, with the command line\n"
      "the pod file recorded (stopping it first if it still runs), and wait until every worker has registered\n"
      "again. Its job store gives it every job back: finished ones as they were, queued ones run, the running\n"
      "one interrupted or resumed from its checkpoint (docs/jobs.md).");
  coordinator->add_option("--timeout", *timeout, "seconds to wait for every worker")
      ->capture_default_str()
      ->check(PositiveSeconds());
  coordinator->callback([timeout, exit_code] { *exit_code = RestartCoordinator(*timeout); });

  auto host = std::make_shared<int>(-1);
  auto force = std::make_shared<bool>(false);
  auto* worker = cluster.add_subcommand(
      "restart-worker",
      "start one worker of the pod `cluster up` started again, with the command line the pod file recorded\n"
      "(stopping it first if it still runs), record the new process and wait until it has taken its place.\n"
      "Example:\n  tpuemu cluster restart-worker 2");
  worker->add_option("HOST", *host, "the worker's host index, the HOST column of `tpuemu cluster status`")
      ->required()
      ->check(ZeroOrMore());  // the pod's own range is checked against its pod file
  worker->add_option("--timeout", *timeout, "seconds to wait for the worker")
      ->capture_default_str()
      ->check(PositiveSeconds());
  worker->add_flag("--force", *force, "restart it even while a job runs on it (the job ends)");
  worker->callback([host, timeout, force, exit_code] { *exit_code = RestartWorker(*host, *timeout, *force); });
}

}  // namespace tpuemu
