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

class HealthService;

// A service served from a completion queue of its own (gRPC's async API),
// such as the PeerService: it registers itself and its queue before the
// server is built, starts taking calls once the server has started, and
// once the server has shut down waits until its calls have ended (their
// last events still refer to the server).
class QueuedService {
 public:
  virtual ~QueuedService() = default;
  virtual void AddTo(grpc::ServerBuilder& builder) = 0;
  virtual void Start() = 0;
  virtual void AwaitCallsEnded() = 0;
};

// Deletes a server after shutting it down (at once, if it was not already):
// its health watches end first, and its queued service's calls after.
struct ServerStop {
  QueuedService* queued = nullptr;
  std::shared_ptr<HealthService> health;
  void operator()(grpc::Server* server) const;
};

struct RunningServer {
  std::shared_ptr<HealthService> health;  // before the server, which serves it
  std::unique_ptr<grpc::Server, ServerStop> server;
  int port = 0;
};

// The largest request any server takes (a submitted job file, a peer chunk).
inline constexpr int kMaxRequestBytes = 8 << 20;

// A client that follows a job (`tpuemu watch`, `submit --wait`, Python's
// Pod.watch) hears nothing for as long as a step takes, so a coordinator
// that froze, or a network path that died (a Kubernetes node gone), left it
// waiting for ever: it pings every kClientKeepaliveMs while a call is open,
// and gives the call up (UNAVAILABLE) when a ping goes unanswered for
// kClientKeepaliveTimeoutMs. Servers take pings that often
// (GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5 minutes by
// default, would answer them with GOAWAY "too_many_pings").
inline constexpr int kClientKeepaliveMs = 20'000;
inline constexpr int kClientKeepaliveTimeoutMs = 10'000;

// Channel arguments of the peer streams that carry tensor chunks, the same on
// the sending (GrpcFabric) and the receiving (StartServer) end.
const std::vector<std::pair<const char*, int>>& PeerStreamArgs();

// Serves `services` on `listen` with the process's security
// (services/transport_security.h): to members only (a worker's), or to members
// and clients with a token (the coordinator's), and a `queued` service.
absl::StatusOr<RunningServer> StartServer(const std::string& listen, const std::vector<grpc::Service*>& services,
                                          ServerPeers peers = ServerPeers::kMembersOnly,
                                          QueuedService* queued = nullptr);

// grpc.health.v1 on every server: the service "liveness" answers SERVING while
// the process serves at all; the overall service ("") answers SERVING only
// once the process is ready for work (a worker registered and configured, the
// coordinator with every worker of its pod). `tpuemu health` probes either.
inline constexpr char kLivenessService[] = "liveness";
void SetReady(RunningServer& server, bool ready);
// Shuts the server down within `grace`: health says NOT_SERVING and its
// watches end at once, calls in flight get the grace.
void StopServer(RunningServer& server, std::chrono::milliseconds grace);

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
