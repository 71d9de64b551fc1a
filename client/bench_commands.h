// tpuemu bench collective
#pragma once

#include "CLI/CLI.hpp"

namespace tpuemu {

void AddBenchCommands(CLI::App& app, int* exit_code);

}  // namespace tpuemu
