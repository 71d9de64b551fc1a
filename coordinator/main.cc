// tpuemu-coordinator: the pod's control plane. Waits for its workers, tells
// them about each other, and runs the jobs clients submit.
#include <cmath>
#include <fstream>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "coordinator/coordinator.h"
#include "core/pod/profile.h"
#include "services/flag_names.h"
#include "services/flags.h"
#include "services/http_server.h"
#include "web/web_view.h"
#include "services/process_env.h"
#include "services/server.h"
#include "services/worker_client.h"
#include "services/transport_security.h"
#include "spdlog/spdlog.h"

namespace {

constexpr char kFooter[] = R"(
Every flag can also come from its environment variable (shown as ENV above), as
docker-compose.yml and deploy/kubernetes set them; flags win.
Health (grpc.health.v1, `tpuemu health HOST:PORT`): "liveness" while serving; the overall
status once every worker of the pod has registered and been configured.
SIGTERM stops taking jobs and exits within 8 s. With --data-dir the queue stays in the job
store and the running job is stopped, to be interrupted or resumed (max_restarts) by the next
coordinator on the directory, as after a crash; without it the queued and running jobs are
cancelled.
See docs/deploy.md.)";

}  // namespace

int main(int argc, char** argv) {
  using namespace tpuemu;
  CLI::App app{"tpuemu-coordinator: the control plane of an emulated TPU pod (started for you by "
               "`tpuemu cluster up`, docker-compose.yml or deploy/kubernetes)."};
  CoordinatorOptions options;
  std::string listen = "127.0.0.1:0", port_file;
  bool check_config = false;
  std::vector<std::string> known_env;
  auto env_option = [&](CLI::Option* o, const char* env) {
    known_env.push_back(env);
    return o->envname(env);
  };
  env_option(app.add_option("--topology", options.topology.topology, "CHIP:SHAPE, e.g. v5e:4x4 or v5p:4x4x4"),
             "TPUEMU_TOPOLOGY")
      ->required();
  env_option(app.add_option("--slices", options.topology.slices, "number of slices joined by DCN"), "TPUEMU_SLICES")
      ->capture_default_str();
  env_option(app.add_option("--chips-per-host", options.topology.chips_per_host, "chips per worker"),
             "TPUEMU_CHIPS_PER_HOST")
      ->capture_default_str();
  env_option(app.add_option("--wraparound", options.topology.wraparound, "auto, none, or axes that wrap (x,y)"),
             "TPUEMU_WRAPAROUND")
      ->capture_default_str();
  env_option(app.add_option("--time-scale", options.time_scale, "wall seconds per emulated second; 0 = unpaced"),
             "TPUEMU_TIME_SCALE")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            double value;  // NaN and inf parse, and pace nothing
            return absl::SimpleAtod(text, &value) && value >= 0 && std::isfinite(value)
                       ? ""
                       : "'" + text + "': expected 0 (unpaced) or a stretch factor above 0";
          },
          "S"));
  env_option(app.add_option("--listen", listen, "address to serve on; port 0 picks a free port"), "TPUEMU_LISTEN")
      ->capture_default_str();
  std::string heartbeat_timeout = "3";
  env_option(app.add_option("--heartbeat-timeout", heartbeat_timeout,
                            "how long a worker may go without a heartbeat before the coordinator asks it\n"
                            "directly; one that does not answer either within this time is lost, one that\n"
                            "answers is slow, not lost (seconds, or with a unit: 500ms, 30s, 2m). Raise it for\n"
                            "pods with many more chips than cores"),
             "TPUEMU_HEARTBEAT_TIMEOUT")
      ->capture_default_str();
  env_option(app.add_option("--dcn-oversubscription", options.dcn_oversubscription,
                            "R:1, the DCN fabric between slices: a slice's hosts together get 1/R of their\n"
                            "NICs' bandwidth into it, shared by every multislice job on the slice, so jobs\n"
                            "running at once slow each other's DCN transfers (1: never). docs/jobs.md"),
             "TPUEMU_DCN_OVERSUBSCRIPTION")
      ->capture_default_str();
  env_option(app.add_option("--keep-finished-jobs", options.retention.finished_jobs,
                            "finished jobs whose records (steps, results, traces) are kept; the oldest go first"),
             "TPUEMU_KEEP_FINISHED_JOBS")
      ->capture_default_str();
  env_option(app.add_option("--data-dir", options.data_dir,
                            "where the job store lives (SQLite, created if missing): every job's spec, state,\n"
                            "steps and results survive a restart, even a SIGKILL; jobs that were running come\n"
                            "back interrupted, queued ones run. Empty: jobs are kept in memory only"),
             "TPUEMU_DATA_DIR");
  int http_port = -1;
  env_option(app.add_option("--http-port", http_port,
                            "serve the web view at / and Prometheus metrics at /metrics over HTTP on this port,\n"
                            "on --listen's address (0 picks a free port; -1, the default, serves none).\n"
                            "docs/web-view.md, docs/metrics.md"),
             "TPUEMU_HTTP_PORT")
      ->capture_default_str();
  std::string web_address;
  env_option(app.add_option("--web-address", web_address,
                            "the web view's address as clients reach it, when that is not this host and --http-port\n"
                            "(a published or forwarded port), e.g. http://localhost:19090/ : `tpuemu cluster status`\n"
                            "prints it"),
             "TPUEMU_WEB_ADDRESS")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return absl::StartsWith(text, "http://") || absl::StartsWith(text, "https://")
                       ? ""
                       : "'" + text + "': an address a browser opens, starting http:// or https://";
          },
          "URL"));
  app.add_option("--port-file", port_file, "write the bound port here once serving");
  app.add_flag("--check-config", check_config,
               "check flags and environment and exit (0 if usable, 2 if not) without serving");
  std::string tls_dir;
  bool insecure = false;
  env_option(app.add_option("--tls-dir", tls_dir,
                            "the pod's credentials (`tpuemu credentials create DIR`): mutual TLS with the pod's\n"
                            "other members, and the tokens clients present; docs/security.md"),
             "TPUEMU_TLS_DIR");
  env_option(app.add_flag("--insecure", insecure,
                           "serve and dial in plaintext, unauthenticated: anyone who reaches the port can use it"),
             "TPUEMU_INSECURE");
  app.footer(kFooter);
  if (int code = ParseFlagsAndEnv(app, argc, argv, known_env); code >= 0) return code;

  if (!ReportUnknownTpuemuVariables(known_env, check_config)) return 2;
  auto security = SecurityFromFlags(tls_dir, insecure, /*needs_tokens=*/true);
  if (!security.ok()) {
    spdlog::error("{}", std::string(security.status().message()));
    return 2;
  }
  SetProcessSecurity(*security);
  auto timeout = ParseTimeFlag(heartbeat_timeout, argc, argv, "--heartbeat-timeout", "TPUEMU_HEARTBEAT_TIMEOUT",
                               kMaxHeartbeatTimeout);
  if (!timeout.ok()) {
    spdlog::error("{}", std::string(timeout.status().message()));
    return 2;
  }
  options.heartbeat_timeout = *timeout;
  if (check_config) {
    auto topo = Topology::Create(options.topology);
    const absl::Status valid = topo.ok() ? Coordinator::Validate(options) : topo.status();
    if (!valid.ok()) {
      spdlog::error("{}", WithFlagNames(valid.message()));
      return 2;
    }
    std::printf("pod: %s, %d workers\nlisten: %s\nheartbeat timeout: %s\njob store: %s\nDCN fabric: %g:1\n",
                topo->Describe().c_str(), topo->num_hosts(), listen.c_str(),
                absl::FormatDuration(options.heartbeat_timeout).c_str(),
                options.data_dir.empty() ? "in memory only (no --data-dir)" : (options.data_dir + "/jobs.db").c_str(),
                options.dcn_oversubscription);
    return 0;
  }

  BlockShutdownSignals();
  auto coordinator = Coordinator::Create(options, MakeGrpcWorkerClient);
  if (!coordinator.ok()) {
    spdlog::error("{}", WithFlagNames(coordinator.status().message()));
    return 2;
  }
  std::unique_ptr<HttpServer> http;
  if (http_port >= 0) {
    const std::string host = listen.substr(0, listen.rfind(':'));
    Coordinator* c = coordinator->get();
    std::map<std::string, HttpHandler> routes = WebViewRoutes(*c, c->topology());
    routes["/metrics"] = Constant(kPrometheusTextType, [c] { return c->MetricsText(); });
    auto started = HttpServer::Start(host, http_port, std::move(routes), ReadTokenCheck());
    if (!started.ok()) {
      spdlog::error("--http-port {}: {}", http_port, std::string(started.status().message()));
      return 1;
    }
    http = *std::move(started);
    spdlog::info("web view at http://{}:{}/, metrics at /metrics", host, http->port());
  }
  // The web view first: the pod's status says where it is.
  CoordinatorServiceImpl service(coordinator->get(), http ? http->port() : 0, http ? web_address : "");
  auto server = StartServer(listen, {&service}, ServerPeers::kMembersAndClients);
  if (!server.ok()) {
    spdlog::error("{}", std::string(server.status().message()));
    return 1;
  }
  SetReady(*server, false);
  spdlog::info("coordinator for {} serving on port {}; job store {}", (*coordinator)->topology().Describe(),
               server->port, options.data_dir.empty() ? "in memory only" : options.data_dir + "/jobs.db");
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << server->port << "\n";
    std::rename(tmp.c_str(), port_file.c_str());
  }
  WaitForShutdownSignal(std::chrono::milliseconds(200),
                        [&] { SetReady(*server, (*coordinator)->ClusterStatus().ready()); });
  spdlog::info(options.data_dir.empty()
                   ? "shutting down: cancelling jobs, draining for up to 5 s"
                   : "shutting down: the queue stays in the job store; the running job is stopped and is interrupted, "
                     "or resumed (max_restarts), when a coordinator starts again on it; draining for up to 5 s");
  ExitAfter(std::chrono::seconds(8), 0);
  SetReady(*server, false);
  (*coordinator)->Drain("the coordinator is shutting down (SIGTERM)");
  StopServer(*server, std::chrono::seconds(5));
  http.reset();
  coordinator->reset();
  return 0;
}
