#include "worker/coordinator_session.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "spdlog/spdlog.h"

namespace tpuemu {
namespace {

std::chrono::system_clock::time_point In(std::chrono::milliseconds d) { return std::chrono::system_clock::now() + d; }

// Errors the coordinator gives about the place itself: retrying cannot help.
bool Refused(grpc::StatusCode code) {
  return code == grpc::StatusCode::INVALID_ARGUMENT || code == grpc::StatusCode::ALREADY_EXISTS ||
         code == grpc::StatusCode::RESOURCE_EXHAUSTED;
}

// The channel heartbeats and registrations use. gRPC backs off between
// reconnection attempts up to 120 s by default, so after a coordinator was
// down for a minute its workers would take as long again to notice it is
// back (calls fail at once while the channel waits); 2 s at most keeps a
// restarted coordinator's pod whole within seconds.
std::shared_ptr<grpc::Channel> CoordinatorChannel(const std::string& coordinator) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  return grpc::CreateCustomChannel(coordinator, grpc::InsecureChannelCredentials(), args);
}

}  // namespace

CoordinatorSession::CoordinatorSession(const std::string& coordinator, const std::string& address,
                                       const WorkerPlace& place, std::function<void(int, uint64_t)> on_place)
    : coordinator_(coordinator),
      address_(address),
      place_(place),
      on_place_(std::move(on_place)),
      stub_(v1::CoordinatorService::NewStub(CoordinatorChannel(coordinator))) {}

CoordinatorSession::~CoordinatorSession() { Stop(); }

void CoordinatorSession::Stop() {
  std::thread heartbeats;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    heartbeats = std::move(heartbeats_);
  }
  cv_.notify_all();
  if (heartbeats.joinable()) heartbeats.join();
}

std::string CoordinatorSession::ended() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ended_;
}

bool CoordinatorSession::SleepUnlessStopped(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, d, [&] { return stop_; });
}

absl::Status CoordinatorSession::RegisterOnce(const WorkerPlace& place, bool& retry) {
  v1::RegisterWorkerRequest req;
  req.set_slice(place.slice);
  req.set_host(place.host);
  req.set_address(address_);
  req.set_num_slices(place.num_slices);
  req.set_place_source(place.source);
  v1::RegisterWorkerResponse resp;
  grpc::ClientContext ctx;
  // The coordinator may ask the holders of places whether they live (1 s each).
  ctx.set_deadline(In(std::chrono::seconds(5)));
  const grpc::Status status = stub_->RegisterWorker(&ctx, req, &resp);
  if (!status.ok()) {
    retry = !Refused(status.error_code());
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  global_host_ = resp.global_host();
  incarnation_ = resp.incarnation();
  place_.slice = resp.slice();
  place_.host = resp.host();
  registered_ = true;
  spdlog::info("registered with {} as slice {} host {} (global host {}; {}), serving at {}", coordinator_,
               resp.slice(), resp.host(), global_host_, place.source, address_);
  on_place_(global_host_, incarnation_);
  return absl::OkStatus();
}

absl::Status CoordinatorSession::Register() {
  // Compose and Kubernetes start services in any order: wait for the
  // coordinator as long as it takes, saying so every 10 s.
  auto backoff = std::chrono::milliseconds(200);
  auto last_said = std::chrono::steady_clock::now();
  while (true) {
    bool retry = false;
    absl::Status s = RegisterOnce(place_, retry);
    if (s.ok() || !retry) return s;
    if (std::chrono::steady_clock::now() - last_said > std::chrono::seconds(10)) {
      spdlog::warn("still waiting for the coordinator at {}: {}", coordinator_, std::string(s.message()));
      last_said = std::chrono::steady_clock::now();
    }
    if (!SleepUnlessStopped(backoff)) return absl::CancelledError("stopped before registering");
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

void CoordinatorSession::StartHeartbeats() {
  // Under mu_, as Stop() takes the thread: registration may finish on its
  // own thread just as the process is told to stop.
  std::lock_guard<std::mutex> lock(mu_);
  if (!stop_) heartbeats_ = std::thread([this] { HeartbeatLoop(); });
}

void CoordinatorSession::HeartbeatLoop() {
  while (SleepUnlessStopped(std::chrono::milliseconds(500))) {
    v1::HeartbeatRequest hb;
    hb.set_global_host(global_host_);
    hb.set_incarnation(incarnation_);
    v1::HeartbeatResponse hb_resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(In(std::chrono::seconds(1)));
    const grpc::Status status = stub_->Heartbeat(&ctx, hb, &hb_resp);
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      // A coordinator that restarted: take the same place again.
      registered_ = false;
      WorkerPlace again = place_;
      again.source = absl::StrCat("the place it held before the coordinator restarted (", place_.source, ")");
      spdlog::warn("the coordinator at {} does not know this worker ({}); registering again", coordinator_,
                   status.error_message());
      bool retry = false;
      if (absl::Status s = RegisterOnce(again, retry); !s.ok() && !retry) {
        std::lock_guard<std::mutex> lock(mu_);
        ended_ = std::string(s.message());
      }
    } else if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
      // Another process holds this place now; this one must not act for it.
      registered_ = false;
      std::lock_guard<std::mutex> lock(mu_);
      ended_ = status.error_message();
    }
    if (!ended().empty()) {
      spdlog::error("leaving the pod: {}", ended());
      return;
    }
  }
}

}  // namespace tpuemu
