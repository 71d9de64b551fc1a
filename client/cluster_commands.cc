#include "client/cluster_commands.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli_checks.h"
#include "client/cli_errors.h"
#include "client/cluster_restart_commands.h"
#include "client/coordinator_client.h"
#include "client/local_pod.h"
#include "client/pod_state.h"
#include "client/processes.h"
#include "client/progress.h"
#include "core/base/units.h"
#include "core/cluster/registrar.h"
#include "core/pod/dcn_fabric.h"
#include "core/pod/pod_config.h"
#include "core/pod/topology.h"
#include "nlohmann/json.hpp"
#include "services/flags.h"
#include "services/transport_security.h"

namespace tpuemu {
namespace {

// The coordinator's web view: where it says clients reach it, else on its
// host ("" when it serves none).
std::string WebAddress(const v1::ClusterStatus& s, const std::string& coordinator) {
  if (s.web_port() <= 0) return "";
  if (!s.web_address().empty()) return s.web_address();
  return absl::StrCat("http://", coordinator.substr(0, coordinator.rfind(':')), ":", s.web_port(), "/");
}

// The web view's address with the read token a browser gives it once, for
// the local pod at `coordinator` (another pod's token is not on this host).
std::string WebAddressWithToken(const v1::ClusterStatus& s, const std::string& coordinator) {
  std::string web = WebAddress(s, coordinator);
  auto local = LoadPodState();
  if (web.empty() || !local.ok() || local->coordinator != coordinator || local->tls_dir.empty()) return web;
  auto token = ReadSecretFile(local->tls_dir + "/read.token", "the local pod's read token");
  return token.ok() && !token->empty() ? absl::StrCat(web, "?token=", *token) : web;
}

nlohmann::json StatusJson(const v1::ClusterStatus& s, const std::string& address) {
  nlohmann::json workers = nlohmann::json::array();
  for (const auto& w : s.workers()) {
    workers.push_back({{"host", w.host()}, {"slice", w.slice()}, {"address", w.address()},
                       {"chips", std::vector<int>(w.chips().begin(), w.chips().end())}, {"alive", w.alive()}, {"slow", w.slow()},
                       {"seconds_since_heartbeat", w.seconds_since_heartbeat()},
                       // null: not known (lost, or no heartbeat yet)
                       {"resident_bytes", w.resident_bytes() > 0 ? nlohmann::json(w.resident_bytes()) : nullptr}});
  }
  return {{"coordinator", address}, {"topology", s.spec().topology()}, {"slices", s.spec().slices()},
          {"chips_per_host", s.spec().chips_per_host()}, {"time_scale", s.spec().time_scale()},
          {"description", s.description()}, {"chips", s.chips()}, {"expected_workers", s.expected_workers()},
          {"registered_workers", s.workers_size()},
          {"alive_workers", std::count_if(s.workers().begin(), s.workers().end(), [](const auto& w) { return w.alive(); })},
          {"ready", s.ready()}, {"jobs_running", s.jobs_running()},
          {"heartbeat_timeout_s", s.heartbeat_timeout_s()},
          {"web", WebAddress(s, address)},  // "" when none; a local pod's read token is in TPUEMU_HOME/tls/read.token
          {"workers", workers}};
}

// "not ready, 4/4 workers registered" said nothing of why: a registered
// worker may since have stopped (a kill_worker fault, a crash).
std::string StateLine(const v1::ClusterStatus& s) {
  std::vector<std::string> dead;
  for (const auto& w : s.workers()) {
    if (!w.alive()) dead.push_back(absl::StrCat(w.host()));
  }
  std::string line = absl::StrCat(s.ready() ? "ready" : "not ready", ", ", s.workers_size(), "/",
                                  s.expected_workers(), " workers registered");
  if (dead.size() == 1) {
    absl::StrAppend(&line, "; host ", dead.front(), " is not alive (no heartbeats): `tpuemu cluster restart-worker ",
                    dead.front(), "` starts it again on a local pod; elsewhere start its process or container again");
  } else if (!dead.empty()) {
    absl::StrAppend(&line, "; hosts ", absl::StrJoin(dead, ", "),
                    " are not alive (no heartbeats): `tpuemu cluster restart-worker HOST` starts each again on a "
                    "local pod; elsewhere start their processes or containers again");
  }
  return line;
}

void PrintStatus(const v1::ClusterStatus& s, const std::string& address) {
  std::cout << "pod:         " << s.description() << "\n"
            << "coordinator: " << address << "\n"
            << "time scale:  " << (s.spec().time_scale() > 0 ? absl::StrCat(s.spec().time_scale(), "x (paced)")
                                                              : std::string("0 (unpaced)"))
            << "\n"
            << "state:       " << StateLine(s) << "\n"
            << "jobs:        " << s.jobs_running() << " running (`tpuemu jobs` lists them)\n"
            << "heartbeats:  " << s.heartbeat_timeout_s() << " s timeout\n";
  if (const std::string web = WebAddressWithToken(s, address); !web.empty()) {
    std::cout << "web view:    " << web << " (metrics at /metrics)\n";
  }
  std::cout << "\n";
  // MEMORY: the worker's resident memory at its last heartbeat (a job's
  // memory is given back once the worker has been idle for --keep-memory-for);
  // none for a lost worker, whose last figure says nothing of it now.
  std::printf("%-5s %-6s %-22s %-7s %-9s %s\n", "HOST", "SLICE", "ADDRESS", "ALIVE", "MEMORY", "CHIPS");
  for (const auto& w : s.workers()) {
    std::string chips;
    for (int c : w.chips()) chips += (chips.empty() ? "" : ",") + std::to_string(c);
    const std::string memory =
        w.alive() && w.resident_bytes() > 0 ? absl::StrCat(w.resident_bytes() >> 20, " MiB") : "-";
    std::printf("%-5d %-6d %-22s %-7s %-9s %s\n", w.host(), w.slice(), w.address().c_str(),
                !w.alive() ? "NO" : w.slow() ? "slow" : "yes", memory.c_str(), chips.c_str());
  }
}

// The most worker processes `cluster up --local` starts (docs/benchmarks.md
// runs 128 for 512 chips on 2 cores).
constexpr int kMaxLocalWorkers = 256;

int ClusterUp(const ClusterUpOptions& o) {
  if (!o.local) {
    return Fail(absl::InvalidArgumentError(
        "cluster up: only --local is supported from the CLI; for docker-compose or Kubernetes see deploy/"));
  }
  auto topo = Topology::Create({o.topology, o.slices, o.chips_per_host, o.wraparound});
  if (!topo.ok()) return Fail(SayingTheDefaultChipsPerHost(topo.status(), o.chips_per_host, o.chips_per_host_given));
  // A worker process per host, all on this machine: past a few hundred they
  // starve each other of cores and file descriptors, and a typo in the shape
  // would fork thousands.
  if (topo->num_hosts() > kMaxLocalWorkers) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--topology ", o.topology, " x ", o.slices, " slice(s): ", topo->num_hosts(), " hosts of ",
        o.chips_per_host, " chips, a worker process each; a local pod runs at most ", kMaxLocalWorkers,
        ": give more --chips-per-host or a smaller shape (`tpuemu simulate JOB.yaml --topology ", o.topology,
        "` steps a pod of any size without its data)")));
  }
  if (auto s = CheckTimeScale(o.time_scale, "--time-scale"); !s.ok()) return Fail(s);
  if (auto s = CheckDcnOversubscription(o.dcn_oversubscription, "--dcn-oversubscription"); !s.ok()) return Fail(s);
  if (!o.heartbeat_timeout.empty()) {
    auto t = ParseDuration(o.heartbeat_timeout, "--heartbeat-timeout", kMaxHeartbeatTimeout);
    if (!t.ok()) return Fail(t.status());
  }
  if (!o.keep_memory_for.empty()) {
    auto t = ParseDuration(o.keep_memory_for, "--keep-memory-for", kMaxKeepMemoryFor);
    if (!t.ok()) return Fail(t.status());
  }
  if (auto existing = LoadPodState(); existing.ok()) {
    if (CoordinatorClient(existing->coordinator).Status(1).ok()) {
      return Fail(absl::AlreadyExistsError(absl::StrCat(
          "a pod is already running (", existing->topology, ", coordinator ", existing->coordinator,
          "); stop it with `tpuemu cluster down` first")));
    }
    StopProcesses(existing->processes(), 1);  // leftovers of a pod that died
    RemovePodState();
  }

  Progress progress(!o.json);
  // Remembered before waiting, so `cluster down` can clean up whatever happens next.
  LocalPodOptions local{{o.topology, o.slices, o.chips_per_host, o.wraparound}, o.time_scale, o.heartbeat_timeout,
                        o.http_port, StateDir(), o.timeout_s, o.insecure, o.dcn_oversubscription,
                        o.keep_memory_for};
  auto pod = StartLocalPod(local, progress, SavePodState);
  if (!pod.ok()) {
    RemovePodState();
    return Fail(pod.status());
  }
  const PodState& state = pod->state;
  const v1::ClusterStatus& status = pod->status;
  const std::string& logs = state.log_dir;
  const std::string web = WebAddressWithToken(status, state.coordinator);
  if (o.json) {
    std::cout << StatusJson(status, state.coordinator).dump(2) << "\n";
  } else {
    std::cout << "pod is up: " << status.description() << " (heartbeat timeout " << status.heartbeat_timeout_s()
              << " s)\n"
              << "coordinator " << state.coordinator << ", logs in " << logs << ", jobs kept in " << StateDir()
              << "/jobs\n"
              << (web.empty() ? "" : absl::StrCat("web view at ", web, " (metrics at /metrics, with the token)\n"))
              << "next: tpuemu bench collective --op all-gather --axes x --bytes 8MiB\n";
  }
  return 0;
}

