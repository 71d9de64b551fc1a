// grpc.health.v1 served with gRPC's synchronous API. gRPC's own default health
// service is built on its callback API, whose threads (two `nexting_thread`s
// per process in gRPC 1.51) also poll the server's sockets: in a worker they
// would read peer streams that one thread of the worker's own should read
// (services/peer_queue.h, docs/benchmarks.md "completion-queue API").
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "grpc/health/v1/health.grpc.pb.h"

namespace tpuemu {

class HealthService : public grpc::health::v1::Health::Service {
 public:
  // A service's status; the overall one is "". Unknown services answer
  // NOT_FOUND to Check and SERVICE_UNKNOWN to Watch, as gRPC's own does.
  void Set(const std::string& service, bool serving);
  // Every status NOT_SERVING from now on, and watches end (the server is
  // going away); StopServer and the server's deleter call it.
  void Shutdown();

  grpc::Status Check(grpc::ServerContext* context, const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  grpc::Status Watch(grpc::ServerContext* context, const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override;

 private:
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;
  Status StatusOf(const std::string& service) const;  // under mu_

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, bool> serving_;
  bool shut_down_ = false;
};

}  // namespace tpuemu
