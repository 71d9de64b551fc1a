#include "worker/coordinator_session.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/base/process_memory.h"
#include "spdlog/spdlog.h"

namespace tpuemu {
namespace {

// Errors the coordinator gives about the place itself: retrying cannot help.
bool Refused(const absl::Status& status) {
  return absl::IsInvalidArgument(status) || absl::IsAlreadyExists(status) || absl::IsResourceExhausted(status);
}

}  // namespace

CoordinatorSession::CoordinatorSession(std::unique_ptr<Registrar> registrar, const std::string& coordinator,
                                       const std::string& address, const WorkerPlace& place,
                                       std::function<void(int, uint64_t)> on_place)
    : coordinator_(coordinator),
      address_(address),
      place_(place),
      on_place_(std::move(on_place)),
      registrar_(std::move(registrar)) {}

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
  auto granted =
      registrar_->RegisterWorker({place.slice, place.host, address_, place.num_slices, place.source, place.machine});
  if (!granted.ok()) {
    retry = !Refused(granted.status());
    return granted.status();
  }
  global_host_ = granted->global_host;
  incarnation_ = granted->incarnation;
  if (granted->heartbeat_timeout > absl::ZeroDuration()) {
    heartbeat_every_ms_ = std::clamp<int64_t>(absl::ToInt64Milliseconds(granted->heartbeat_timeout / 6), 50, 500);
  }
  place_.slice = granted->slice;
  place_.host = granted->host;
  registered_ = true;
  spdlog::info("registered with {} as slice {} host {} (global host {}; {}), serving at {}", coordinator_,
               granted->slice, granted->host, global_host_, place.source, address_);
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
  while (SleepUnlessStopped(std::chrono::milliseconds(heartbeat_every_ms_.load()))) {
    const absl::Status status = registrar_->Heartbeat(global_host_, incarnation_, ResidentBytes());
    if (absl::IsNotFound(status)) {
      // A coordinator that restarted: take the same place again.
      registered_ = false;
      WorkerPlace again = place_;
      again.source = absl::StrCat("the place it held before the coordinator restarted (", place_.source, ")");
      spdlog::warn("the coordinator at {} does not know this worker ({}); registering again", coordinator_,
                   std::string(status.message()));
      bool retry = false;
      if (absl::Status s = RegisterOnce(again, retry); !s.ok() && !retry) {
        std::lock_guard<std::mutex> lock(mu_);
        ended_ = std::string(s.message());
      }
    } else if (absl::IsFailedPrecondition(status)) {
      // Another process holds this place now; this one must not act for it.
      registered_ = false;
      std::lock_guard<std::mutex> lock(mu_);
      ended_ = std::string(status.message());
    }
    if (!ended().empty()) {
      spdlog::error("leaving the pod: {}", ended());
      return;
    }
  }
}

}  // namespace tpuemu
