#include "services/registrar_client.h"

#include <algorithm>
#include <atomic>

#include "grpcpp/grpcpp.h"
#include "services/cluster_conv.h"
#include "services/status_conv.h"
#include "services/transport_security.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {
namespace {

// The coordinator may ask the holders of places whether they live (1 s each).
constexpr auto kRegisterDeadline = std::chrono::seconds(5);
// A heartbeat gets as long as the coordinator waits for one (it says so when
// it registers the worker), so that a late one still lands and counts
// rather than being given up on a busy host; between these bounds.
constexpr absl::Duration kMinHeartbeatDeadline = absl::Seconds(1);
constexpr absl::Duration kMaxHeartbeatDeadline = absl::Seconds(30);

// gRPC backs off between reconnection attempts up to 120 s by default, so
// after a coordinator was down for a minute its workers would take as long
// again to notice it is back (calls fail at once while the channel waits);
// 2 s at most keeps a restarted coordinator's pod whole within seconds.
//
// A coordinator that comes back may come back at a new address (a
// re-created pod, a restarted container without its network namespace): a
// failed connection looks its name up again after 1 s, not gRPC's default
// 30 s, during which every heartbeat would go to the old address.
//
// The channel gets a connection of its own (no shared subchannel): it
// carries the registrations and heartbeats and nothing else. One connection
// for both: a registration again after the coordinator restarted goes where
// the heartbeat that found it restarted went. On a second connection, idle
// since the first registration, it went to the old coordinator over a TCP
// connection nothing had closed (a killed container sends no FIN) and waited
// out its 5 s deadline: a restarted Kubernetes coordinator took 11.6 s to
// have its pod whole again.
//
// gRPC also takes the minimum backoff as the time one connection attempt
// gets, TLS handshake included: 5 s, so that a handshake slowed by a busy
// host is not abandoned and begun again (services/grpc_fabric.cc, where
// 200 ms failed peer links); failed attempts are retried from 200 ms on.
std::shared_ptr<grpc::Channel> CoordinatorChannel(const std::string& coordinator) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 1000);
  return MakeChannel(coordinator, args);
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
    GrantedPlace granted = FromProto(resp);
    if (granted.heartbeat_timeout > absl::ZeroDuration()) {
      heartbeat_deadline_ms_ = absl::ToInt64Milliseconds(
          std::clamp(granted.heartbeat_timeout, kMinHeartbeatDeadline, kMaxHeartbeatDeadline));
    }
    return granted;
  }

  absl::Status Heartbeat(int global_host, uint64_t incarnation, uint64_t resident_bytes) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(heartbeat_deadline_ms_.load())));
    v1::HeartbeatRequest req;
    req.set_global_host(global_host);
    req.set_incarnation(incarnation);
    req.set_resident_bytes(resident_bytes);
    v1::HeartbeatResponse resp;
    return FromGrpcStatus(stub_->Heartbeat(&ctx, req, &resp), "");
  }

  absl::StatusOr<std::vector<uint64_t>> ForgottenJobs(const std::vector<uint64_t>& jobs) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));  // nothing waits on it
    v1::ForgottenJobsRequest req;
    req.mutable_jobs()->Add(jobs.begin(), jobs.end());
    v1::ForgottenJobsResponse resp;
    absl::Status status = FromGrpcStatus(stub_->ForgottenJobs(&ctx, req, &resp), "");
    if (!status.ok()) return status;
    return std::vector<uint64_t>(resp.jobs().begin(), resp.jobs().end());
  }

 private:
  std::unique_ptr<v1::CoordinatorService::Stub> stub_;  // registrations, heartbeats, forgotten jobs
  std::atomic<int64_t> heartbeat_deadline_ms_{absl::ToInt64Milliseconds(kMinHeartbeatDeadline)};
};

}  // namespace

std::unique_ptr<Registrar> MakeGrpcRegistrar(const std::string& coordinator) {
  return std::make_unique<GrpcRegistrar>(coordinator);
}

}  // namespace tpuemu
