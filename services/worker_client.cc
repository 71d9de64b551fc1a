#include "services/worker_client.h"

#include <atomic>

#include "grpcpp/grpcpp.h"
#include "services/cluster_conv.h"
#include "services/job_proto.h"
#include "services/proto_conv.h"
#include "services/status_conv.h"
#include "services/transport_security.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {
namespace {

constexpr auto kConfigureDeadline = std::chrono::seconds(10);

// A connection of its own (no subchannel shared with another channel to the
// same address, such as a client of the process that held the place
// before): its state is this worker's (ConnectionDropped).
std::shared_ptr<grpc::Channel> Channel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return MakeChannel(address, args);
}

class GrpcWorkerClient : public WorkerInterface {
 public:
  explicit GrpcWorkerClient(const std::string& address)
      : address_(address),
        channel_(Channel(address)),
        stub_(v1::WorkerService::NewStub(channel_)) {}

  bool ConnectionDropped() override {
    // Edge-triggered: READY, then anything else (IDLE once the peer closed
    // the connection), or into TRANSIENT_FAILURE (reconnecting failed). An
    // IDLE channel is asked to connect, so that a connection is up to drop.
    const grpc_connectivity_state now = channel_->GetState(/*try_to_connect=*/true);
    const grpc_connectivity_state before = last_state_.exchange(now);
    return (before == GRPC_CHANNEL_READY && now != GRPC_CHANNEL_READY) ||
           (before != GRPC_CHANNEL_TRANSIENT_FAILURE && now == GRPC_CHANNEL_TRANSIENT_FAILURE);
  }

  absl::Status Configure(uint64_t incarnation, const PodConfig& config) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kConfigureDeadline);
    v1::ConfigureRequest req = ToProto(config);
    req.set_incarnation(incarnation);
    v1::ConfigureResponse resp;
    return FromGrpcStatus(stub_->Configure(&ctx, req, &resp), Context());
  }

  absl::Status PrepareJob(uint64_t incarnation, uint64_t job, const JobSpec& spec, const Placement& placement,
                          Cancellation& cancel) override {
    grpc::ClientContext ctx;
    const auto cancelled = cancel.OnCancel([&ctx] { ctx.TryCancel(); });
    v1::RunJobRequest req = Request(incarnation, job, spec);
    *req.mutable_placement() = ToProto(placement);
    v1::PrepareJobResponse resp;
    return FromGrpcStatus(stub_->PrepareJob(&ctx, req, &resp), Context());
  }

  absl::StatusOr<std::vector<ChipRunResult>> RunJob(uint64_t incarnation, uint64_t job, int step, const Faults& added,
                                                    Cancellation& cancel) override {
    grpc::ClientContext ctx;
    const auto cancelled = cancel.OnCancel([&ctx] { ctx.TryCancel(); });
    v1::RunJobRequest req;
    req.set_job(job);
    req.set_step(step);
    req.set_incarnation(incarnation);
    if (!added.empty()) *req.mutable_added_faults() = ToProto(added);
    v1::RunJobResponse resp;
    absl::Status status = FromGrpcStatus(stub_->RunJob(&ctx, req, &resp), Context());
    if (!status.ok()) return status;
    std::vector<ChipRunResult> out;
    for (const v1::ChipResult& c : resp.chips()) {
      auto r = FromProto(c);
      if (!r.ok()) return r.status();
      out.push_back(*std::move(r));
    }
    return out;
  }

  absl::StatusOr<HostCheck> CheckJob(uint64_t incarnation, uint64_t job, Cancellation& cancel) override {
    grpc::ClientContext ctx;
    const auto cancelled = cancel.OnCancel([&ctx] { ctx.TryCancel(); });
    v1::CheckJobRequest req;
    req.set_job(job);
    req.set_incarnation(incarnation);
    v1::CheckJobResponse resp;
    absl::Status status = FromGrpcStatus(stub_->CheckJob(&ctx, req, &resp), Context());
    if (!status.ok()) return status;
    HostCheck out;
    for (const v1::ChipCheck& c : resp.chips()) out.chips.push_back(FromProto(c));
    out.memory = FromProto(resp.memory());
    return out;
  }

  absl::StatusOr<WorkerStatusView> Status(absl::Duration timeout) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    v1::WorkerStatus resp;
    absl::Status status = FromGrpcStatus(stub_->GetStatus(&ctx, v1::WorkerStatusRequest(), &resp), Context());
    if (!status.ok()) return status;
    return FromProto(resp);
  }

  absl::Status Abort(uint64_t incarnation, uint64_t job, const std::string& reason, absl::Duration timeout) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    v1::AbortRequest req;
    req.set_job(job);
    req.set_reason(reason);
    req.set_incarnation(incarnation);
    v1::AbortResponse resp;
    return FromGrpcStatus(stub_->Abort(&ctx, req, &resp), Context());
  }

 private:
  static v1::RunJobRequest Request(uint64_t incarnation, uint64_t job, const JobSpec& spec) {
    v1::RunJobRequest req = ToProto(job, spec);
    req.set_incarnation(incarnation);
    return req;
  }
  std::string Context() const { return "worker at " + address_; }
  const std::string address_;
  const std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::atomic<grpc_connectivity_state> last_state_{GRPC_CHANNEL_IDLE};
};

}  // namespace

std::unique_ptr<WorkerInterface> MakeGrpcWorkerClient(const std::string& address) {
  return std::make_unique<GrpcWorkerClient>(address);
}

}  // namespace tpuemu
