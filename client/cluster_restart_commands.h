// tpuemu cluster restart-coordinator | restart-worker HOST: start one process
// of a local pod again with the command line the pod file recorded, and
// record the new process, so that `cluster down` stops it too.
#pragma once

#include "CLI/CLI.hpp"

namespace tpuemu {

void AddClusterRestartCommands(CLI::App& cluster, int* exit_code);

}  // namespace tpuemu
