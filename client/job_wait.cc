#include "client/job_wait.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "client/progress.h"
#include "services/coordinator_service.h"

namespace tpuemu {

absl::StatusOr<v1::Job> RunJob(CoordinatorClient& client, const v1::SubmitJobRequest& request, const std::string& what) {
  auto job = client.Submit(request);
  if (!job.ok()) return job.status();
  Progress progress(true);
  while (!IsTerminal(job->state())) {
    progress.Update(absl::StrCat(job->id(), ": ", what, job->state() == v1::JOB_STATE_PENDING ? " (queued)" : ""));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    job = client.Get(job->id());
    if (!job.ok()) return job.status();
  }
  progress.Done();
  if (job->state() != v1::JOB_STATE_SUCCEEDED) {
    return absl::AbortedError(absl::StrCat(
        job->id(), " ", job->state() == v1::JOB_STATE_CANCELLED ? "was cancelled" : "failed: " + job->error()));
  }
  return job;
}

}  // namespace tpuemu
