// `tpuemu health ADDR`: a grpc.health.v1 probe of any tpuemu server, for
// container healthchecks and Kubernetes probes (no extra tool in the image).
#pragma once

#include "CLI/CLI.hpp"

namespace tpuemu {

void AddHealthCommand(CLI::App& app, int* exit_code);

}  // namespace tpuemu
