// WorkerService adapter: translates RPCs to a WorkerBackend (worker/).
#pragma once

#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collective/executor.h"
#include "core/collective/spec.h"
#include "core/host/job_kind.h"
#include "core/pod/pod_config.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {

struct WorkerStatusView {
  int host = -1;
  std::vector<int> chips;
  bool configured = false;
  uint64_t running_job = 0;
  uint64_t frames_waiting = 0;
  uint64_t frames_dropped = 0;  // frames of jobs this worker did not run
};

class WorkerBackend {
 public:
  virtual ~WorkerBackend() = default;
  // OK when `incarnation` is this process's registration: every call from
  // the coordinator but GetStatus carries the one it holds for the place.
  // `call` names the call for the refusal.
  virtual absl::Status CheckIncarnation(uint64_t incarnation, const std::string& call) = 0;
  virtual absl::Status Configure(const PodConfig& config) = 0;
  virtual absl::Status PrepareJob(uint64_t job, const JobSpec& spec) = 0;
  // Runs a prepared job (one not prepared, or aborted since, fails).
  virtual absl::StatusOr<std::vector<ChipRunResult>> RunJob(uint64_t job, int step) = 0;
  // Checks each local chip's result of a job that ran; forgets the job.
  virtual absl::StatusOr<std::vector<ChipCheck>> CheckJob(uint64_t job) = 0;
  virtual void Abort(uint64_t job, const std::string& reason) = 0;
  virtual WorkerStatusView Status() = 0;
};

PodConfig PodConfigFromProto(const v1::ConfigureRequest& request);
v1::ConfigureRequest PodConfigToProto(const PodConfig& config);

class WorkerServiceImpl : public v1::WorkerService::Service {
 public:
  explicit WorkerServiceImpl(WorkerBackend* backend) : backend_(backend) {}
  grpc::Status Configure(grpc::ServerContext*, const v1::ConfigureRequest* req, v1::ConfigureResponse*) override;
  grpc::Status PrepareJob(grpc::ServerContext*, const v1::RunJobRequest* req, v1::PrepareJobResponse*) override;
  grpc::Status RunJob(grpc::ServerContext*, const v1::RunJobRequest* req, v1::RunJobResponse* resp) override;
  grpc::Status CheckJob(grpc::ServerContext*, const v1::CheckJobRequest* req, v1::CheckJobResponse* resp) override;
  grpc::Status Abort(grpc::ServerContext*, const v1::AbortRequest* req, v1::AbortResponse*) override;
  grpc::Status GetStatus(grpc::ServerContext*, const v1::WorkerStatusRequest*, v1::WorkerStatus* resp) override;

 private:
  WorkerBackend* backend_;
};

}  // namespace tpuemu
