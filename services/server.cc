#include "services/server.h"

#include <csignal>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"

namespace tpuemu {

absl::StatusOr<RunningServer> StartServer(const std::string& listen, const std::vector<grpc::Service*>& services) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  RunningServer running;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &running.port);
  builder.SetMaxReceiveMessageSize(8 << 20);
  for (grpc::Service* s : services) builder.RegisterService(s);
  running.server = builder.BuildAndStart();
  if (!running.server || running.port == 0) {
    return absl::UnavailableError(absl::StrCat("--listen '", listen,
                                               "': could not listen there (in use, or not a local address?)"));
  }
  return running;
}

void BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void WaitForShutdownSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
}

}  // namespace tpuemu
