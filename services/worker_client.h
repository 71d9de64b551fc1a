// How the coordinator talks to one worker. An interface so that coordinator
// logic can be tested with fakes as well as over gRPC.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/base/cancellation.h"
#include "core/collective/executor.h"
#include "core/collective/spec.h"
#include "core/host/job_kind.h"
#include "core/pod/pod_config.h"

namespace tpuemu {

// One client per registration: every call but Ping carries its incarnation,
// which the worker checks. A job's calls last as long as the job's share of
// work on the worker, so they have no deadline: they end when `cancel` (the
// job's, driven by its abort) is cancelled. Short calls have deadlines.
class WorkerClient {
 public:
  virtual ~WorkerClient() = default;
  virtual absl::Status Configure(const PodConfig& config) = 0;
  virtual absl::Status PrepareJob(uint64_t job, const JobSpec& spec, Cancellation& cancel) = 0;
  virtual absl::StatusOr<std::vector<ChipRunResult>> RunJob(uint64_t job, int step, Cancellation& cancel) = 0;
  virtual absl::StatusOr<std::vector<ChipCheck>> CheckJob(uint64_t job, Cancellation& cancel) = 0;
  virtual absl::Status Abort(uint64_t job, const std::string& reason, absl::Duration timeout) = 0;
  // OK when the worker answers within `timeout`: tells a live holder of a
  // place from one whose heartbeats have merely not lapsed yet.
  virtual absl::Status Ping(absl::Duration timeout) = 0;
};

std::unique_ptr<WorkerClient> MakeGrpcWorkerClient(const std::string& address, uint64_t incarnation);

}  // namespace tpuemu
