#include "core/wire/job_abort.h"

namespace tpuemu {

void JobAbort::Abort(const absl::Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return;
    why_ = why.ok() ? absl::AbortedError("job aborted") : why;
    aborted_ = true;
  }
  cv_.notify_all();
}

absl::Status JobAbort::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return why_;
}

bool JobAbort::SleepUntil(WallClock::time_point until) const {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_until(lock, until, [&] { return aborted_.load(); });
}

}  // namespace tpuemu
