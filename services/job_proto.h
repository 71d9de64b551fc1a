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

}  // namespace tpuemu
