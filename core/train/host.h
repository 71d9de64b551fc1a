// One host's share of a training job: a ChipTrainer per local chip, a step
// at a time (every host runs step k before any runs step k + 1).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/train/chip_trainer.h"
#include "core/host/job.h"
#include "core/wire/host_network.h"

namespace tpuemu {

// Where the host's chips keep their checkpoints (core/train/checkpoint.h),
// and the step a resumed job starts from (its checkpoint is read at Prepare).
struct TrainCheckpoints {
  std::string dir;
  int resume_step = 0;
};

class HostTrainer : public HostJob {
 public:
  HostTrainer(const TrainConfig& config, const TrainMesh& mesh, HostNetwork& net, uint64_t job,
              std::shared_ptr<JobAbort> abort = std::make_shared<JobAbort>(), TrainCheckpoints checkpoints = {},
              WorkerFaultAction worker_fault_action = {});
  absl::Status Prepare() override;
  absl::StatusOr<std::vector<ChipRunResult>> Run(int step) override;
  // The job's own faults and `added`, for its chips from now on.
  absl::Status AddFaults(const Faults& added) override;
  std::vector<ChipCheck> Check() override;  // the chips' parameter squares
  const std::vector<std::unique_ptr<ChipTrainer>>& chips() const { return chips_; }

 private:
  // Every local chip's state after `done` steps.
  absl::Status SaveCheckpoint(int done);
  // The job's kill_worker and pause_worker due on this host at `step`, on its
  // first attempt: carried out by the process (an error without one).
  absl::Status WorkerFaultsAt(int step);

  const TrainConfig config_;
  const TrainMesh mesh_;
  HostNetwork& net_;
  RunOptions options_;  // the job and its abort
  const TrainCheckpoints checkpoints_;
  const WorkerFaultAction worker_fault_action_;
  std::vector<std::unique_ptr<ChipTrainer>> chips_;
};

}  // namespace tpuemu
