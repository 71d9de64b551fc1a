#include "client/coordinator_client.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client_security.h"
#include "client/connection_failure.h"
#include "grpcpp/grpcpp.h"
#include "services/coordinator_service.h"
#include "services/server.h"
#include "services/status_conv.h"

namespace tpuemu {
namespace {

void Deadline(grpc::ClientContext* ctx, double seconds) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
}

absl::Status Explain(const grpc::Status& s, const std::string& address) {
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    // gRPC's own reason (a name that did not resolve, a refused connection, a
    // deadline) tells a name problem from a stopped pod; a closed connection
    // is a coordinator that stopped during the call, or plaintext meeting TLS.
    const ConnectionFailure failure = ClassifyConnectionFailure(s.error_message());
    const bool closed = failure == ConnectionFailure::kClosed;
    const bool other_ca = failure == ConnectionFailure::kOtherCa;  // another pod's CA
    return absl::UnavailableError(absl::StrCat(
        "no coordinator answers at ", address, " (", s.error_message(), "): ",
        other_ca ? "its certificate is not signed by the CA given (TPUEMU_TLS_CA or --tls-ca): give that pod's own "
                   "ca.pem (made with its credentials, or $TPUEMU_HOME/tls/ca.pem of a local pod)"
        : closed ? "it closed the connection: it stopped (a local pod's: `tpuemu cluster restart-coordinator`), or "
                 "plaintext met TLS (a pod started with --insecure needs TPUEMU_INSECURE=1 or --insecure here, and "
                 "one with TLS needs neither; docs/security.md)"
               : "is the pod running? (a local pod whose coordinator stopped: `tpuemu cluster restart-coordinator`; "
                 "none: `tpuemu cluster up --local --topology v5e:4x4`)"));
  }
  return FromGrpcStatus(s);
}

// One request, one reply, within `timeout_s`.
template <class Request, class Response>
absl::StatusOr<Response> Unary(v1::CoordinatorService::Stub& stub,
                               grpc::Status (v1::CoordinatorService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                                                 Response*),
                               const Request& request, double timeout_s, const std::string& address) {
  grpc::ClientContext ctx;
  Deadline(&ctx, timeout_s);
  Response response;
  grpc::Status s = (stub.*rpc)(&ctx, request, &response);
  if (!s.ok()) return Explain(s, address);
  return response;
}

template <class Request>
Request WithId(const std::string& id) {
  Request request;
  request.set_id(id);
  return request;
}

}  // namespace

CoordinatorClient::CoordinatorClient(const std::string& address) : address_(address) {
  auto security = ClientSecurityFor(address);
  if (!security.ok()) {
    unusable_ = security.status();
    return;
  }
  *this = CoordinatorClient(address, *security);
}

CoordinatorClient::CoordinatorClient(const std::string& address, const TransportSecurity& security)
    : address_(address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxReplyBytes);
  // A job followed for hours hears of a frozen coordinator (services/server.h).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kClientKeepaliveMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kClientKeepaliveTimeoutMs);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // the client sends no data while it follows
  stub_ = v1::CoordinatorService::NewStub(MakeChannel(address, args, security));
}

absl::StatusOr<v1::ClusterStatus> CoordinatorClient::Status(double timeout_s) {
  if (!stub_) return unusable_;
  return Unary(*stub_, &v1::CoordinatorService::Stub::GetClusterStatus, v1::ClusterStatusRequest(), timeout_s,
               address_);
}

absl::StatusOr<v1::Job> CoordinatorClient::Submit(const v1::SubmitJobRequest& request) {
  if (!stub_) return unusable_;
  auto job = Unary(*stub_, &v1::CoordinatorService::Stub::SubmitJob, request, 10, address_);
  // A call that reached a coordinator and then broke may have been recorded
  // (the job is stored before the reply): submitting again could run it twice.
  const bool may_have_landed = (absl::IsUnavailable(job.status()) || absl::IsDeadlineExceeded(job.status())) &&
                               !absl::StrContains(job.status().message(), "failed to connect");
  if (!may_have_landed) return job;
  return absl::Status(job.status().code(),
                      absl::StrCat(job.status().message(),
                                   ". The job may have been accepted before the call broke: look with `tpuemu jobs` "
                                   "before submitting it again"));
}

