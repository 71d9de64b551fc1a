#include "services/job_proto.h"

#include "services/proto_conv.h"
#include "services/train_proto.h"

namespace tpuemu {
namespace {

// SubmitJobRequest and RunJobRequest carry the same oneof of specs.
template <class Request>
absl::StatusOr<JobSpec> SpecOf(const Request& r) {
  if (r.has_train()) return JobSpec(FromProto(r.train()));
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

}  // namespace

absl::StatusOr<JobSpec> JobSpecFromProto(const v1::SubmitJobRequest& request) { return SpecOf(request); }
absl::StatusOr<JobSpec> JobSpecFromProto(const v1::RunJobRequest& request) { return SpecOf(request); }

v1::RunJobRequest ToProto(uint64_t job, const JobSpec& spec) {
  v1::RunJobRequest p;
  p.set_job(job);
  SetSpec(spec, p);
  return p;
}

void SetJobSpec(const JobSpec& spec, v1::Job& job) { SetSpec(spec, job); }

void AddJobReport(const JobReport& report, v1::Job& job) {
  if (const auto* c = std::any_cast<CollectiveReport>(&report)) *job.mutable_result() = ToProto(*c);
  if (const auto* m = std::any_cast<MatmulReport>(&report)) *job.mutable_matmul_result() = ToProto(*m);
  if (const auto* t = std::any_cast<TrainReport>(&report)) *job.mutable_train_summary() = ToProto(*t);
  if (const auto* s = std::any_cast<StepReport>(&report)) *job.add_steps() = ToProto(*s);
}

}  // namespace tpuemu
