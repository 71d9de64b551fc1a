// Submitting a job and waiting for it with a progress line: shared by every
// command that runs something on the pod.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "client/coordinator_client.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {

// Submits, then polls until the job ends, showing `what` on stderr. A job
// that did not succeed is an error naming it and why.
absl::StatusOr<v1::Job> RunJob(CoordinatorClient& client, const v1::SubmitJobRequest& request, const std::string& what);

}  // namespace tpuemu