absl::StatusOr<v1::Job> CoordinatorClient::Get(const std::string& id) {
  if (!stub_) return unusable_;
  return Unary(*stub_, &v1::CoordinatorService::Stub::GetJob, WithId<v1::GetJobRequest>(id), 5, address_);
}

absl::StatusOr<v1::ListJobsResponse> CoordinatorClient::List() {
  if (!stub_) return unusable_;
  grpc::ClientContext ctx;
  Deadline(&ctx, 30);
  auto reader = stub_->StreamJobs(&ctx, v1::ListJobsRequest());
  v1::ListJobsResponse all, piece;
  for (bool first = true; reader->Read(&piece); first = false) {
    if (first) {
      all.set_finished_jobs_dropped(piece.finished_jobs_dropped());
      all.set_finished_jobs_kept(piece.finished_jobs_kept());
    }
    for (v1::Job& job : *piece.mutable_jobs()) *all.add_jobs() = std::move(job);
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return Explain(s, address_);
  return all;
}

absl::StatusOr<v1::AddFaultsResponse> CoordinatorClient::AddFaults(const v1::AddFaultsRequest& request) {
  if (!stub_) return unusable_;
  return Unary(*stub_, &v1::CoordinatorService::Stub::AddFaults, request, 5, address_);
}

absl::StatusOr<v1::Job> CoordinatorClient::Cancel(const std::string& id) {
  if (!stub_) return unusable_;
  return Unary(*stub_, &v1::CoordinatorService::Stub::CancelJob, WithId<v1::CancelJobRequest>(id), 5, address_);
}

absl::StatusOr<v1::Job> CoordinatorClient::Resume(const std::string& id) {
  if (!stub_) return unusable_;
  return Unary(*stub_, &v1::CoordinatorService::Stub::ResumeJob, WithId<v1::ResumeJobRequest>(id), 5, address_);
}

absl::Status CoordinatorClient::Trace(const std::string& id,
                                      const std::function<absl::Status(const v1::JobTrace&)>& on_piece) {
  if (!stub_) return unusable_;
  grpc::ClientContext ctx;
  Deadline(&ctx, 300);  // a trace of a million spans is about 80 MB
  v1::GetJobRequest req;
  req.set_id(id);
  auto reader = stub_->StreamJobTrace(&ctx, req);
  v1::JobTrace piece;
  while (reader->Read(&piece)) {
    if (absl::Status s = on_piece(piece); !s.ok()) {
      ctx.TryCancel();
      reader->Finish();  // cancelled: its status says nothing more than `s`
      return s;
    }
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return Explain(s, address_);
  return absl::OkStatus();
}

absl::Status CoordinatorClient::Watch(const std::string& id, const std::function<void(const v1::Job&)>& on_change) {
  if (!stub_) return unusable_;
  grpc::ClientContext ctx;
  v1::WatchJobRequest req;
  req.set_id(id);
  auto reader = stub_->WatchJob(&ctx, req);
  v1::JobEvent event;
  bool answered = false;
  while (reader->Read(&event)) {
    answered = true;
    on_change(event.job());
  }
  grpc::Status s = reader->Finish();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE && answered) {
    // A connection that carried the job's events broke: the coordinator
    // went away (a closed socket is not plaintext meeting TLS here).
    return absl::UnavailableError(absl::StrCat(
        "the coordinator at ", address_, " stopped answering while the job was followed (", s.error_message(),
        "): `tpuemu cluster status` says whether it runs; a local pod's: `tpuemu cluster restart-coordinator`, "
        "then `tpuemu watch ", id, "` again"));
  }
  if (!s.ok()) return Explain(s, address_);
  return absl::OkStatus();
}

}  // namespace tpuemu
