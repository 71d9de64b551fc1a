// `tpuemu simulate JOB.yaml --topology CHIP:SHAPE`: a training job run
// shape-only (values: none) on an emulated pod inside this process, no pod
// needed; prints what `submit --wait` prints (docs/simulate.md).
#pragma once

#include "CLI/CLI.hpp"

namespace tpuemu {

void AddSimulateCommand(CLI::App& app, int* exit_code);

}  // namespace tpuemu
