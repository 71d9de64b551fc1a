// The CLI's view of a coordinator: calls with absl::Status results and errors
// that say what to do next. Replies up to kMaxReplyBytes are taken; lists and
// traces, which can be bigger, are read as streams of pieces.
#pragma once

#include <memory>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/transport_security.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {

class CoordinatorClient {
 public:
  // Secured as ClientSecurityFor(address) says (client/client_security.h).
  explicit CoordinatorClient(const std::string& address);
  CoordinatorClient(const std::string& address, const TransportSecurity& security);
  const std::string& address() const { return address_; }
  absl::StatusOr<v1::ClusterStatus> Status(double timeout_s = 3);
  absl::StatusOr<v1::Job> Submit(const v1::SubmitJobRequest& request);
  absl::StatusOr<v1::Job> Get(const std::string& id);
  // Every job the coordinator keeps, read in pieces, with what it dropped.
  absl::StatusOr<v1::ListJobsResponse> List();
  absl::StatusOr<v1::Job> Cancel(const std::string& id);
  absl::StatusOr<v1::AddFaultsResponse> AddFaults(const v1::AddFaultsRequest& request);
  absl::StatusOr<v1::Job> Resume(const std::string& id);
  // Reads a training job's trace piece by piece (the first carries the id and
  // extent); `on_piece` sees each in order, so that no reader holds it whole.
  absl::Status Trace(const std::string& id, const std::function<absl::Status(const v1::JobTrace&)>& on_piece);
  // Streams the job's every change until it ends; `on_change` sees each.
  absl::Status Watch(const std::string& id, const std::function<void(const v1::Job&)>& on_change);

 private:
  std::string address_;
  absl::Status unusable_;  // why there is no stub: no way to secure the channel (client_security.h)
  std::unique_ptr<v1::CoordinatorService::Stub> stub_;
};

}  // namespace tpuemu
