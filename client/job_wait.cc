#include "client/job_wait.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "views/job_json.h"
#include "client/interrupt.h"
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

namespace {

// " (queued #2: ...)" for a pending job, " (starting)" for one that waits
// for nothing, else "".
std::string Waiting(const v1::Job& job) {
  if (job.state() != v1::JOB_STATE_PENDING) return "";
  if (job.waiting_for().empty()) return " (starting)";
  return absl::StrCat(" (queued #", job.queue_position(), ": ", job.waiting_for(), ")");
}

}  // namespace

void ShowJobProgress(Progress& progress, const v1::Job& job, const std::string& text) {
  const std::string line = absl::StrCat(text, Waiting(job));
  job.state() == v1::JOB_STATE_PENDING && !job.waiting_for().empty() ? progress.Note(line) : progress.Update(line);
}

absl::StatusOr<v1::Job> RunJob(CoordinatorClient& client, const v1::SubmitJobRequest& request, const std::string& what) {
  auto job = client.Submit(request);
  if (!job.ok()) return job.status();
  // Its result is for this command only: interrupted, the job goes too.
  // A client of its own: the interrupt's thread may outlive this call's.
  OnInterrupt cancel([address = client.address(), id = job->id(), what] {
    const bool cancelled = CoordinatorClient(address).Cancel(id).ok();
    std::fprintf(stderr, "interrupted: %s (%s) %s\n", id.c_str(), what.c_str(),
                 cancelled ? "cancelled" : "may still run: `tpuemu cancel` it");
  });
  Progress progress(true);
  auto done = WaitForJob(client, job->id(),
                         [&](const v1::Job& j) { ShowJobProgress(progress, j, absl::StrCat(j.id(), ": ", what)); });
  progress.Done();
  if (!done.ok()) return done.status();
  if (done->state() != v1::JOB_STATE_SUCCEEDED) {
    return absl::AbortedError(absl::StrCat(done->id(), " ", HowItEnded(*done)));
  }
  return done;
}

}  // namespace tpuemu
