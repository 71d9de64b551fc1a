// A job's abort as its chips see it: set when the coordinator aborts the job
// or one of this host's chips fails. Compute checks it between blocks (one
// BLIS multiply of a big block takes seconds) and paced waits sleep on it, so
// that a failed job's survivors stop at once instead of finishing their work.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "absl/status/status.h"
#include "core/pod/link_clock.h"

namespace tpuemu {

class JobAbort {
 public:
  // The first reason is kept.
  void Abort(const absl::Status& why);
  bool aborted() const { return aborted_.load(std::memory_order_relaxed); }
  // OK while the job is not aborted, else why it was.
  absl::Status status() const;
  // Sleeps until `until`; false when woken early by the abort.
  bool SleepUntil(WallClock::time_point until) const;

 private:
  std::atomic<bool> aborted_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  absl::Status why_;
};

}  // namespace tpuemu
