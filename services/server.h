// Starting a gRPC server the same way everywhere: the given services plus
// grpc.health.v1 and server reflection, on host:port (port 0 = any free port).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "services/transport_security.h"

namespace tpuemu {

struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

// The largest request any server takes (a submitted job file, a peer chunk).
inline constexpr int kMaxRequestBytes = 8 << 20;

// Channel arguments of the peer streams that carry tensor chunks, the same on
// the sending (GrpcFabric) and the receiving (StartServer) end.
const std::vector<std::pair<const char*, int>>& PeerStreamArgs();

// Serves `services` on `listen` with the process's security
// (services/transport_security.h): to members only (a worker's), or to members
// and clients with a token (the coordinator's).
absl::StatusOr<RunningServer> StartServer(const std::string& listen, const std::vector<grpc::Service*>& services,
                                          ServerPeers peers = ServerPeers::kMembersOnly);

// grpc.health.v1 on every server: the service "liveness" answers SERVING while
// the process serves at all; the overall service ("") answers SERVING only
// once the process is ready for work (a worker registered and configured, the
// coordinator with every worker of its pod). `tpuemu health` probes either.
inline constexpr char kLivenessService[] = "liveness";
void SetReady(RunningServer& server, bool ready);

// Blocks SIGINT and SIGTERM for every thread started afterwards, so that
// WaitForShutdownSignal receives them. Call before starting any thread.
void BlockShutdownSignals();
// Calls `tick` every `period` until SIGINT or SIGTERM arrives.
void WaitForShutdownSignal(std::chrono::milliseconds period, const std::function<void()>& tick);
// After a shutdown signal: if draining has not finished within `grace`,
// exits the process anyway with `exit_code` (a stuck call must not outlive
// the grace period Kubernetes and compose give before SIGKILL).
void ExitAfter(std::chrono::milliseconds grace, int exit_code);

}  // namespace tpuemu
