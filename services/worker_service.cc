#include "services/worker_service.h"

#include <functional>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/wire/run_number.h"
#include "services/cluster_conv.h"
#include "services/job_proto.h"
#include "services/proto_conv.h"
#include "services/status_conv.h"

namespace tpuemu {
namespace {

// The worker's RPC boundary: an allocation that fails while serving `what`
// fails that call with RESOURCE_EXHAUSTED (the coordinator fails the job with
// it) instead of terminating the worker and every job after it.
grpc::Status Guarded(const std::string& what, const std::function<grpc::Status()>& serve) {
  try {
    return serve();
  } catch (const std::bad_alloc&) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("the worker ran out of host memory in ", what));
  }
}

absl::Duration TimeLeft(const grpc::ServerContext& ctx) {
  return absl::Now() < absl::FromChrono(ctx.deadline()) ? absl::FromChrono(ctx.deadline()) - absl::Now()
                                                         : absl::ZeroDuration();
}

}  // namespace

grpc::Status WorkerServiceImpl::Configure(grpc::ServerContext*, const v1::ConfigureRequest* req,
                                          v1::ConfigureResponse*) {
  return Guarded("Configure", [&] { return ToGrpcStatus(worker_->Configure(req->incarnation(), FromProto(*req))); });
}

// A job's share ends with the job's abort, which the coordinator sends; the
// call itself is never cancelled here.
grpc::Status WorkerServiceImpl::PrepareJob(grpc::ServerContext*, const v1::RunJobRequest* req,
                                           v1::PrepareJobResponse*) {
  return Guarded(absl::StrCat("PrepareJob of ", RunName(req->job())), [&] {
    auto spec = JobSpecFromProto(*req);
    if (!spec.ok()) return ToGrpcStatus(spec.status());
    Cancellation never;
    const Placement placement = FromProto(req->placement());
    return ToGrpcStatus(worker_->PrepareJob(req->incarnation(), req->job(), *spec, placement, never));
  });
}

grpc::Status WorkerServiceImpl::RunJob(grpc::ServerContext*, const v1::RunJobRequest* req, v1::RunJobResponse* resp) {
  return Guarded(absl::StrCat("RunJob of ", RunName(req->job())), [&] {
    Cancellation never;
    auto added = FromProto(req->added_faults());
    if (!added.ok()) return ToGrpcStatus(added.status());
    auto chips = worker_->RunJob(req->incarnation(), req->job(), req->step(), *added, never);
    if (!chips.ok()) return ToGrpcStatus(chips.status());
    for (const ChipRunResult& c : *chips) *resp->add_chips() = ToProto(c);
    return grpc::Status::OK;
  });
}

grpc::Status WorkerServiceImpl::CheckJob(grpc::ServerContext*, const v1::CheckJobRequest* req,
                                         v1::CheckJobResponse* resp) {
  return Guarded(absl::StrCat("CheckJob of ", RunName(req->job())), [&] {
    Cancellation never;
    auto checks = worker_->CheckJob(req->incarnation(), req->job(), never);
    if (!checks.ok()) return ToGrpcStatus(checks.status());
    for (const ChipCheck& c : checks->chips) *resp->add_chips() = ToProto(c);
    *resp->mutable_memory() = ToProto(checks->memory);
    return grpc::Status::OK;
  });
}

grpc::Status WorkerServiceImpl::Abort(grpc::ServerContext* ctx, const v1::AbortRequest* req, v1::AbortResponse*) {
  return ToGrpcStatus(worker_->Abort(req->incarnation(), req->job(), req->reason(), TimeLeft(*ctx)));
}

grpc::Status WorkerServiceImpl::GetStatus(grpc::ServerContext* ctx, const v1::WorkerStatusRequest*,
                                          v1::WorkerStatus* resp) {
  auto status = worker_->Status(TimeLeft(*ctx));
  if (!status.ok()) return ToGrpcStatus(status.status());
  *resp = ToProto(*status);
  return grpc::Status::OK;
}

}  // namespace tpuemu
