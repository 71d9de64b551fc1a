#include "client/local_pod.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/coordinator_client.h"
#include "client/processes.h"
#include "services/credentials.h"

namespace tpuemu {
namespace {

// A port free on 127.0.0.1 now: the kernel's pick for a socket bound to port
// 0, released at once for the coordinator to take.
absl::StatusOr<int> FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int error = errno;
  close(fd);
  if (!ok) return absl::InternalError(absl::StrCat("cannot find a free port on 127.0.0.1: ", std::strerror(error)));
  return ntohs(addr.sin_port);
}

}  // namespace

std::string LocalHeartbeatTimeout(int chips) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const double seconds = std::max(3.0, 0.1 * chips / cores);
  return absl::StrCat(std::ceil(seconds * 10) / 10);
}

absl::StatusOr<LocalPod> StartLocalPod(const LocalPodOptions& o, Progress& progress,
                                       const std::function<absl::Status(const PodState&)>& spawned) {
  auto topo = Topology::Create(o.topology);
  if (!topo.ok()) return topo.status();
  const std::string logs = o.dir + "/logs";
  std::filesystem::create_directories(logs);
  const std::string port_file = o.dir + "/coordinator.port";
  std::filesystem::remove(port_file);
  auto port = FreeLoopbackPort();
  if (!port.ok()) return port.status();

  LocalPod pod;
  PodState& state = pod.state;
  state.topology = o.topology.topology;
  state.log_dir = logs;
  state.coordinator = absl::StrCat("127.0.0.1:", *port);
  auto fail = [&](const absl::Status& why) {
    StopProcesses(state.processes(), 2);
    return why;
  };
  std::vector<std::string> security = {"--insecure"};
  if (!o.insecure) {
    state.tls_dir = o.dir + "/tls";
    if (const absl::Status usable = CheckCredentials(state.tls_dir); !usable.ok()) {
      progress.Update("making the pod's credentials");
      if (auto made = CreateCredentials(state.tls_dir); !made.ok()) {
        // Credentials made before and damaged since: what is wrong with them, not only that the directory is full.
        if (absl::IsAlreadyExists(made)) {
          return absl::FailedPreconditionError(absl::StrCat(
              "this pod's credentials in ", state.tls_dir,
              " are damaged: remove that directory to have new ones made (clients given the old CA or tokens "
              "will need the new ones). What is wrong: ", usable.message()));
        }
        return made;
      }
    }
    security = {"--tls-dir", state.tls_dir};
  }
  const TopologyRequest& t = o.topology;
  std::vector<std::string> coordinator_argv = {
      FindBinary("tpuemu-coordinator"), "--topology", t.topology, "--slices", std::to_string(t.slices),
      "--chips-per-host", std::to_string(t.chips_per_host), "--wraparound", t.wraparound, "--time-scale",
      absl::StrCat(o.time_scale), "--listen", state.coordinator, "--port-file", port_file,
      // Kept across `cluster down` and `up`: the pod's job history.
      "--data-dir", o.dir + "/jobs", "--dcn-oversubscription", absl::StrCat(o.dcn_oversubscription)};
  // TPUEMU_HEARTBEAT_TIMEOUT, when set, reaches the coordinator as it is.
  if (!o.heartbeat_timeout.empty() || !std::getenv("TPUEMU_HEARTBEAT_TIMEOUT")) {
    coordinator_argv.insert(coordinator_argv.end(),
                            {"--heartbeat-timeout", o.heartbeat_timeout.empty() ? LocalHeartbeatTimeout(topo->num_chips())
                                                                                : o.heartbeat_timeout});
  }
  if (o.http_port >= 0) coordinator_argv.insert(coordinator_argv.end(), {"--http-port", std::to_string(o.http_port)});
  coordinator_argv.insert(coordinator_argv.end(), security.begin(), security.end());
  auto coord = SpawnDetached(coordinator_argv, logs + "/coordinator.log");
  if (!coord.ok()) return coord.status();
  state.coordinator_process = *coord;

  // The port file appears once the coordinator serves.
  const auto start = std::chrono::steady_clock::now();
  for (int written = 0; !(std::ifstream(port_file) >> written);) {
    if (!IsRunning(state.coordinator_process)) {
      return fail(absl::InternalError(
          absl::StrCat("the coordinator exited; its log says:\n", TailOfLastStart(logs + "/coordinator.log", 10))));
    }
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10)) {
      return fail(absl::DeadlineExceededError("the coordinator did not start within 10 s; see " + logs));
    }
    progress.Update("starting the coordinator");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int slice = 0; slice < t.slices; ++slice) {
    for (int host = 0; host < topo->hosts_per_slice(); ++host) {
      std::vector<std::string> argv = {FindBinary("tpuemu-worker"), "--coordinator", state.coordinator, "--slice",
                                       std::to_string(slice), "--host", std::to_string(host), "--listen", "127.0.0.1:0",
                                       "--checkpoint-dir", o.dir + "/checkpoints",
                                       // A local pod's workers serve no HTTP (docs/metrics.md), whatever
                                       // TPUEMU_HTTP_PORT says in the environment they inherit.
                                       "--http-port=-1"};
      if (!o.keep_memory_for.empty()) argv.insert(argv.end(), {"--keep-memory-for", o.keep_memory_for});
      argv.insert(argv.end(), security.begin(), security.end());
      auto w = SpawnDetached(argv, absl::StrCat(logs, "/worker-s", slice, "-h", host, ".log"));
      if (!w.ok()) return fail(w.status());
      state.workers.push_back({slice, host, *w});
    }
  }
  if (auto s = spawned(state); !s.ok()) return fail(s);

  auto status = WaitUntilReady(state, o.timeout_s, progress);
  if (!status.ok()) return fail(status.status());
  pod.status = *status;
  return pod;
}

