// `tpuemu reference JOB.yaml`: a training job on one device, in-process, no
// pod needed: the baseline every sharded strategy must equal.
#pragma once

#include "CLI/CLI.hpp"

namespace tpuemu {

void AddReferenceCommand(CLI::App& app, int* exit_code);

// The job-file keys, one per line, for --help texts.
std::string JobKeysHelp();

}  // namespace tpuemu
