// The job kinds, chosen here and nowhere else: collectives, matmuls and
// training are registered from the start; another kind (a test's) registers
// itself. Everything else runs a job through its kind's interface
// (core/host/job_kind.h) without knowing which kind it is.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/host/job_kind.h"

namespace tpuemu {

// The kind named `name`, or an error naming the kinds there are. Kinds are
// never removed: the pointer stays valid.
absl::StatusOr<const JobKind*> FindJobKind(const std::string& name);

// The names of the kinds registered so far, in order.
std::vector<std::string> JobKindNames();

// Adds a kind; refuses one whose name is taken.
absl::Status RegisterJobKind(std::unique_ptr<JobKind> kind);

// Checks and plans `spec` with its kind, for the pod that runs at `time_scale`.
absl::StatusOr<std::unique_ptr<PlannedJob>> PlanJob(const JobSpec& spec, const Topology& topo, double time_scale);

}  // namespace tpuemu
