// One job's calls to every worker of its placement: each prepares its share,
// all run each step at once, then each checks; the first failure ends the
// job for all.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/registry.h"
#include "core/base/cancellation.h"
#include "core/host/chip_result.h"
#include "core/host/job.h"
#include "core/host/job_spec.h"
#include "core/pod/placement.h"

namespace tpuemu {

struct FanOutCalls {
  uint64_t job = 0;  // the job's number, which workers know it by
  const JobSpec* spec = nullptr;
  Placement placement;  // where it runs: `workers` are its hosts'
  int first_step = 0;  // a resumed job's: the steps before it were done
  int steps = 1;
  // Cancelled when the job is ended: the calls in flight return promptly.
  Cancellation* calls = nullptr;
  // The faults added while the job runs, for `step`, read as it is sent out
  // (none if unset).
  std::function<Faults(int step)> added_faults;
  // Takes every step's results from all workers; a non-OK return stops the job.
  std::function<absl::Status(int step, std::vector<ChipRunResult>&& chips)> on_step;
  // A worker's call failed: ends the job (its other calls cancelled, every
  // worker told to abort) and returns the error the job ends with.
  std::function<absl::Status(int host, const absl::Status& failure)> on_failure;
};

// Prepare on every worker, run `steps` times, then check; the chips' checks
// come back in `checks`, each worker's memory over the job in `memory` (by
// host). Returns the first failure's error, or Cancelled once `calls` was
// cancelled.
absl::Status FanOut(const std::vector<RegisteredWorker>& workers, const FanOutCalls& job,
                    std::vector<ChipCheck>& checks, std::vector<HostMemoryUse>& memory);

}  // namespace tpuemu
