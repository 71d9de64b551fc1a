// `tpuemu fault JOB --slow-link ... --straggler ... --down-link ...`: faults
// into a running training job, from its next step (docs/faults.md).
#pragma once

#include "CLI/CLI.hpp"

namespace tpuemu {

void AddFaultCommand(CLI::App& app, int* exit_code);

}  // namespace tpuemu
