#include "services/health_service.h"

#include <chrono>

namespace tpuemu {

using grpc::health::v1::HealthCheckResponse;

void HealthService::Set(const std::string& service, bool serving) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  serving_[service] = serving;
  changed_.notify_all();
}

void HealthService::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shut_down_ = true;
  for (auto& [_, serving] : serving_) serving = false;
  changed_.notify_all();
}

HealthService::Status HealthService::StatusOf(const std::string& service) const {
  auto it = serving_.find(service);
  if (it == serving_.end()) return HealthCheckResponse::SERVICE_UNKNOWN;
  return it->second ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

grpc::Status HealthService::Check(grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest* request,
                                  HealthCheckResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  const Status status = StatusOf(request->service());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "service '" + request->service() + "' is unknown");
  }
  response->set_status(status);
  return grpc::Status::OK;
}

grpc::Status HealthService::Watch(grpc::ServerContext* context, const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::ServerWriter<HealthCheckResponse>* writer) {
  std::unique_lock<std::mutex> lock(mu_);
  Status sent = HealthCheckResponse::UNKNOWN;  // never a current status: the first is always sent
  while (true) {
    const Status now = StatusOf(request->service());
    if (now != sent) {
      HealthCheckResponse response;
      response.set_status(now);
      lock.unlock();
      if (!writer->Write(response)) return grpc::Status::OK;  // the watcher left
      lock.lock();
      sent = now;
      // Look again before ending or waiting: a change while it wrote (the
      // server stopping) has woken no one, and is written next.
      continue;
    }
    if (shut_down_) return grpc::Status::OK;
    // A watcher that leaves is noticed within a second: the synchronous API
    // has no call-ended event. Checked before waiting, not after: a change
    // that wakes the wait (the server stopping) is written first.
    if (context->IsCancelled()) return grpc::Status::CANCELLED;
    changed_.wait_for(lock, std::chrono::seconds(1));
  }
}

}  // namespace tpuemu
