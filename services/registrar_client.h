// The registrar over gRPC: how a worker process registers with its
// coordinator and heartbeats.
#pragma once

#include <memory>
#include <string>

#include "core/cluster/registrar.h"

namespace tpuemu {

std::unique_ptr<Registrar> MakeGrpcRegistrar(const std::string& coordinator);

}  // namespace tpuemu
