#include "client/health_command.h"

#include <iostream>

#include "client/cli_checks.h"
#include "client/client_security.h"
#include "client/connection_failure.h"
#include "client/pod_state.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"

namespace tpuemu {
namespace {

struct HealthOptions {
  std::string address;
  bool live = false;
  double timeout_s = 2;
  bool json = false;
};

// What to try when no answer came: gRPC's reason alone ("Socket closed")
// does not say that a worker admits only its pod's members.
std::string UnreachableHint(const std::string& error, const TransportSecurity& security) {
  const ConnectionFailure failure = ClassifyConnectionFailure(error);
  if (failure == ConnectionFailure::kOtherCa) {
    return "its certificate is not signed by the CA given: give that pod's own ca.pem or credentials directory";
  }
  if (failure == ConnectionFailure::kClosed) {
    if (!security.tls) {
      return "it closed the connection: it speaks TLS; leave TPUEMU_INSECURE unset and give the pod's credentials";
    }
    if (security.cert_pem.empty()) {
      return "it closed the connection: a worker answers only its pod's members (mutual TLS), not a client with a "
             "CA: set TPUEMU_TLS_DIR to the pod's credentials directory (a local pod's: $TPUEMU_HOME/tls); or it "
             "speaks plaintext (a pod started with --insecure: TPUEMU_INSECURE=1)";
    }
    return "it closed the connection: it is stopping, or speaks plaintext (a pod started with --insecure: "
           "TPUEMU_INSECURE=1)";
  }
  if (failure == ConnectionFailure::kRefused) return "nothing listens there: is the pod running?";
  if (failure == ConnectionFailure::kUnresolved) {
    return "the host name does not resolve: check it (a compose service's or Kubernetes Service's name resolves "
           "only inside that network; from outside, give a published address such as localhost:PORT)";
  }
  if (failure == ConnectionFailure::kTimedOut) {
    return "no answer within --timeout: the host is down or unreachable, a firewall drops the packets, or the "
           "process is too busy to answer; try a longer --timeout";
  }
  return "";
}

int Probe(const HealthOptions& o) {
  if (auto s = CheckHostPort(o.address, "address"); !s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 2;
  }
  auto security = ProbeSecurityFor(o.address);
  if (!security.ok()) {
    std::cerr << "error: " << security.status().message() << "\n";
    return 2;
  }
  auto stub = grpc::health::v1::Health::NewStub(MakeChannel(o.address, grpc::ChannelArguments(), *security));
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(o.live ? "liveness" : "");
  grpc::health::v1::HealthCheckResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000)));
  const grpc::Status status = stub->Check(&ctx, req, &resp);
  const bool serving = status.ok() && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  const std::string hint = status.ok() ? "" : UnreachableHint(status.error_message(), *security);
  const std::string state =
      status.ok() ? grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status()) : "UNREACHABLE";
  if (o.json) {
    std::cout << nlohmann::json{{"address", o.address},
                                {"check", o.live ? "liveness" : "readiness"},
                                {"status", state},
                                {"serving", serving},
                                {"error", status.ok() ? "" : status.error_message()},
                                {"hint", hint}}
                     .dump()
              << "\n";
  } else {
    std::cout << o.address << " " << (o.live ? "liveness" : "readiness") << ": " << state
              << (status.ok() ? "" : " (" + status.error_message() + ")") << "\n";
    if (!hint.empty()) std::cout << "hint: " << hint << "\n";
  }
  return serving ? 0 : 1;
}

}  // namespace

void AddHealthCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<HealthOptions>();
  auto* cmd = app.add_subcommand("health", "probe a coordinator or worker (grpc.health.v1); exit 0 if serving");
  cmd->add_option("address", o->address, "the server's HOST:PORT")->required();
  cmd->add_flag("--live", o->live, "liveness (serving at all) instead of readiness");
  cmd->add_option("--timeout", o->timeout_s, "seconds to wait for an answer")
      ->check(PositiveSeconds())
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print {address, check, status, serving, error, hint}");
  cmd->footer(
      "\nReadiness means: a worker has registered and been configured; the coordinator has every\n"
      "worker of its pod. Exit 0 when SERVING, 1 otherwise (NOT_SERVING or unreachable).\n"
      "Examples:\n"
      "  tpuemu health localhost:50051            is the pod ready?\n"
      "  tpuemu health worker-0:8471 --live       is this worker process serving?");
  cmd->callback([o, exit_code] { *exit_code = Probe(*o); });
}

}  // namespace tpuemu
