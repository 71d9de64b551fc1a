// Job verbs: submit a training job file, list jobs, show, watch and cancel one.
#pragma once

#include "CLI/CLI.hpp"

namespace tpuemu {

void AddJobCommands(CLI::App& app, int* exit_code);

}  // namespace tpuemu
