#include "worker/idle_release.h"

#include "core/base/process_memory.h"
#include "core/host/job.h"
#include "core/tensor/blis_memory.h"

namespace tpuemu {

IdleRelease& IdleRelease::Process() {
  // Never destroyed: its thread waits for the process's whole life.
  static IdleRelease* const release = new IdleRelease(
      [] {
        ReleaseBlisMemory();
        ReleaseFreedMemory();
      },
      kDefaultDelay, kAgainAfter);
  return *release;
}

IdleRelease::IdleRelease(std::function<void()> release, std::chrono::milliseconds delay,
                         std::chrono::milliseconds again)
    : release_(std::move(release)), again_(again), delay_(delay), thread_([this] { Loop(); }) {}

void IdleRelease::set_delay(std::chrono::milliseconds delay) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    delay_ = delay;
  }
  changed_.notify_all();
}

IdleRelease::~IdleRelease() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

std::shared_ptr<void> IdleRelease::Hold() {
  {
    std::lock_guard<std::mutex> lock(mu_);  // waits out a release in progress
    ++holds_;
    releases_due_ = kReleasesAfterJob;
  }
  return std::shared_ptr<void>(nullptr, [this](void*) { Drop(); });
}

std::shared_ptr<void> IdleRelease::AlsoRelease(std::function<void()> release) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_also_++;
  also_[id] = std::move(release);
  return std::shared_ptr<void>(nullptr, [this, id](void*) {
    std::lock_guard<std::mutex> lock(mu_);
    also_.erase(id);
  });
}

void IdleRelease::Drop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--holds_ == 0) {
    idle_since_ = std::chrono::steady_clock::now();
    changed_.notify_all();
  }
}

void IdleRelease::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  bool put_off = false;  // the last release was put off for a job still alive
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || (releases_due_ > 0 && holds_ == 0); });
    if (stop_) return;
    // Again from the start when a job comes (and perhaps goes), or the
    // delay changes, meanwhile.
    const auto idle_since = idle_since_;
    const bool first = releases_due_ == kReleasesAfterJob && !put_off;
    const auto delay = first ? delay_ : again_;
    if (changed_.wait_until(lock, idle_since + delay, [&] {
          return stop_ || holds_ > 0 || idle_since_ != idle_since || (first && delay_ != delay);
        })) {
      if (holds_ > 0 || idle_since_ != idle_since) put_off = false;  // a job came: the full delay after it
      continue;
    }
    // A job dropped without a hold (an abort racing its prepare) may still
    // be alive; its BLIS calls must finish first. Tried again shortly.
    if (LiveHostJobs() > 0) {
      idle_since_ = std::chrono::steady_clock::now();
      put_off = true;
      continue;
    }
    put_off = false;
    // The extras first: what they free (connections' buffers) goes back
    // with the rest of the heap.
    for (const auto& [_, also] : also_) also();
    release_();
    --releases_due_;
    idle_since_ = std::chrono::steady_clock::now();
  }
}

}  // namespace tpuemu
