// CoordinatorService adapter: translates RPCs to a CoordinatorBackend
// (coordinator/). Jobs and cluster status are plain tpuemu.v1 messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/server.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {

// Every reply the coordinator sends whole (a job, the cluster status) fits in
// what a client takes: a job's biggest part is the file it was submitted with,
// which came in a request (kMaxRequestBytes, services/server.h), and its step
// records are capped (JobRetention). Job lists and traces have no such bound,
// so they come as streams of pieces of about kReplyPieceBytes each.
inline constexpr int kMaxReplyBytes = 2 * kMaxRequestBytes;
inline constexpr size_t kReplyPieceBytes = 1 << 20;

// A job's trace read piece by piece, from a snapshot taken when it was asked
// for: Next fills `piece` with about `max_bytes` of it (the first piece also
// with the id and extent) and is false once everything was given.
class JobTraceReader {
 public:
  virtual ~JobTraceReader() = default;
  virtual bool Next(size_t max_bytes, v1::JobTrace* piece) = 0;
};

class CoordinatorBackend {
 public:
  virtual ~CoordinatorBackend() = default;
  virtual absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(const v1::RegisterWorkerRequest& request) = 0;
  virtual absl::Status Heartbeat(int global_host, uint64_t incarnation, uint64_t resident_bytes) = 0;
  // Of `jobs` (job numbers), those no record can resume.
  virtual std::vector<uint64_t> ForgottenJobs(const std::vector<uint64_t>& jobs) = 0;
  virtual v1::ClusterStatus ClusterStatus() = 0;
  virtual absl::StatusOr<v1::Job> SubmitJob(const v1::SubmitJobRequest& request) = 0;
  virtual absl::StatusOr<v1::Job> GetJob(const std::string& id) = 0;
  // Every job kept, oldest first, and how many finished ones were dropped.
  virtual v1::ListJobsResponse ListJobs() = 0;
  // Waits until the job's version passes `after_version` (or timeout) and
  // returns the job with its current version.
  virtual absl::StatusOr<std::pair<v1::Job, int64_t>> WaitJob(const std::string& id, int64_t after_version,
                                                              absl::Duration timeout) = 0;
  virtual absl::StatusOr<v1::Job> CancelJob(const std::string& id) = 0;
  virtual absl::StatusOr<v1::AddFaultsResponse> AddFaults(const v1::AddFaultsRequest& request) = 0;
  virtual absl::StatusOr<v1::Job> ResumeJob(const std::string& id) = 0;
  // Its kept steps' spans, or the latest `latest_steps` steps' when above 0.
  virtual absl::StatusOr<std::unique_ptr<JobTraceReader>> ReadJobTrace(const std::string& id,
                                                                       int64_t latest_steps) = 0;
};

class CoordinatorServiceImpl : public v1::CoordinatorService::Service {
 public:
  // `web_port`: where the coordinator's web view listens (0: nowhere), for
  // the pod's status.
  explicit CoordinatorServiceImpl(CoordinatorBackend* backend, int web_port = 0, std::string web_address = "")
      : backend_(backend), web_port_(web_port), web_address_(std::move(web_address)) {}
  grpc::Status RegisterWorker(grpc::ServerContext*, const v1::RegisterWorkerRequest* req,
                              v1::RegisterWorkerResponse* resp) override;
  grpc::Status StreamJobTrace(grpc::ServerContext*, const v1::GetJobRequest* req,
                              grpc::ServerWriter<v1::JobTrace>* writer) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* req, v1::HeartbeatResponse*) override;
  grpc::Status ForgottenJobs(grpc::ServerContext*, const v1::ForgottenJobsRequest* req,
                             v1::ForgottenJobsResponse* resp) override;
  grpc::Status GetClusterStatus(grpc::ServerContext*, const v1::ClusterStatusRequest*,
                                v1::ClusterStatus* resp) override;
  grpc::Status SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* req, v1::Job* resp) override;
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* req, v1::Job* resp) override;
  grpc::Status StreamJobs(grpc::ServerContext*, const v1::ListJobsRequest*,
                          grpc::ServerWriter<v1::ListJobsResponse>* writer) override;
  grpc::Status WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest* req,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext*, const v1::CancelJobRequest* req, v1::Job* resp) override;
  grpc::Status AddFaults(grpc::ServerContext*, const v1::AddFaultsRequest* req, v1::AddFaultsResponse* resp) override;
  grpc::Status ResumeJob(grpc::ServerContext*, const v1::ResumeJobRequest* req, v1::Job* resp) override;

 private:
  CoordinatorBackend* backend_;
  const int web_port_;
  const std::string web_address_;
};

bool IsTerminal(v1::JobState state);

}  // namespace tpuemu
