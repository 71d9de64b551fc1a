#include "client/job_wait.h"

#include "absl/strings/str_cat.h"
#include "views/job_json.h"
#include "client/progress.h"

namespace tpuemu {

absl::StatusOr<v1::Job> WaitForJob(CoordinatorClient& client, const std::string& id,
                                   const std::function<void(const v1::Job&)>& on_change) {
  v1::Job last;
  auto status = client.Watch(id, [&](const v1::Job& job) {
    last = job;
    on_change(job);
  });
  if (!status.ok()) return status;
  return last;
}

absl::StatusOr<v1::Job> RunJob(CoordinatorClient& client, const v1::SubmitJobRequest& request, const std::string& what) {
  auto job = client.Submit(request);
  if (!job.ok()) return job.status();
  Progress progress(true);
  auto done = WaitForJob(client, job->id(), [&](const v1::Job& j) {
    progress.Update(absl::StrCat(j.id(), ": ", what, j.state() == v1::JOB_STATE_PENDING ? " (queued)" : ""));
  });
  progress.Done();
  if (!done.ok()) return done.status();
  if (done->state() != v1::JOB_STATE_SUCCEEDED) {
    return absl::AbortedError(absl::StrCat(done->id(), " ", HowItEnded(*done)));
  }
  return done;
}

}  // namespace tpuemu
