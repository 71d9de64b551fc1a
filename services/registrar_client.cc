#include "services/registrar_client.h"

#include "grpcpp/grpcpp.h"
#include "services/cluster_conv.h"
#include "services/status_conv.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {
namespace {

// The coordinator may ask the holders of places whether they live (1 s each).
constexpr auto kRegisterDeadline = std::chrono::seconds(5);
constexpr auto kHeartbeatDeadline = std::chrono::seconds(1);

// gRPC backs off between reconnection attempts up to 120 s by default, so
// after a coordinator was down for a minute its workers would take as long
// again to notice it is back (calls fail at once while the channel waits);
// 2 s at most keeps a restarted coordinator's pod whole within seconds.
std::shared_ptr<grpc::Channel> CoordinatorChannel(const std::string& coordinator) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  return grpc::CreateCustomChannel(coordinator, grpc::InsecureChannelCredentials(), args);
}

class GrpcRegistrar : public Registrar {
 public:
  explicit GrpcRegistrar(const std::string& coordinator)
      : stub_(v1::CoordinatorService::NewStub(CoordinatorChannel(coordinator))) {}

  absl::StatusOr<GrantedPlace> RegisterWorker(const PlaceRequest& request) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kRegisterDeadline);
    v1::RegisterWorkerResponse resp;
    absl::Status status = FromGrpcStatus(stub_->RegisterWorker(&ctx, ToProto(request), &resp), "");
    if (!status.ok()) return status;
    return FromProto(resp);
  }

  absl::Status Heartbeat(int global_host, uint64_t incarnation) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kHeartbeatDeadline);
    v1::HeartbeatRequest req;
    req.set_global_host(global_host);
    req.set_incarnation(incarnation);
    v1::HeartbeatResponse resp;
    return FromGrpcStatus(stub_->Heartbeat(&ctx, req, &resp), "");
  }

 private:
  std::unique_ptr<v1::CoordinatorService::Stub> stub_;
};

}  // namespace

std::unique_ptr<Registrar> MakeGrpcRegistrar(const std::string& coordinator) {
  return std::make_unique<GrpcRegistrar>(coordinator);
}

}  // namespace tpuemu
