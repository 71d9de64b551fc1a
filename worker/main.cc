// tpuemu-worker: one emulated TPU host. Finds its place in the pod, starts its
// WorkerService and PeerService, registers with the coordinator and
// heartbeats until SIGTERM, then drains and exits.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/tensor/matmul_gate.h"
#include "services/flag_names.h"
#include "services/flags.h"
#include "services/grpc_fabric.h"
#include "services/http_server.h"
#include "services/peer_service.h"
#include "services/process_env.h"
#include "services/registrar_client.h"
#include "services/server.h"
#include "services/tcp_congestion.h"
#include "services/worker_service.h"
#include "services/transport_security.h"
#include "spdlog/spdlog.h"
#include "worker/checkpoint_janitor.h"
#include "worker/coordinator_session.h"
#include "worker/huge_pages.h"
#include "worker/idle_release.h"
#include "worker/machine_share.h"
#include "worker/self_faults.h"
#include "worker/worker_node.h"
#include "worker/worker_place.h"

namespace {

constexpr char kPlaceHelp[] = R"(
Where this worker sits in the pod, from the first source that says:
  1. --slice and --host;
  2. TPU_WORKER_ID (host within the slice) with MEGASCALE_SLICE_ID (slice);
  3. this machine's hostname's position in TPU_WORKER_HOSTNAMES (comma-separated);
  4. TPUEMU_POD_INDEX (a StatefulSet pod's ordinal, from the apps.kubernetes.io/pod-index
     label), else in Kubernetes the hostname's -N suffix;
  5. none of these: the coordinator assigns the next free place (docker compose --scale).
The slice comes from --slice or MEGASCALE_SLICE_ID, else 0 when a host index was given.
MEGASCALE_NUM_SLICES, when set, must equal the pod's slices.
The coordinator: --coordinator, TPUEMU_COORDINATOR or MEGASCALE_COORDINATOR_ADDRESS
(HOST[:PORT], port 50051 by default).
Health (grpc.health.v1, `tpuemu health HOST:PORT`): "liveness" while serving; the overall
status once registered and configured. SIGTERM drains and exits within 8 s.
Memory: where the kernel gives transparent huge pages on request, the worker restarts itself
at once with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (fresh tensor buffers fault in 2 MiB at a
time, not 4 KiB); TPUEMU_HUGE_PAGES=0 keeps it from doing so.
See docs/deploy.md.)";

