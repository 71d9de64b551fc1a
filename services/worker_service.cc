#include "services/worker_service.h"

#include <functional>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
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

}  // namespace

PodConfig PodConfigFromProto(const v1::ConfigureRequest& req) {
  PodConfig config;
  config.topology = FromProto(req.spec());
  config.time_scale = req.spec().time_scale();
  for (const v1::WorkerInfo& w : req.workers()) config.host_addresses[w.host()] = w.address();
  return config;
}

v1::ConfigureRequest PodConfigToProto(const PodConfig& config) {
  v1::ConfigureRequest req;
  *req.mutable_spec() = ToProto(config.topology, config.time_scale);
  for (const auto& [host, address] : config.host_addresses) {
    v1::WorkerInfo* w = req.add_workers();
    w->set_host(host);
    w->set_address(address);
  }
  return req;
}

grpc::Status WorkerServiceImpl::Configure(grpc::ServerContext*, const v1::ConfigureRequest* req,
                                          v1::ConfigureResponse*) {
  if (auto s = backend_->CheckIncarnation(req->incarnation(), "Configure"); !s.ok()) return ToGrpcStatus(s);
  return Guarded("Configure", [&] { return ToGrpcStatus(backend_->Configure(PodConfigFromProto(*req))); });
}

grpc::Status WorkerServiceImpl::PrepareJob(grpc::ServerContext*, const v1::RunJobRequest* req,
                                           v1::PrepareJobResponse*) {
  if (auto s = backend_->CheckIncarnation(req->incarnation(), "PrepareJob"); !s.ok()) return ToGrpcStatus(s);
  return Guarded(absl::StrCat("PrepareJob of job ", req->job()), [&] {
    auto spec = JobSpecFromProto(*req);
    if (!spec.ok()) return ToGrpcStatus(spec.status());
    return ToGrpcStatus(backend_->PrepareJob(req->job(), *spec));
  });
}

grpc::Status WorkerServiceImpl::RunJob(grpc::ServerContext*, const v1::RunJobRequest* req, v1::RunJobResponse* resp) {
  if (auto s = backend_->CheckIncarnation(req->incarnation(), "RunJob"); !s.ok()) return ToGrpcStatus(s);
  return Guarded(absl::StrCat("RunJob of job ", req->job()), [&] {
    auto chips = backend_->RunJob(req->job(), req->step());
    if (!chips.ok()) return ToGrpcStatus(chips.status());
    for (const ChipRunResult& c : *chips) *resp->add_chips() = ToProto(c);
    return grpc::Status::OK;
  });
}

grpc::Status WorkerServiceImpl::CheckJob(grpc::ServerContext*, const v1::CheckJobRequest* req,
                                         v1::CheckJobResponse* resp) {
  if (auto s = backend_->CheckIncarnation(req->incarnation(), "CheckJob"); !s.ok()) return ToGrpcStatus(s);
  return Guarded(absl::StrCat("CheckJob of job ", req->job()), [&] {
    auto checks = backend_->CheckJob(req->job());
    if (!checks.ok()) return ToGrpcStatus(checks.status());
    for (const ChipCheck& c : *checks) *resp->add_chips() = ToProto(c);
    return grpc::Status::OK;
  });
}

grpc::Status WorkerServiceImpl::Abort(grpc::ServerContext*, const v1::AbortRequest* req, v1::AbortResponse*) {
  if (auto s = backend_->CheckIncarnation(req->incarnation(), "Abort"); !s.ok()) return ToGrpcStatus(s);
  backend_->Abort(req->job(), req->reason());
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::GetStatus(grpc::ServerContext*, const v1::WorkerStatusRequest*,
                                          v1::WorkerStatus* resp) {
  WorkerStatusView s = backend_->Status();
  resp->set_global_host(s.host);
  for (int c : s.chips) resp->add_chips(c);
  resp->set_configured(s.configured);
  resp->set_running_job(s.running_job);
  resp->set_frames_waiting(s.frames_waiting);
  resp->set_frames_dropped(s.frames_dropped);
  return grpc::Status::OK;
}

}  // namespace tpuemu