int ClusterStatus(const std::string& flag, bool json) {
  auto address = ResolveCoordinator(flag);
  if (!address.ok()) return Fail(address.status());
  auto status = CoordinatorClient(*address).Status();
  if (!status.ok()) return Fail(status.status());
  if (json) {
    std::cout << StatusJson(*status, *address).dump(2) << "\n";
  } else {
    PrintStatus(*status, *address);
  }
  return status->ready() ? 0 : 1;
}

// Whether `argv` gives `flag` the value `value` ("--flag value" or "--flag=value").
bool HasFlag(const std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
  for (size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == flag + "=" + value) return true;
    if (argv[i] == flag && i + 1 < argv.size() && argv[i + 1] == value) return true;
  }
  return false;
}

bool IsCoordinator(const std::vector<std::string>& argv) {
  return std::filesystem::path(argv[0]).filename() == "tpuemu-coordinator";
}

// Processes of the pod that its file does not know, started by hand: workers
// pointing at the pod's coordinator, and a coordinator started again with
// its command line (docs/deploy.md's restart by hand): on its address and
// its job store here, not another pod's that took the port since.
std::vector<StartedProcess> UnrecordedProcesses(const PodState& state) {
  auto all = FindProcesses([&](const std::vector<std::string>& argv) {
    if (IsCoordinator(argv)) {
      return HasFlag(argv, "--listen", state.coordinator) && HasFlag(argv, "--data-dir", StateDir() + "/jobs");
    }
    return std::filesystem::path(argv[0]).filename() == "tpuemu-worker" &&
           HasFlag(argv, "--coordinator", state.coordinator);
  });
  std::vector<StartedProcess> unrecorded;
  for (const StartedProcess& p : all) {
    bool recorded = false;
    for (const StartedProcess& ours : state.processes()) {
      recorded = recorded || (ours.pid == p.pid && ours.start_ticks == p.start_ticks);
    }
    if (!recorded) unrecorded.push_back(p);
  }
  return unrecorded;
}

