#include "services/status_conv.h"

#include "absl/strings/str_cat.h"

namespace tpuemu {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status, const std::string& context) {
  if (status.ok()) return absl::OkStatus();
  std::string message = status.error_message();
  if (!context.empty()) message = absl::StrCat(context, ": ", message);
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), message);
}

}  // namespace tpuemu
