// WorkerService adapter: serves any implementation of the worker contract
// (core/cluster/worker_interface.h), the worker's own node in tpuemu-worker.
#pragma once

#include "core/cluster/worker_interface.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {

class WorkerServiceImpl : public v1::WorkerService::Service {
 public:
  explicit WorkerServiceImpl(WorkerInterface* worker) : worker_(worker) {}
  grpc::Status Configure(grpc::ServerContext*, const v1::ConfigureRequest* req, v1::ConfigureResponse*) override;
  grpc::Status PrepareJob(grpc::ServerContext*, const v1::RunJobRequest* req, v1::PrepareJobResponse*) override;
  grpc::Status RunJob(grpc::ServerContext*, const v1::RunJobRequest* req, v1::RunJobResponse* resp) override;
  grpc::Status CheckJob(grpc::ServerContext*, const v1::CheckJobRequest* req, v1::CheckJobResponse* resp) override;
  grpc::Status Abort(grpc::ServerContext* ctx, const v1::AbortRequest* req, v1::AbortResponse*) override;
  grpc::Status GetStatus(grpc::ServerContext* ctx, const v1::WorkerStatusRequest*, v1::WorkerStatus* resp) override;

 private:
  WorkerInterface* worker_;
};

}  // namespace tpuemu
