// `tpuemu credentials create DIR`: a pod's CA, member certificate and tokens
// (services/credentials.h), for docker compose and Kubernetes (a local pod
// makes its own on `cluster up`). docs/security.md.
#pragma once

#include "CLI/CLI.hpp"

namespace tpuemu {

void AddCredentialsCommand(CLI::App& app, int* exit_code);

}  // namespace tpuemu
