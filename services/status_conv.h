// The one place absl::Status and grpc::Status meet.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace tpuemu {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status, const std::string& context = "");

}  // namespace tpuemu
