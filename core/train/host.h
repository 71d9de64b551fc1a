// One host's share of a training job: a ChipTrainer per local chip, a step
// at a time (every host runs step k before any runs step k + 1).
#pragma once

#include <memory>
#include <vector>

#include "core/train/chip_trainer.h"
#include "core/host/job.h"
#include "core/wire/host_network.h"

namespace tpuemu {

class HostTrainer : public HostJob {
 public:
  HostTrainer(const TrainConfig& config, const TrainMesh& mesh, HostNetwork& net, uint64_t job,
              std::shared_ptr<JobAbort> abort = std::make_shared<JobAbort>());
  void Prepare() override;
  absl::StatusOr<std::vector<ChipRunResult>> Run(int step) override;
  std::vector<ChipCheck> Check() override;  // the chips' parameter squares
  const std::vector<std::unique_ptr<ChipTrainer>>& chips() const { return chips_; }

 private:
  const TrainConfig config_;
  const TrainMesh mesh_;
  HostNetwork& net_;
  RunOptions options_;  // the job and its abort
  std::vector<std::unique_ptr<ChipTrainer>> chips_;
};

}  // namespace tpuemu