// $TPUEMU_HOME/checkpoints (the image sets TPUEMU_HOME), else ~/.tpuemu/checkpoints.
std::string DefaultCheckpointDir() {
  if (const char* home = std::getenv("TPUEMU_HOME"); home && *home) return std::string(home) + "/checkpoints";
  const char* user_home = std::getenv("HOME");
  return std::string(user_home && *user_home ? user_home : "/tmp") + "/.tpuemu/checkpoints";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tpuemu;
  ExecWithHugePageMalloc(argv);
  CLI::App app{"tpuemu-worker: one emulated TPU host (started for you by `tpuemu cluster up`, "
               "docker-compose.yml or deploy/kubernetes)."};
  std::string coordinator, listen = "127.0.0.1:0", advertise;
  int slice = -1, host = -1;
  bool check_config = false;
  std::vector<std::string> known_env = {"TPUEMU_POD_INDEX", "TPUEMU_HUGE_PAGES"};
  auto env_option = [&](CLI::Option* o, const char* env) {
    known_env.push_back(env);
    return o->envname(env);
  };
  env_option(app.add_option("--coordinator", coordinator, "coordinator HOST:PORT"), "TPUEMU_COORDINATOR");
  auto* slice_opt = app.add_option("--slice", slice, "this host's slice (0-based)");
  auto* host_opt = app.add_option("--host", host, "this host's index within its slice (0-based)");
  env_option(app.add_option("--listen", listen, "address to serve on; port 0 picks a free port"), "TPUEMU_LISTEN")
      ->capture_default_str();
  env_option(app.add_option("--advertise", advertise,
                            "host name peers use to reach this worker (default: the --listen host, or this\n"
                            "machine's fully qualified name when listening on 0.0.0.0)"),
             "TPUEMU_ADVERTISE");
  std::string checkpoint_dir = DefaultCheckpointDir();
  env_option(app.add_option("--checkpoint-dir", checkpoint_dir,
                            "where this host's chips keep training checkpoints (checkpoint_every); a\n"
                            "resumed job reads them back, so keep it across restarts"),
             "TPUEMU_CHECKPOINT_DIR")
      ->capture_default_str();
  int http_port = -1;
  env_option(app.add_option("--http-port", http_port,
                            "serve this worker's Prometheus metrics at /metrics over HTTP on this port, on\n"
                            "--listen's address (0 picks a free port; -1, the default, serves none): its chips\n"
                            "and links, calls, errors, aborts, frames received, link bytes, memory. docs/metrics.md"),
             "TPUEMU_HTTP_PORT")
      ->capture_default_str();
  int matmuls_at_once = UsableCpus();
  auto* matmuls_opt =
      env_option(app.add_option("--matmuls-at-once", matmuls_at_once,
                                "how many of this host's chips multiply at the same time (0: all that want to);\n"
                                "the rest wait until one is done, so that the cores do not switch between\n"
                                "multiplies. Default: the CPUs this process may use (fewer under a cgroup v2 CPU\n"
                                "quota), shared equally with the pod's other workers on this machine or quota\n"
                                "(a local pod, compose's replicas, pods on one Kubernetes node) once the\n"
                                "coordinator says who they are. Emulated times do not change"),
                 "TPUEMU_MATMULS_AT_ONCE")
          ->capture_default_str()
          ->check(CLI::Range(0, 4096));
  std::string keep_memory_for = absl::StrCat(absl::ToInt64Seconds(absl::FromChrono(IdleRelease::kDefaultDelay)));
  env_option(app.add_option("--keep-memory-for", keep_memory_for,
                            "how long a finished job's memory stays with this worker before it goes back to\n"
                            "the system (seconds, or with a unit: 500ms, 30s, 2m): a job that comes sooner\n"
                            "finds it warm, where fresh pages take seconds to fault in (a one-step 8-chip DP\n"
                            "job: 6 s instead of 10-12 on a VM). Lower it on a machine short of memory"),
             "TPUEMU_KEEP_MEMORY_FOR")
      ->capture_default_str();
  std::string drop_checkpoints_after = "10m";
  env_option(app.add_option("--drop-checkpoints-after", drop_checkpoints_after,
                            "how long the coordinator must have kept no record that could resume a job\n"
                            "(retention dropped it) before this worker deletes the job's checkpoints\n"
                            "(seconds, or with a unit: 30s, 10m); checked every 10 s"),
             "TPUEMU_DROP_CHECKPOINTS_AFTER")
      ->capture_default_str();
  std::string peer_congestion = kDefaultPeerCongestion;
  auto* congestion_opt =
      env_option(app.add_option("--peer-tcp-congestion", peer_congestion,
                                "TCP congestion control of the connections this worker opens to other workers\n"
                                "and of those its server accepts: a name this machine allows\n"
                                "(/proc/sys/net/ipv4/tcp_allowed_congestion_control), or \"system\" for its default.\n"
                                "BBR, some machines' default, paces every segment with a timer: over loopback that\n"
                                "cost the data path at 8 and 64 MiB an eighth to a third of its bandwidth\n"
                                "(docs/benchmarks.md). Emulated times do not change"),
                 "TPUEMU_PEER_TCP_CONGESTION")
          ->capture_default_str();
  app.add_flag("--check-config", check_config,
               "check flags and environment, print the place and addresses they give, and exit\n"
               "(0 if usable, 2 if not) without contacting anyone");
  std::string tls_dir;
  bool insecure = false;
  env_option(app.add_option("--tls-dir", tls_dir,
                            "the pod's credentials (`tpuemu credentials create DIR`): mutual TLS with the pod's\n"
                            "other members; docs/security.md"),
             "TPUEMU_TLS_DIR");
  env_option(app.add_flag("--insecure", insecure,
                           "serve and dial in plaintext, unauthenticated: anyone who reaches the port can use it"),
             "TPUEMU_INSECURE");
  app.footer(kPlaceHelp);
  if (int code = ParseFlagsAndEnv(app, argc, argv, known_env); code >= 0) return code;

  if (!ReportUnknownTpuemuVariables(known_env, check_config)) return 2;
  auto security = SecurityFromFlags(tls_dir, insecure, /*needs_tokens=*/false);
  if (!security.ok()) {
    spdlog::error("{}", std::string(security.status().message()));
    return 2;
  }
  SetProcessSecurity(*security);
  PlaceInputs inputs;
  if (slice_opt->count() > 0) inputs.flag_slice = slice;
  if (host_opt->count() > 0) inputs.flag_host = host;
  inputs.env = EnvVar;
  inputs.hostname = Hostname();
  auto place = ResolveWorkerPlace(inputs);
  auto coordinator_address = ResolveCoordinatorAddress(coordinator, inputs);
  for (const absl::Status& s : {place.status(), coordinator_address.status()}) {
    if (!s.ok()) {
      spdlog::error("{}", WithFlagNames(s.message()));
      return 2;
    }
  }
  auto keep_memory =
      ParseTimeFlag(keep_memory_for, argc, argv, "--keep-memory-for", "TPUEMU_KEEP_MEMORY_FOR", kMaxKeepMemoryFor);
  if (!keep_memory.ok()) {
    spdlog::error("{}", std::string(keep_memory.status().message()));
    return 2;
  }
  auto drop_checkpoints = ParseTimeFlag(drop_checkpoints_after, argc, argv, "--drop-checkpoints-after",
                                        "TPUEMU_DROP_CHECKPOINTS_AFTER", kMaxDropCheckpointsAfter);
  if (!drop_checkpoints.ok()) {
    spdlog::error("{}", std::string(drop_checkpoints.status().message()));
    return 2;
  }
  auto congestion = ChoosePeerTcpCongestion(peer_congestion, congestion_opt->count() > 0,
                                            FlagOnCommandLine(argc, argv, "--peer-tcp-congestion")
                                                ? "--peer-tcp-congestion"
                                                : "TPUEMU_PEER_TCP_CONGESTION");
  if (!congestion.ok()) {
    spdlog::error("{}", std::string(congestion.status().message()));
    return 2;
  }
  const std::string congestion_shown = ShownTcpCongestion(*congestion);
  // Unless told, the chips share the machine (or CPU quota) with the pod's
  // other workers on it.
  const bool share_machine = matmuls_opt->count() == 0 && EnvVar("TPUEMU_MATMULS_AT_ONCE").value_or("").empty();
  place->machine = ThisMachine();
  const std::string advertised_host = AdvertiseHost(advertise, listen, CanonicalHostname);
  if (check_config) {
    std::printf(
        "place: %s\ncoordinator: %s\nlisten: %s\nadvertise: %s\ncheckpoints: %s\nmatmuls at once: %s\n"
        "keep memory for: %s\npeer TCP congestion control: %s\n",
        place->source.c_str(), coordinator_address->c_str(), listen.c_str(), advertised_host.c_str(),
        checkpoint_dir.c_str(),
        matmuls_at_once == 0 ? "no limit"
        : share_machine      ? absl::StrCat(matmuls_at_once, ", shared with the pod's other workers on this machine").c_str()
                             : std::to_string(matmuls_at_once).c_str(),
        absl::FormatDuration(*keep_memory).c_str(), congestion_shown.c_str());
    return 0;
  }

  BlockShutdownSignals();
  PrepareProcessForDataPath();
  spdlog::info("{}", HugePagesReport());
  ProcessMatmulGate().set_limit(matmuls_at_once);
  spdlog::info("chips multiply {} at a time{}", matmuls_at_once == 0 ? "any number" : std::to_string(matmuls_at_once),
               share_machine ? " until the pod says how many of its workers share this machine" : "");
  IdleRelease::Process().set_delay(absl::ToChronoMilliseconds(absl::Ceil(*keep_memory, absl::Milliseconds(1))));
  spdlog::info("a finished job's memory goes back to the system after {} without a job",
               absl::FormatDuration(*keep_memory));
  spdlog::info("peer connections, and those the server accepts, use TCP congestion control {}", congestion_shown);
  // The peer service first: the node's fabric uses its queue, so the node
  // goes first when main returns. Frames come only once the server below
  // has started, when the node exists.
  WorkerNode* receiving_node = nullptr;
  PeerServiceImpl peer_service([&receiving_node](Frame&& f) { receiving_node->DeliverPeerFrame(std::move(f)); });
  WorkerNode node(-1, GrpcFabricFactory(peer_service));
  receiving_node = &node;
  node.set_checkpoint_dir(checkpoint_dir);
  node.set_worker_fault_action(CarryOutOnThisProcess);
  if (share_machine) {
    if (place->machine.empty()) {
      spdlog::warn("cannot name this machine (/proc/sys/kernel/random/boot_id): chips multiply {} at a time, "
                   "whatever other workers run here; set --matmuls-at-once for a share",
                   matmuls_at_once);
    }
    node.share_machine(place->machine, matmuls_at_once);
  }
  WorkerServiceImpl worker_service(&node);
  auto server = StartServer(listen, {&worker_service}, ServerPeers::kMembersOnly, &peer_service);
  if (!server.ok()) {
    spdlog::error("{}", std::string(server.status().message()));
    return 1;
  }
  SetReady(*server, false);
  std::unique_ptr<HttpServer> http;
  if (http_port >= 0) {
    const std::string http_host = listen.substr(0, listen.rfind(':'));
    auto started = HttpServer::Start(http_host, http_port,
                                     {{"/metrics", Constant(kPrometheusTextType, [&node] { return node.MetricsText(); })}},
                                     ReadTokenCheck());
    if (!started.ok()) {
      spdlog::error("--http-port {}: {}", http_port, std::string(started.status().message()));
      return 1;
    }
    http = *std::move(started);
    spdlog::info("metrics at http://{}:{}/metrics", http_host, http->port());
  }
  const std::string address = absl::StrCat(advertised_host, ":", server->port);
  CoordinatorSession session(MakeGrpcRegistrar(*coordinator_address), *coordinator_address, address, *place,
                             [&node](int global_host, uint64_t incarnation) {
                               node.set_registration(global_host, incarnation);
                             });
  node.AwaitRegistration();
  // A failed or cancelled job's checkpoints stay for `tpuemu resume` only as
  // long as the coordinator keeps its record.
  CheckpointJanitor janitor(MakeGrpcRegistrar(*coordinator_address), checkpoint_dir, *drop_checkpoints);
  janitor.Start(absl::Seconds(10));
  // Registration waits for the coordinator on a thread of its own, so that a
  // SIGTERM meanwhile still stops the process at once.
  std::atomic<int> exit_code{0};
  std::thread registration([&] {
    if (absl::Status s = session.Register(); s.ok()) {
      session.StartHeartbeats();
    } else if (!absl::IsCancelled(s)) {
      spdlog::error("the coordinator at {} refused this worker: {}", *coordinator_address, std::string(s.message()));
      exit_code = 2;
      kill(getpid(), SIGTERM);
    }
  });
  WaitForShutdownSignal(std::chrono::milliseconds(200), [&] {
    SetReady(*server, session.registered() && node.Status().configured);
    if (!session.ended().empty() && exit_code == 0) {
      exit_code = 1;
      kill(getpid(), SIGTERM);
    }
  });
  // Calls in flight get 2 s. Other workers' peer streams into this one never
  // end by themselves (they live as long as the pod's configuration), so a
  // longer drain only delays the exit: `cluster down` stops every worker at
  // once and each waited out the deadline.
  spdlog::info("shutting down: draining for up to 2 s");
  ExitAfter(std::chrono::seconds(8), exit_code);
  SetReady(*server, false);
  session.Stop();
  registration.join();
  node.ShutDown("its worker is shutting down");
  StopServer(*server, std::chrono::seconds(2));
  http.reset();
  return exit_code;
}
