// The job kinds on the wire: every kind's spec and reports to and from its
// tpuemu.v1 messages, in this one place (a kind that travels between
// processes adds its lines here; its messages sit in proto/tpuemu/v1/).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/host/job_kind.h"
#include "core/job/record.h"
#include "tpuemu/v1/coordinator.pb.h"
#include "tpuemu/v1/worker.pb.h"

namespace tpuemu {

absl::StatusOr<JobSpec> JobSpecFromProto(const v1::SubmitJobRequest& request);
absl::StatusOr<JobSpec> JobSpecFromProto(const v1::RunJobRequest& request);
// PrepareJob's request.
v1::RunJobRequest ToProto(uint64_t job, const JobSpec& spec);
// A job's record as users see it.
v1::Job ToProto(const JobRecord& record);

// A record as a job store read it back from its own ToProto (numbered
// `number`): the spec decoded again, the reports kept as they were published
// (so that a restarted coordinator shows them bit for bit), its steps added
// after with StepFromProto.
absl::StatusOr<JobRecord> RecordFromProto(const v1::Job& job, uint64_t number);
JobReport StepFromProto(v1::TrainStep step);
// A finished step's report as published (an empty message for a kind
// without step reports).
v1::TrainStep StepToProto(const JobReport& step);

}  // namespace tpuemu
