#include "services/server.h"

#include <csignal>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "services/health_service.h"
#include "services/tcp_congestion.h"
#include "spdlog/spdlog.h"

namespace tpuemu {

const std::vector<std::pair<const char*, int>>& PeerStreamArgs() {
  static const std::vector<std::pair<const char*, int>> args = {
      // Bulk tensor data: big HTTP/2 frames and windows. gRPC's bandwidth
      // probe stays on: without it gRPC 1.51 keeps the connection's window
      // at 64 KiB (the lookahead sets the streams' only), and every 64 KiB
      // frame waits a round trip for it; with it, 1 MiB frames are slower
      // instead (docs/benchmarks.md, "gRPC's flow control").
      {GRPC_ARG_HTTP2_MAX_FRAME_SIZE, (16 << 20) - 1},
      {GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 << 20},
      {GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, 8 << 20},
      // Reads of about one chunk: a received chunk pins the whole read buffer
      // it landed in until its chip takes it (a paced chunk waits until it is
      // due), so reads of 4-8 MiB multiplied the memory each link held, and on
      // a fresh worker that memory faulted in while timed (~1900 faults per
      // worker in the first paced 8 MiB all-gather; 18-490 with these sizes).
      {GRPC_ARG_TCP_READ_CHUNK_SIZE, 1 << 20},
      {GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, 2 << 20},
  };
  return args;
}

absl::StatusOr<RunningServer> StartServer(const std::string& listen, const std::vector<grpc::Service*>& services,
                                          ServerPeers peers, QueuedService* queued) {
  // Health is served by a service of ours (services/health_service.h says why).
  grpc::EnableDefaultHealthCheckService(false);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  RunningServer running;
  running.health = std::make_shared<HealthService>();
  builder.AddListeningPort(listen, MakeServerCredentials(peers), &running.port);
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  // No SO_REUSEPORT. With it, gRPC 1.51 clones each listener once per extra
  // poller at Start, and a clone of a port-0 listener binds a port of its own:
  // every server listening on port 0 also served its whole API on a second,
  // unreported port. (It would also let another process bind the same
  // explicit port and take half of its connections.)
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  for (const auto& [name, value] : PeerStreamArgs()) builder.AddChannelArgument(name, value);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, kClientKeepaliveMs / 2);
  if (auto option = PeerTcpCongestionOption()) builder.SetOption(std::move(option));
  // As gRPC's own health service starts: the overall service serving.
  running.health->Set("", true);
  running.health->Set(kLivenessService, true);
  builder.RegisterService(running.health.get());
  for (grpc::Service* s : services) builder.RegisterService(s);
  if (queued != nullptr) queued->AddTo(builder);
  running.server =
      std::unique_ptr<grpc::Server, ServerStop>(builder.BuildAndStart().release(), ServerStop{queued, running.health});
  if (!running.server || running.port == 0) {
    return absl::UnavailableError(absl::StrCat("--listen '", listen,
                                               "': could not listen there (in use, or not a local address?)"));
  }
  if (queued != nullptr) queued->Start();
  return running;
}

void ServerStop::operator()(grpc::Server* server) const {
  if (health) health->Shutdown();
  server->Shutdown(std::chrono::system_clock::now());  // returns at once if already shut down
  if (queued != nullptr) queued->AwaitCallsEnded();
  delete server;
}

void StopServer(RunningServer& server, std::chrono::milliseconds grace) {
  if (server.health) server.health->Shutdown();
  if (server.server) server.server->Shutdown(std::chrono::system_clock::now() + grace);
}

void SetReady(RunningServer& server, bool ready) {
  // The overall service only: "liveness" stays serving while the process serves.
  if (server.health) server.health->Set("", ready);
}

void BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A handler too, though sigtimedwait takes the signals: in a container the
  // process is its PID namespace's init, and the kernel drops signals sent to
  // an init whose handler is SIG_DFL unless they are blocked; with a handler
  // no kernel (gVisor's included) may drop them. Installed after blocking, so
  // that no signal reaches the empty handler.
  struct sigaction action {};
  action.sa_handler = [](int) {};
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

void WaitForShutdownSignal(std::chrono::milliseconds period, const std::function<void()>& tick) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  const timespec timeout{static_cast<time_t>(period.count() / 1000), static_cast<long>(period.count() % 1000) * 1000000};
  while (sigtimedwait(&set, nullptr, &timeout) < 0) tick();
}

void ExitAfter(std::chrono::milliseconds grace, int exit_code) {
  std::thread([grace, exit_code] {
    std::this_thread::sleep_for(grace);
    spdlog::warn("draining took longer than {} ms; exiting now", grace.count());
    std::_Exit(exit_code);
  }).detach();
}

}  // namespace tpuemu
