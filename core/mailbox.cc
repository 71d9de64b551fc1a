#include "core/mailbox.h"

#include <thread>

#include "absl/strings/str_cat.h"

namespace tpuemu {

namespace {

// When a paced frame may be used. Processes on one machine share the steady
// clock, so the sender's due time holds as it is; a sender on another machine
// (a different clock: it would look far off) gets the same delay after receipt.
WallClock::time_point UsableAt(const FrameHeader& h, WallClock::time_point now) {
  if (h.due_at_ns == 0) return now;
  const auto sent = WallClock::time_point(std::chrono::nanoseconds(h.sent_at_ns));
  const auto due = WallClock::time_point(std::chrono::nanoseconds(h.due_at_ns));
  const bool same_clock = sent <= now && now - sent < std::chrono::seconds(1);
  return same_clock ? due : now + (due - sent);
}

}  // namespace

void Mailbox::Put(Frame frame) {
  const auto usable_at = UsableAt(frame.header, WallClock::now());
  std::condition_variable* wake = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const FrameHeader& h = frame.header;
    if (aborted_.count(h.job)) return;
    const Key key{h.job, h.dst_chip, h.src_chip, h.tag};
    frames_[key] = Entry{std::move(frame), usable_at};
    Waiters& w = waiters_[h.dst_chip];
    if (w.keys.count(key)) wake = &w.cv;
  }
  // Outside the lock, so the woken chip does not block on it at once.
  if (wake) wake->notify_all();
}

absl::StatusOr<Frame> Mailbox::Take(uint64_t job, int dst, int src, uint64_t tag, absl::Duration timeout) {
  const Key key{job, dst, src, tag};
  const auto deadline = WallClock::now() + absl::ToChronoNanoseconds(timeout);
  std::unique_lock<std::mutex> lock(mu_);
  Waiters& waiters = waiters_[dst];
  while (true) {
    auto aborted = aborted_.find(job);
    if (aborted != aborted_.end()) return aborted->second;
    auto it = frames_.find(key);
    if (it != frames_.end()) {
      Entry entry = std::move(it->second);
      frames_.erase(it);
      lock.unlock();
      std::this_thread::sleep_until(entry.usable_at);
      return std::move(entry.frame);
    }
    const auto waiting = waiters.keys.insert(key);
    const bool timed_out = waiters.cv.wait_until(lock, deadline) == std::cv_status::timeout;
    waiters.keys.erase(waiting);
    if (timed_out && !frames_.count(key) && !aborted_.count(job)) {
      return absl::DeadlineExceededError(absl::StrCat("chip ", dst, " waited ", absl::FormatDuration(timeout),
                                                      " for data from chip ", src, " (job ", job, ")"));
    }
  }
}

void Mailbox::AbortJob(uint64_t job, const absl::Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_.emplace(job, why);
    for (auto it = frames_.begin(); it != frames_.end();) {
      it = std::get<0>(it->first) == job ? frames_.erase(it) : std::next(it);
    }
    for (auto& [_, w] : waiters_) w.cv.notify_all();
  }
}

void Mailbox::ClearJob(uint64_t job) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = frames_.begin(); it != frames_.end();) {
    it = std::get<0>(it->first) == job ? frames_.erase(it) : std::next(it);
  }
}

size_t Mailbox::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return frames_.size();
}

}  // namespace tpuemu
