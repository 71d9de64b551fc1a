// The worker contract over gRPC: how the coordinator reaches a worker in
// another process.
#pragma once

#include <memory>
#include <string>

#include "core/cluster/worker_interface.h"

namespace tpuemu {

std::unique_ptr<WorkerInterface> MakeGrpcWorkerClient(const std::string& address);

}  // namespace tpuemu
