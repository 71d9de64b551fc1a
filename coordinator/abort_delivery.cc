#include "coordinator/abort_delivery.h"

#include "core/wire/run_number.h"
#include "spdlog/spdlog.h"

namespace tpuemu {
namespace {

// Each try waits this long for an answer; a stopped worker is asked again
// after the pause until it answers or its place changes hands.
constexpr absl::Duration kAttempt = absl::Seconds(1);
constexpr auto kPause = std::chrono::milliseconds(500);

}  // namespace

AbortDelivery::~AbortDelivery() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (Sender& s : senders_) s.thread.join();
}

void AbortDelivery::Send(int host, uint64_t incarnation, std::shared_ptr<WorkerInterface> worker, uint64_t job,
                         const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = senders_.begin(); it != senders_.end();) {
    if (!it->done) {
      ++it;
      continue;
    }
    it->thread.join();
    it = senders_.erase(it);
  }
  Sender& sender = senders_.emplace_back();
  sender.thread = std::thread(
      [this, host, incarnation, worker = std::move(worker), job, why, self = &sender] {
        Deliver(host, incarnation, worker, job, why, self);
      });
}

void AbortDelivery::Deliver(int host, uint64_t incarnation, const std::shared_ptr<WorkerInterface>& worker,
                            uint64_t job, const std::string& why, Sender* self) {
  for (int tries = 1;; ++tries) {
    const absl::Status s = worker->Abort(incarnation, job, why, kAttempt);
    // Refused: another process holds the place now, and never had the job.
    if (s.ok() || absl::IsFailedPrecondition(s)) {
      if (tries > 1) spdlog::info("host {} heard the abort of {} at try {}", host, RunName(job), tries);
      break;
    }
    if (tries == 1) {
      spdlog::warn("host {} did not hear the abort of {} ({}); asking again until it does", host, RunName(job),
                   s.ToString());
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, kPause, [&] { return stop_; })) break;
    lock.unlock();
    if (!still_holds_(host, incarnation)) break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  self->done = true;
}

}  // namespace tpuemu
