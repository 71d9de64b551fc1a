// Starting a gRPC server the same way everywhere: the given services plus
// grpc.health.v1 and server reflection, on host:port (port 0 = any free port).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace tpuemu {

struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

// Channel arguments of the peer streams that carry tensor chunks, the same on
// the sending (GrpcFabric) and the receiving (StartServer) end.
const std::vector<std::pair<const char*, int>>& PeerStreamArgs();

absl::StatusOr<RunningServer> StartServer(const std::string& listen, const std::vector<grpc::Service*>& services);

// Blocks until SIGINT or SIGTERM. Call before starting any thread.
void BlockShutdownSignals();
void WaitForShutdownSignal();

}  // namespace tpuemu
