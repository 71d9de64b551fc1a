// Which kind of job a spec asks for, and the host's share of it.
#pragma once

#include <memory>
#include <variant>

#include "absl/status/statusor.h"
#include "core/collective/spec.h"
#include "core/host/job.h"
#include "core/matmul/spec.h"
#include "core/train/job.h"

namespace tpuemu {

using JobSpec = std::variant<CollectiveSpec, MatmulSpec, TrainSpec>;

// Plans the job for this host's chips; a bad spec fails here.
absl::StatusOr<std::unique_ptr<HostJob>> MakeHostJob(const JobSpec& spec, HostNetwork& net, const RunOptions& options);

}  // namespace tpuemu