absl::StatusOr<v1::ClusterStatus> WaitUntilReady(const PodState& state, double timeout_s, Progress& progress,
                                                 const std::function<bool(const v1::ClusterStatus&)>& accept) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  // A new channel after each failed call: a coordinator not listening yet
  // (just restarted) puts a channel in gRPC's reconnect backoff, 1 s growing
  // by 1.6 at a time, and one kept channel saw a pod ready in 0.4 s only
  // after 15 s.
  std::optional<CoordinatorClient> client;
  // Since when each recorded worker process has been gone with its place not
  // held: another process may hold it (a worker started by hand in its
  // stead), given a few heartbeats' time to register again after a
  // coordinator's restart.
  std::map<size_t, std::chrono::steady_clock::time_point> gone_since;
  constexpr auto kTimeToTakeThePlace = std::chrono::seconds(5);
  while (true) {
    if (!client) client.emplace(state.coordinator);
    auto s = client->Status(2);
    std::set<int> held;  // hosts an alive worker holds
    if (!s.ok()) {
      client.reset();
    } else {
      for (const v1::WorkerInfo& w : s->workers()) {
        if (w.alive()) held.insert(w.host());
      }
      if (s->ready() && accept(*s)) {
        progress.Done();
        return *s;
      }
      progress.Update(absl::StrCat("waiting for workers: ", s->workers_size(), "/", s->expected_workers(),
                                   " registered"));
    }
    if (!IsRunning(state.coordinator_process)) {
      return absl::InternalError(absl::StrCat("the coordinator exited; its log says:\n",
                                              TailOfLastStart(state.coordinator_process.log, 10)));
    }
    const auto now = std::chrono::steady_clock::now();
    // Judged only on the coordinator's answers: one still starting up knows
    // nobody yet.
    for (size_t global = 0; s.ok() && global < state.workers.size(); ++global) {
      const PodWorker& w = state.workers[global];
      if (IsRunning(w.process) || held.count(static_cast<int>(global)) > 0) {
        gone_since.erase(global);
        continue;
      }
      if (now - gone_since.try_emplace(global, now).first->second > kTimeToTakeThePlace) {
        return absl::InternalError(absl::StrCat("worker slice ", w.slice, " host ", w.host, " (HOST ", global,
                                                " in `tpuemu cluster status`) is not running; its log says:\n",
                                                TailOfLastStart(w.process.log, 10)));
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("the pod was not ready within ", timeout_s, " s; see the logs in ", state.log_dir));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace tpuemu