// The jobs a pod stops with stay in its job store, and the next pod started
// here takes them up again (docs/jobs.md): said, so that none runs unexpected.
std::string UnfinishedJobs(const std::string& coordinator) {
  CoordinatorClient client(coordinator);
  if (!client.Status(1).ok()) return "";  // gone or stuck: not worth List's 30 s
  auto list = client.List();
  if (!list.ok()) return "";
  std::vector<std::string> running, queued;
  for (const v1::Job& j : list->jobs()) {
    if (j.state() == v1::JOB_STATE_RUNNING) running.push_back(j.id());
    if (j.state() == v1::JOB_STATE_PENDING) queued.push_back(j.id());
  }
  if (running.empty() && queued.empty()) return "";
  std::string what;
  if (!running.empty()) absl::StrAppend(&what, "running: ", absl::StrJoin(running, ", "));
  if (!queued.empty()) absl::StrAppend(&what, what.empty() ? "" : "; ", "queued: ", absl::StrJoin(queued, ", "));
  return absl::StrCat("jobs left unfinished (", what, ") stay in the job store: the next `cluster up` here queues "
                      "them again (a running one is interrupted, or resumes with max_restarts); `tpuemu cancel` them "
                      "first if they should not run\n");
}

int ClusterDown() {
  auto state = LoadPodState();
  if (absl::IsNotFound(state.status())) {
    std::cout << "no pod is running; nothing to stop\n";
    return 0;
  }
  if (!state.ok()) return Fail(state.status());  // a damaged pod file: say so, stop nothing
  // Only processes that are still the ones recorded: a PID of a process that
  // exited may belong to anything by now.
  std::vector<StartedProcess> coordinators, workers;
  const std::vector<StartedProcess> recorded = state->processes();  // the coordinator first
  for (size_t i = 0; i < recorded.size(); ++i) {
    if (IsRunning(recorded[i])) (i == 0 ? coordinators : workers).push_back(recorded[i]);
  }
  const size_t gone = recorded.size() - coordinators.size() - workers.size();
  const std::string unfinished = UnfinishedJobs(state->coordinator);
  const std::vector<StartedProcess> by_hand = UnrecordedProcesses(*state);
  for (const StartedProcess& p : by_hand) (IsCoordinator(p.argv) ? coordinators : workers).push_back(p);
  // The coordinator first, with a head start: on SIGTERM it records its
  // running jobs as interrupted (it looks every 200 ms), which its workers'
  // ends would otherwise fail. Not waited for: its shutdown may wait on them.
  SignalTerm(coordinators);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::vector<StartedProcess> all = coordinators;
  all.insert(all.end(), workers.begin(), workers.end());
  const int killed = StopProcesses(all, 5);
  RemovePodState();
  std::cout << "stopped " << all.size() << " processes of the pod " << state->topology
            << (by_hand.empty() ? "" : absl::StrCat(" (", by_hand.size(), " started by hand)"))
            << (killed ? absl::StrCat(" (", killed, " needed SIGKILL)") : "")
            << (gone ? absl::StrCat("; ", gone, " recorded process(es) had already exited and were left alone") : "")
            << "\n"
            << unfinished;
  return 0;
}

}  // namespace

