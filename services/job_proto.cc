#include "services/job_proto.h"

#include "services/proto_conv.h"
#include "services/train_proto.h"

namespace tpuemu {
namespace {

// SubmitJobRequest and RunJobRequest carry the same oneof of specs.
template <class Request>
absl::StatusOr<JobSpec> SpecOf(const Request& r) {
  if (r.has_train()) {
    if (auto faults = FromProto(r.train().config().faults()); !faults.ok()) return faults.status();
    return JobSpec(FromProto(r.train()));
  }
  if (r.has_matmul()) {
    auto m = FromProto(r.matmul());
    if (!m.ok()) return m.status();
    return JobSpec(*m);
  }
  auto c = FromProto(r.collective());
  if (!c.ok()) return c.status();
  return JobSpec(*c);
}

template <class Message>
void SetSpec(const JobSpec& spec, Message& m) {
  if (const auto* c = spec.get<CollectiveSpec>()) *m.mutable_collective() = ToProto(*c);
  if (const auto* mm = spec.get<MatmulSpec>()) *m.mutable_matmul() = ToProto(*mm);
  if (const auto* t = spec.get<TrainSpec>()) *m.mutable_train() = ToProto(*t);
}

// Reports read back from a job store stay the messages they were published
// as: a v1::Job holding only its report fields, and each step's v1::TrainStep.
using PublishedSummary = v1::Job;

v1::JobState StateToProto(JobState state) {
  switch (state) {
    case JobState::kPending: return v1::JOB_STATE_PENDING;
    case JobState::kRunning: return v1::JOB_STATE_RUNNING;
    case JobState::kSucceeded: return v1::JOB_STATE_SUCCEEDED;
    case JobState::kFailed: return v1::JOB_STATE_FAILED;
    case JobState::kCancelled: return v1::JOB_STATE_CANCELLED;
    case JobState::kInterrupted: return v1::JOB_STATE_INTERRUPTED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

absl::StatusOr<JobState> StateFromProto(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_PENDING: return JobState::kPending;
    case v1::JOB_STATE_RUNNING: return JobState::kRunning;
    case v1::JOB_STATE_SUCCEEDED: return JobState::kSucceeded;
    case v1::JOB_STATE_FAILED: return JobState::kFailed;
    case v1::JOB_STATE_CANCELLED: return JobState::kCancelled;
    case v1::JOB_STATE_INTERRUPTED: return JobState::kInterrupted;
    default: return absl::InvalidArgumentError(absl::StrCat("job state ", static_cast<int>(state), " is unknown"));
  }
}

// The job's field for a kind's report: its summary, or a step's figures
// (appended to its steps).
void AddJobReport(const JobReport& report, v1::Job& job) {
  if (const auto* c = std::any_cast<CollectiveReport>(&report)) *job.mutable_result() = ToProto(*c);
  if (const auto* m = std::any_cast<MatmulReport>(&report)) *job.mutable_matmul_result() = ToProto(*m);
  if (const auto* t = std::any_cast<TrainReport>(&report)) *job.mutable_train_summary() = ToProto(*t);
  if (const auto* s = std::any_cast<StepReport>(&report)) *job.add_steps() = ToProto(*s);
  if (const auto* p = std::any_cast<PublishedSummary>(&report)) job.MergeFrom(*p);
  if (const auto* p = std::any_cast<v1::TrainStep>(&report)) *job.add_steps() = *p;
}

}  // namespace

absl::StatusOr<JobSpec> JobSpecFromProto(const v1::SubmitJobRequest& request) { return SpecOf(request); }
absl::StatusOr<JobSpec> JobSpecFromProto(const v1::RunJobRequest& request) { return SpecOf(request); }

absl::StatusOr<JobRecord> RecordFromProto(const v1::Job& job, uint64_t number) {
  auto spec = SpecOf(job);
  if (!spec.ok()) return spec.status();
  auto state = StateFromProto(job.state());
  if (!state.ok()) return state.status();
  JobRecord record(job.id(), number, *std::move(spec));
  record.state = *state;
  record.error = job.error();
  record.submitted_unix_s = job.submitted_unix_s();
  record.finished_unix_s = job.finished_unix_s();
  PublishedSummary summary;
  if (job.has_result()) *summary.mutable_result() = job.result();
  if (job.has_matmul_result()) *summary.mutable_matmul_result() = job.matmul_result();
  if (job.has_train_summary()) *summary.mutable_train_summary() = job.train_summary();
  if (summary.ByteSizeLong() > 0) record.summary = std::move(summary);
  record.steps_dropped = job.steps_dropped();
  for (const v1::HostMemory& m : job.worker_memory()) record.worker_memory.push_back(FromProto(m));
  record.checkpoint_step = job.checkpoint_step();
  record.checkpoint_layout = job.checkpoint_layout();
  record.restarts = job.restarts();
  record.automatic_restarts = job.automatic_restarts();
  record.queued_ahead = job.queued_ahead();
  record.queued_unix_s = job.queued_unix_s();
  record.restart_reason = job.restart_reason();
  record.placement = FromProto(job.placement());
  record.started_unix_s = job.started_unix_s();
  record.priority = job.priority();
  return record;
}

JobReport StepFromProto(v1::TrainStep step) { return step; }

v1::TrainStep StepToProto(const JobReport& step) {
  v1::Job job;
  AddJobReport(step, job);
  return job.steps_size() == 1 ? job.steps(0) : v1::TrainStep();
}

v1::RunJobRequest ToProto(uint64_t job, const JobSpec& spec) {
  v1::RunJobRequest p;
  p.set_job(job);
  SetSpec(spec, p);
  return p;
}

v1::Job ToProto(const JobRecord& record) {
  v1::Job job;
  job.set_id(record.id);
  job.set_state(StateToProto(record.state));
  job.set_error(record.error);
  SetSpec(record.spec, job);
  job.set_submitted_unix_s(record.submitted_unix_s);
  job.set_finished_unix_s(record.finished_unix_s);
  AddJobReport(record.summary, job);
  for (const JobReport& step : record.steps) AddJobReport(step, job);
  job.set_steps_dropped(record.steps_dropped);
  for (const HostMemoryUse& m : record.worker_memory) *job.add_worker_memory() = ToProto(m);
  job.set_checkpoint_step(record.checkpoint_step);
  job.set_checkpoint_layout(record.checkpoint_layout);
  job.set_restarts(record.restarts);
  job.set_automatic_restarts(record.automatic_restarts);
  job.set_queued_ahead(record.queued_ahead);
  job.set_unsaved(record.unsaved);
  job.set_queued_unix_s(record.queued_unix_s);
  job.set_restart_reason(record.restart_reason);
  job.set_priority(record.priority);
  if (record.started_unix_s > 0) {
    *job.mutable_placement() = ToProto(record.placement);
    job.set_started_unix_s(record.started_unix_s);
  }
  return job;
}

}  // namespace tpuemu
