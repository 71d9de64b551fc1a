// The CLI's view of a coordinator: unary calls with absl::Status results and
// errors that say what to do next.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {

class CoordinatorClient {
 public:
  explicit CoordinatorClient(const std::string& address);
  const std::string& address() const { return address_; }
  absl::StatusOr<v1::ClusterStatus> Status(double timeout_s = 3);
  absl::StatusOr<v1::Job> Submit(const v1::SubmitJobRequest& request);
  absl::StatusOr<v1::Job> Get(const std::string& id);

 private:
  std::string address_;
  std::unique_ptr<v1::CoordinatorService::Stub> stub_;
};

}  // namespace tpuemu