void AddClusterCommands(CLI::App& app, int* exit_code) {
  auto* cluster = app.add_subcommand("cluster", "start, inspect and stop an emulated pod");
  cluster->require_subcommand(1);

  auto up_opts = std::make_shared<ClusterUpOptions>();
  auto* up = cluster->add_subcommand(
      "up", "start a pod: a coordinator and one worker process per host, on 127.0.0.1.\n"
            "Returns once every worker has registered. Example:\n"
            "  tpuemu cluster up --local --topology v5e:4x4\n"
            "  tpuemu cluster up --local --topology v5p:4x4x4 --slices 2 --time-scale 1000");
  up->add_flag("--local", up_opts->local, "run the processes on this machine (required for now)");
  up->add_option("--topology", up_opts->topology,
                 "CHIP:SHAPE. CHIP is a preset (v4, v5e, v5e-measured, v5p, v6e) or a profile file (see docs/topology.md);\n"
                 "SHAPE is the slice torus, e.g. 4x4 or 4x4x4")
      ->required();
  up->add_option("--slices", up_opts->slices, "slices joined by DCN (the `dcn` axis)")->capture_default_str();
  up->add_option("--chips-per-host", up_opts->chips_per_host,
                 "chips each worker process owns; must tile the slice")->capture_default_str();
  up->add_option("--wraparound", up_opts->wraparound,
                 "auto (the chip's rule: v4/v5p wrap axes that are multiples of 4, v5e/v6e only an axis of 16),\n"
                 "none, or a list of axes that wrap, e.g. x,y")
      ->capture_default_str()
      ->check([](const std::string& text) -> std::string {
        return text.empty() ? "'': give auto, none, or a list of axes that wrap, e.g. x,y" : "";
      });
  up->add_option("--time-scale", up_opts->time_scale,
                 "wall seconds per emulated second: links carry W/S bytes per second and hops take S x T.\n"
                 "0 runs unpaced (as fast as the host allows); the emulated clock is exact either way")
      ->capture_default_str();
  up->add_option("--heartbeat-timeout", up_opts->heartbeat_timeout,
                 "how long a worker may go without a heartbeat before the coordinator asks it directly;\n"
                 "one that does not answer either within this time is lost, one that answers is slow.\n"
                 "Seconds, or with a unit (500ms, 30s, 2m). Default: 3, or 0.1 x chips / cores of this\n"
                 "machine when that is more (12.8 for 256 chips on 2 cores): the whole pod shares its cores");
  up->add_option("--keep-memory-for", up_opts->keep_memory_for,
                 "how long each worker keeps a finished job's memory before giving it back to the system\n"
                 "(seconds, or with a unit: 500ms, 30s, 2m); a job that comes sooner starts warm, where\n"
                 "fresh pages cost seconds (a one-step 8-chip DP job: 6 s instead of 10-12 on a 2-core VM).\n"
                 "Default: 30 s, or TPUEMU_KEEP_MEMORY_FOR");
  up->add_option("--http-port", up_opts->http_port,
                 "serve the web view at http://127.0.0.1:PORT/ (the torus, jobs, steps, timelines, live;\n"
                 "docs/web-view.md) and Prometheus metrics at /metrics (jobs by state, the queue, step\n"
                 "times on both clocks, link bytes, workers' liveness and memory; docs/metrics.md).\n"
                 "Default: none")
      ->check([](const std::string& text) -> std::string {
        int port = 0;
        if (absl::SimpleAtoi(text, &port) && port >= 1 && port <= 65535) return "";
        return absl::StrCat("'", text, "': must be a port from 1 to 65535 (leave it out for no web view or metrics)");
      });
  up->add_flag("--insecure", up_opts->insecure,
               "plaintext and no credentials. By default the pod's processes use mutual TLS from a CA of\n"
               "its own, made in $TPUEMU_HOME/tls on the first `cluster up` (with the admin and read\n"
               "tokens this CLI presents for you); they listen on 127.0.0.1 either way. docs/security.md");
  up->add_option("--dcn-oversubscription", up_opts->dcn_oversubscription,
                 "R:1, the DCN fabric between slices: a slice's hosts together get 1/R of their NICs'\n"
                 "bandwidth into it, shared by the multislice jobs there; jobs running at once then slow\n"
                 "each other's DCN transfers, each step's report says by how much. 1: never; at most 1000.\n"
                 "docs/jobs.md")
      ->capture_default_str();
  up->add_option("--timeout", up_opts->timeout_s, "seconds to wait for every worker")
      ->capture_default_str()
      ->check(PositiveSeconds());
  up->add_flag("--json", up_opts->json, "print the pod's status as JSON");
  up->callback([up, up_opts, exit_code] {
    up_opts->chips_per_host_given = up->count("--chips-per-host") > 0;
    *exit_code = ClusterUp(*up_opts);
  });

  auto coordinator = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* status = cluster->add_subcommand("status", "show the pod: topology, workers, liveness. Exit 1 if not ready");
  status->add_option("--coordinator", *coordinator, "coordinator HOST:PORT (default: $TPUEMU_COORDINATOR, "
                                                    "else the pod `cluster up` started)");
  status->add_flag("--json", *json, "print JSON");
  status->callback([coordinator, json, exit_code] { *exit_code = ClusterStatus(*coordinator, *json); });

  auto* down = cluster->add_subcommand(
      "down", "stop every process of the pod `cluster up` started: those the pod file records (checked to be\n"
              "the same processes, not others that reused their PIDs) and workers started by hand with\n"
              "--coordinator set to the pod's coordinator");
  down->callback([exit_code] { *exit_code = ClusterDown(); });
  AddClusterRestartCommands(*cluster, exit_code);
}

}  // namespace tpuemu
