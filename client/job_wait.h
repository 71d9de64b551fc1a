// Waiting for jobs: shared by every command that runs something on the pod.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "client/coordinator_client.h"
#include "client/progress.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {

// Follows the job on the coordinator's watch stream until it ends;
// `on_change` sees every version. Returns the job as it ended.
absl::StatusOr<v1::Job> WaitForJob(CoordinatorClient& client, const std::string& id,
                                   const std::function<void(const v1::Job&)>& on_change);

// `text` and, for a pending job, what it waits for (" (queued #2: the whole
// pod, while ...)") on `progress`: a line of its own when it waits in the
// queue (Progress::Note), else the progress line.
void ShowJobProgress(Progress& progress, const v1::Job& job, const std::string& text);

// Submits, then waits with a progress line showing `what`. A job that did
// not succeed is an error naming it and why. Interrupted (Ctrl-C), it
// cancels the job: the result was for this command only.
absl::StatusOr<v1::Job> RunJob(CoordinatorClient& client, const v1::SubmitJobRequest& request, const std::string& what);

}  // namespace tpuemu
