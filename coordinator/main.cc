// tpuemu-coordinator: the pod's control plane. Waits for its workers, tells
// them about each other, and runs the jobs clients submit.
#include <fstream>

#include "CLI/CLI.hpp"
#include "coordinator/coordinator.h"
#include "core/profile.h"
#include "services/server.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  using namespace tpuemu;
  CLI::App app{"tpuemu-coordinator: the control plane of an emulated TPU pod (started for you by `tpuemu cluster up`)."};
  CoordinatorOptions options;
  std::string listen = "127.0.0.1:0", port_file;
  app.add_option("--topology", options.topology.topology, "CHIP:SHAPE, e.g. v5e:4x4 or v5p:4x4x4")->required();
  app.add_option("--slices", options.topology.slices, "number of slices joined by DCN")->capture_default_str();
  app.add_option("--chips-per-host", options.topology.chips_per_host, "chips per worker")->capture_default_str();
  app.add_option("--wraparound", options.topology.wraparound, "auto, none, or axes that wrap (x,y)")
      ->capture_default_str();
  app.add_option("--time-scale", options.time_scale, "wall seconds per emulated second; 0 = unpaced")
      ->capture_default_str();
  app.add_option("--listen", listen, "address to serve on; port 0 picks a free port")->capture_default_str();
  app.add_option("--port-file", port_file, "write the bound port here once serving");
  CLI11_PARSE(app, argc, argv);

  BlockShutdownSignals();
  auto coordinator = Coordinator::Create(options, MakeGrpcWorkerClient);
  if (!coordinator.ok()) {
    spdlog::error("{}", std::string(coordinator.status().message()));
    return 2;
  }
  CoordinatorServiceImpl service(coordinator->get());
  auto server = StartServer(listen, {&service});
  if (!server.ok()) {
    spdlog::error("{}", std::string(server.status().message()));
    return 1;
  }
  spdlog::info("coordinator for {} serving on port {}", (*coordinator)->topology().Describe(), server->port);
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << server->port << "\n";
    std::rename(tmp.c_str(), port_file.c_str());
  }
  WaitForShutdownSignal();
  server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}
