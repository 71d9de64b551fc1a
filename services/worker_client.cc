#include "services/worker_client.h"

#include "grpcpp/grpcpp.h"
#include "services/proto_conv.h"
#include "services/status_conv.h"
#include "services/worker_service.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {
namespace {

class GrpcWorkerClient : public WorkerClient {
 public:
  explicit GrpcWorkerClient(const std::string& address)
      : address_(address),
        stub_(v1::WorkerService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {}

  absl::Status Configure(const PodConfig& config) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ConfigureResponse resp;
    return FromGrpcStatus(stub_->Configure(&ctx, PodConfigToProto(config), &resp), Context());
  }

  absl::Status PrepareCollective(uint64_t job, const CollectiveSpec& spec) override {
    grpc::ClientContext ctx;
    v1::PrepareCollectiveResponse resp;
    return FromGrpcStatus(stub_->PrepareCollective(&ctx, Request(job, spec), &resp), Context());
  }

  absl::StatusOr<std::vector<ChipRunResult>> RunCollective(uint64_t job, const CollectiveSpec& spec) override {
    grpc::ClientContext ctx;
    v1::RunCollectiveResponse resp;
    const v1::RunCollectiveRequest req = Request(job, spec);
    absl::Status status = FromGrpcStatus(stub_->RunCollective(&ctx, req, &resp), Context());
    if (!status.ok()) return status;
    std::vector<ChipRunResult> out;
    for (const v1::ChipResult& c : resp.chips()) {
      auto r = FromProto(c);
      if (!r.ok()) return r.status();
      out.push_back(*std::move(r));
    }
    return out;
  }

  absl::StatusOr<std::map<int, uint64_t>> CheckCollective(uint64_t job) override {
    grpc::ClientContext ctx;
    v1::CheckCollectiveRequest req;
    req.set_job(job);
    v1::CheckCollectiveResponse resp;
    absl::Status status = FromGrpcStatus(stub_->CheckCollective(&ctx, req, &resp), Context());
    if (!status.ok()) return status;
    std::map<int, uint64_t> out;
    for (const auto& c : resp.chips()) out[c.chip()] = c.mismatches();
    return out;
  }

  absl::Status Abort(uint64_t job, const std::string& reason) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::AbortRequest req;
    req.set_job(job);
    req.set_reason(reason);
    v1::AbortResponse resp;
    return FromGrpcStatus(stub_->Abort(&ctx, req, &resp), Context());
  }

 private:
  static v1::RunCollectiveRequest Request(uint64_t job, const CollectiveSpec& spec) {
    v1::RunCollectiveRequest req;
    req.set_job(job);
    *req.mutable_spec() = ToProto(spec);
    return req;
  }
  std::string Context() const { return "worker at " + address_; }
  std::string address_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
};

}  // namespace

std::unique_ptr<WorkerClient> MakeGrpcWorkerClient(const std::string& address) {
  return std::make_unique<GrpcWorkerClient>(address);
}

}  // namespace tpuemu
