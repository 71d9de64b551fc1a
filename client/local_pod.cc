#include "client/local_pod.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/coordinator_client.h"
#include "client/processes.h"

namespace tpuemu {

absl::StatusOr<LocalPod> StartLocalPod(const LocalPodOptions& o, Progress& progress,
                                       const std::function<absl::Status(const LocalPod&)>& spawned) {
  auto topo = Topology::Create(o.topology);
  if (!topo.ok()) return topo.status();
  const std::string logs = o.dir + "/logs";
  std::filesystem::create_directories(logs);
  const std::string port_file = o.dir + "/coordinator.port";
  std::filesystem::remove(port_file);

  LocalPod pod;
  auto fail = [&](const absl::Status& why) {
    StopProcesses(pod.pids, 2);
    return why;
  };
  const TopologyRequest& t = o.topology;
  auto coord = SpawnDetached({FindBinary("tpuemu-coordinator"), "--topology", t.topology, "--slices",
                              std::to_string(t.slices), "--chips-per-host", std::to_string(t.chips_per_host),
                              "--wraparound", t.wraparound, "--time-scale", absl::StrCat(o.time_scale),
                              "--listen", "127.0.0.1:0", "--port-file", port_file},
                             logs + "/coordinator.log");
  if (!coord.ok()) return coord.status();
  pod.pids.push_back(*coord);

  int port = 0;
  const auto start = std::chrono::steady_clock::now();
  while (!(std::ifstream(port_file) >> port)) {
    if (!ProcessAlive(*coord)) {
      return fail(absl::InternalError(
          absl::StrCat("the coordinator exited; its log says:\n", TailFile(logs + "/coordinator.log", 10))));
    }
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10)) {
      return fail(absl::DeadlineExceededError("the coordinator did not start within 10 s; see " + logs));
    }
    progress.Update("starting the coordinator");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  pod.coordinator = absl::StrCat("127.0.0.1:", port);
  for (int slice = 0; slice < t.slices; ++slice) {
    for (int host = 0; host < topo->hosts_per_slice(); ++host) {
      auto w = SpawnDetached({FindBinary("tpuemu-worker"), "--coordinator", pod.coordinator, "--slice",
                              std::to_string(slice), "--host", std::to_string(host), "--listen", "127.0.0.1:0"},
                             absl::StrCat(logs, "/worker-s", slice, "-h", host, ".log"));
      if (!w.ok()) return fail(w.status());
      pod.pids.push_back(*w);
    }
  }
  if (auto s = spawned(pod); !s.ok()) return fail(s);

  CoordinatorClient client(pod.coordinator);
  while (true) {
    auto s = client.Status(2);
    if (s.ok()) {
      pod.status = *s;
      if (s->ready()) break;
      progress.Update(absl::StrCat("waiting for workers: ", s->workers_size(), "/", s->expected_workers(),
                                   " registered"));
    }
    for (size_t i = 1; i < pod.pids.size(); ++i) {
      if (!ProcessAlive(pod.pids[i])) {
        return fail(absl::InternalError(absl::StrCat("a worker exited during start-up; see the logs in ", logs)));
      }
    }
    if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(static_cast<int>(o.timeout_s * 1000))) {
      return fail(absl::DeadlineExceededError(
          absl::StrCat("the pod was not ready within ", o.timeout_s, " s; see the logs in ", logs)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  progress.Done();
  return pod;
}

}  // namespace tpuemu
