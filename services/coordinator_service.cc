#include "services/coordinator_service.h"

#include "services/status_conv.h"
#include "services/transport_security.h"

namespace tpuemu {
namespace {

template <typename T>
grpc::Status Fill(absl::StatusOr<T> result, T* out) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *out = *std::move(result);
  return grpc::Status::OK;
}

// Every call says who may make it (services/transport_security.h): a
// plaintext server lets anyone through, a TLS one only the right peer.
#define TPUEMU_AUTHORIZE(ctx, role, what)                                  \
  if (grpc::Status denied = Authorize(*(ctx), PeerRole::role, what); !denied.ok()) return denied

}  // namespace

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED || state == v1::JOB_STATE_CANCELLED ||
         state == v1::JOB_STATE_INTERRUPTED;
}

grpc::Status CoordinatorServiceImpl::RegisterWorker(grpc::ServerContext* ctx, const v1::RegisterWorkerRequest* req,
                                                    v1::RegisterWorkerResponse* resp) {
  TPUEMU_AUTHORIZE(ctx, kMember, "register a worker");
  return Fill(backend_->RegisterWorker(*req), resp);
}

grpc::Status CoordinatorServiceImpl::Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                                               v1::HeartbeatResponse*) {
  TPUEMU_AUTHORIZE(ctx, kMember, "send heartbeats");
  return ToGrpcStatus(backend_->Heartbeat(req->global_host(), req->incarnation(), req->resident_bytes()));
}

grpc::Status CoordinatorServiceImpl::ForgottenJobs(grpc::ServerContext* ctx, const v1::ForgottenJobsRequest* req,
                                                   v1::ForgottenJobsResponse* resp) {
  TPUEMU_AUTHORIZE(ctx, kMember, "ask which checkpoints may go");
  for (uint64_t job : backend_->ForgottenJobs({req->jobs().begin(), req->jobs().end()})) resp->add_jobs(job);
  return grpc::Status::OK;
}

grpc::Status CoordinatorServiceImpl::GetClusterStatus(grpc::ServerContext* ctx, const v1::ClusterStatusRequest*,
                                                      v1::ClusterStatus* resp) {
  TPUEMU_AUTHORIZE(ctx, kRead, "read the pod's status");
  *resp = backend_->ClusterStatus();
  resp->set_web_port(web_port_);
  resp->set_web_address(web_address_);
  return grpc::Status::OK;
}

grpc::Status CoordinatorServiceImpl::SubmitJob(grpc::ServerContext* ctx, const v1::SubmitJobRequest* req, v1::Job* resp) {
  TPUEMU_AUTHORIZE(ctx, kAdmin, "submit jobs");
  return Fill(backend_->SubmitJob(*req), resp);
}

grpc::Status CoordinatorServiceImpl::StreamJobTrace(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                                                    grpc::ServerWriter<v1::JobTrace>* writer) {
  TPUEMU_AUTHORIZE(ctx, kRead, "read traces");
  auto reader = backend_->ReadJobTrace(req->id(), 0);
  if (!reader.ok()) return ToGrpcStatus(reader.status());
  v1::JobTrace piece;
  while ((*reader)->Next(kReplyPieceBytes, &piece)) {
    if (ctx->IsCancelled() || !writer->Write(piece)) return grpc::Status(grpc::StatusCode::CANCELLED, "the reader left");
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorServiceImpl::GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req, v1::Job* resp) {
  TPUEMU_AUTHORIZE(ctx, kRead, "read jobs");
  return Fill(backend_->GetJob(req->id()), resp);
}

grpc::Status CoordinatorServiceImpl::StreamJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest*,
                                                grpc::ServerWriter<v1::ListJobsResponse>* writer) {
  TPUEMU_AUTHORIZE(ctx, kRead, "list jobs");
  v1::ListJobsResponse all = backend_->ListJobs();
  // The first piece says what was dropped; every piece holds whole jobs, at
  // least one (a job alone always fits in a reply, see kMaxReplyBytes).
  v1::ListJobsResponse piece;
  piece.set_finished_jobs_dropped(all.finished_jobs_dropped());
  piece.set_finished_jobs_kept(all.finished_jobs_kept());
  size_t bytes = piece.ByteSizeLong();
  for (v1::Job& job : *all.mutable_jobs()) {
    const size_t size = job.ByteSizeLong() + 8;  // the field's tag and length, with room to spare
    if (piece.jobs_size() > 0 && bytes + size > kReplyPieceBytes) {
      if (ctx->IsCancelled() || !writer->Write(piece)) return grpc::Status(grpc::StatusCode::CANCELLED, "the reader left");
      piece.Clear();
      bytes = 0;
    }
    bytes += size;
    *piece.add_jobs() = std::move(job);
  }
  writer->Write(piece);
  return grpc::Status::OK;
}

grpc::Status CoordinatorServiceImpl::WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest* req,
                                              grpc::ServerWriter<v1::JobEvent>* writer) {
  TPUEMU_AUTHORIZE(ctx, kRead, "watch jobs");
  int64_t version = -1;
  // A queued job's place moves as jobs ahead start, which changes no record:
  // sent when its position changes, and its reason (which may count a lost
  // worker's seconds) at most every 5 s.
  int position = 0;
  std::string reason;
  absl::Time reason_sent;
  while (!ctx->IsCancelled()) {
    auto next = backend_->WaitJob(req->id(), version, absl::Seconds(1));
    if (!next.ok()) return ToGrpcStatus(next.status());
    const v1::Job& job = next->first;
    const bool moved = job.queue_position() != position ||
                       (job.waiting_for() != reason && absl::Now() - reason_sent >= absl::Seconds(5));
    if (next->second == version && !moved) continue;
    version = next->second;
    position = job.queue_position();
    reason = job.waiting_for();
    reason_sent = absl::Now();
    v1::JobEvent event;
    *event.mutable_job() = next->first;
    if (!writer->Write(event)) break;
    if (IsTerminal(next->first.state())) break;
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorServiceImpl::CancelJob(grpc::ServerContext* ctx, const v1::CancelJobRequest* req, v1::Job* resp) {
  TPUEMU_AUTHORIZE(ctx, kAdmin, "cancel jobs");
  return Fill(backend_->CancelJob(req->id()), resp);
}

grpc::Status CoordinatorServiceImpl::AddFaults(grpc::ServerContext* ctx, const v1::AddFaultsRequest* req,
                                               v1::AddFaultsResponse* resp) {
  TPUEMU_AUTHORIZE(ctx, kAdmin, "add faults");
  return Fill(backend_->AddFaults(*req), resp);
}

grpc::Status CoordinatorServiceImpl::ResumeJob(grpc::ServerContext* ctx, const v1::ResumeJobRequest* req, v1::Job* resp) {
  TPUEMU_AUTHORIZE(ctx, kAdmin, "resume jobs");
  return Fill(backend_->ResumeJob(req->id()), resp);
}

}  // namespace tpuemu
