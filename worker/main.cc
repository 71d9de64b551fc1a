// tpuemu-worker: one emulated TPU host. Starts its WorkerService and
// PeerService, registers with the coordinator and heartbeats until stopped.
#include <atomic>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "services/peer_service.h"
#include "services/server.h"
#include "services/status_conv.h"
#include "spdlog/spdlog.h"
#include "tpuemu/v1/services.grpc.pb.h"
#include "worker/worker_node.h"

int main(int argc, char** argv) {
  using namespace tpuemu;
  CLI::App app{"tpuemu-worker: one emulated TPU host (started for you by `tpuemu cluster up`)."};
  std::string coordinator, listen = "127.0.0.1:0", advertise;
  int slice = 0, host = 0;
  app.add_option("--coordinator", coordinator, "coordinator address host:port")->required();
  app.add_option("--slice", slice, "which slice this host belongs to (0-based)");
  app.add_option("--host", host, "host index within the slice (0-based)");
  app.add_option("--listen", listen, "address to serve on; port 0 picks a free port")->capture_default_str();
  app.add_option("--advertise", advertise, "host name peers use to reach this worker (default: the --listen host)");
  CLI11_PARSE(app, argc, argv);

  BlockShutdownSignals();
  PrepareProcessForDataPath();
  WorkerNode node(-1);
  WorkerServiceImpl worker_service(&node);
  PeerServiceImpl peer_service([&node](Frame&& f) { node.DeliverPeerFrame(std::move(f)); });
  auto server = StartServer(listen, {&worker_service, &peer_service});
  if (!server.ok()) {
    spdlog::error("{}", std::string(server.status().message()));
    return 1;
  }
  if (advertise.empty()) advertise = listen.substr(0, listen.rfind(':'));
  const std::string address = absl::StrCat(advertise, ":", server->port);

  auto stub = v1::CoordinatorService::NewStub(grpc::CreateChannel(coordinator, grpc::InsecureChannelCredentials()));
  v1::RegisterWorkerRequest req;
  req.set_slice(slice);
  req.set_host(host);
  req.set_address(address);
  v1::RegisterWorkerResponse resp;
  // The coordinator may still be starting: retry for up to 30 s.
  grpc::Status status;
  for (int attempt = 0; attempt < 60; ++attempt) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    status = stub->RegisterWorker(&ctx, req, &resp);
    if (status.ok() || status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (!status.ok()) {
    spdlog::error("could not register with the coordinator at {}: {}", coordinator, status.error_message());
    server->server->Shutdown();
    return 1;
  }
  node.set_global_host(resp.global_host());
  spdlog::info("worker slice {} host {} (global {}) serving at {}", slice, host, resp.global_host(), address);

  std::atomic<bool> stop{false};
  std::thread heartbeat([&] {
    while (!stop) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
      v1::HeartbeatRequest hb;
      hb.set_global_host(resp.global_host());
      v1::HeartbeatResponse hb_resp;
      stub->Heartbeat(&ctx, hb, &hb_resp);
      for (int i = 0; i < 5 && !stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  WaitForShutdownSignal();
  stop = true;
  heartbeat.join();
  server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}
