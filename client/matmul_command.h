// `tpuemu matmul`: a sharded matmul in the seeds' notation, planned, run on
// the pod with BLIS and checked against one device.
#pragma once

#include "CLI/CLI.hpp"

namespace tpuemu {

void AddMatmulCommand(CLI::App& app, int* exit_code);

}  // namespace tpuemu
