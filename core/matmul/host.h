// One host's share of a matmul: a ChipMatmul per local chip.
#pragma once

#include <memory>
#include <vector>

#include "core/matmul/chip.h"
#include "core/host/job.h"

namespace tpuemu {

class HostMatmul : public HostJob {
 public:
  HostMatmul(std::shared_ptr<const MatmulProgram> program, HostNetwork& net, const RunOptions& options);
  absl::Status Prepare() override;
  absl::StatusOr<std::vector<ChipRunResult>> Run(int step = 0) override;
  std::vector<ChipCheck> Check() override;

 private:
  std::shared_ptr<const MatmulProgram> program_;
  HostNetwork& net_;
  const RunOptions options_;
  std::vector<std::unique_ptr<ChipMatmul>> chips_;
};

}  // namespace tpuemu
