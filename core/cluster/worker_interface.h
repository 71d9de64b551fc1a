// The worker contract: what the coordinator asks of one worker (an emulated
// TPU host). The worker implements it (worker/worker_node.h), its gRPC client
// implements it over the wire (services/worker_client.h) and the gRPC
// WorkerService serves any implementation of it (services/worker_service.h),
// so that the coordinator drives workers in its own process and on other
// machines alike, as TensorFlow's WorkerInterface is implemented by its local
// and its remote worker.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/base/cancellation.h"
#include "core/host/chip_result.h"
#include "core/host/job.h"
#include "core/host/job_kind.h"
#include "core/pod/faults.h"
#include "core/pod/placement.h"
#include "core/pod/pod_config.h"

namespace tpuemu {

// What a worker says when it checks a job: each local chip's check, and
// its memory over the job.
struct HostCheck {
  std::vector<ChipCheck> chips;
  HostMemoryUse memory;
};

struct WorkerStatusView {
  int host = -1;
  std::vector<int> chips;
  bool configured = false;
  uint64_t running_job = 0;
  uint64_t frames_waiting = 0;
  uint64_t frames_dropped = 0;  // frames of jobs this worker did not run
};

// Every call but Status names the registration it is meant for (the
// incarnation the coordinator gave it): a worker refuses calls meant for a
// process that held its place before, or after, it.
//
// kUnavailable means a call did not reach the worker, and the coordinator
// counts it lost; a worker's own answers never carry that code.
//
// A job's calls last as long as the job's share of work on the worker, so
// they have no deadline: a client gives up on them when `cancel` (the job's,
// driven by its abort) is cancelled, and the worker ends the work itself
// when it hears the job's Abort. Short calls have deadlines.
class WorkerInterface {
 public:
  virtual ~WorkerInterface() = default;
  virtual absl::Status Configure(uint64_t incarnation, const PodConfig& config) = 0;
  // The job runs on `placement`'s chips, named by its own ids (the whole pod
  // by default); only the workers of its hosts are called.
  virtual absl::Status PrepareJob(uint64_t incarnation, uint64_t job, const JobSpec& spec, const Placement& placement,
                                  Cancellation& cancel) = 0;
  // Runs a step of a prepared job (one not prepared, or aborted since,
  // fails); only training has steps past 0. `added`: the faults `tpuemu
  // fault` added to it while it runs (all of them, each from its step),
  // the same for every worker at every step.
  virtual absl::StatusOr<std::vector<ChipRunResult>> RunJob(uint64_t incarnation, uint64_t job, int step,
                                                            const Faults& added, Cancellation& cancel) = 0;
  // Checks each local chip's result of a job that ran; forgets the job and
  // gives its memory back.
  virtual absl::StatusOr<HostCheck> CheckJob(uint64_t incarnation, uint64_t job,
                                                          Cancellation& cancel) = 0;
  virtual absl::Status Abort(uint64_t incarnation, uint64_t job, const std::string& reason,
                             absl::Duration timeout) = 0;
  // Answers within `timeout` when the worker is alive: tells a live holder
  // of a place from one whose heartbeats have merely not lapsed yet.
  virtual absl::StatusOr<WorkerStatusView> Status(absl::Duration timeout) = 0;
  // True once each time the connection to the worker is found gone since it
  // was last up (over gRPC: the channel left READY, as when the process
  // exited). The coordinator then asks the worker at once instead of waiting
  // for its heartbeats to lapse. A worker in the same process never drops.
  virtual bool ConnectionDropped() { return false; }
};

}  // namespace tpuemu
