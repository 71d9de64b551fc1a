// `tpuemu plan --model M --topology CHIP:SHAPE --batch-tokens N`: which mesh
// for a model on a pod, by seed 001's closed forms; no pod needed
// (docs/plan.md).
#pragma once

#include "CLI/CLI.hpp"

namespace tpuemu {

void AddPlanCommand(CLI::App& app, int* exit_code);

}  // namespace tpuemu
