#include "core/wire/mailbox.h"

#include "absl/strings/str_cat.h"
#include "core/wire/run_number.h"
#include "spdlog/spdlog.h"

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

void Mailbox::OpenJob(uint64_t job, uint64_t max_buffered_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  open_.try_emplace(job, Job{max_buffered_bytes, 0});
}

void Mailbox::CloseJob(uint64_t job) {
  std::vector<MailboxHook*> to_wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (open_.erase(job) == 0) return;
    DropFramesLocked(job);
    TakeHooksLocked(job, to_wake);
    if (forget_on_close_.erase(job) > 0) {
      aborted_.erase(job);
    } else if (aborted_.count(job)) {
      closed_aborts_.push_back(job);
      if (closed_aborts_.size() > kRememberedAborts) {
        aborted_.erase(closed_aborts_.front());
        closed_aborts_.pop_front();
      }
    }
  }
  for (MailboxHook* h : to_wake) h->Wake();
}

void Mailbox::ForgetAborts() {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t job : closed_aborts_) {
    if (open_.count(job) == 0) aborted_.erase(job);
  }
  closed_aborts_.clear();
  for (const auto& [job, _] : aborted_) forget_on_close_.insert(job);
}

void Mailbox::Put(Frame frame, bool may_run) {
  const auto now = WallClock::now();
  const auto usable_at = UsableAt(frame.header, now);
  const uint64_t bytes = frame.elements() * sizeof(float);
  std::condition_variable* wake = nullptr;
  MailboxHook* hook = nullptr;
  bool run = false;
  std::vector<MailboxHook*> aborted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const FrameHeader& h = frame.header;
    auto job = open_.find(h.job);
    if (job == open_.end()) {
      // Late frames of a closed job, or anybody's frames for a job this host
      // never had: held, they would stay forever.
      ++dropped_frames_;
      if ((dropped_frames_ & (dropped_frames_ - 1)) == 0) {
        spdlog::warn("mailbox: dropped {} frame(s) of jobs this worker does not run (the last: {}, chip {} -> {})",
                     dropped_frames_, RunName(h.job), h.src_chip, h.dst_chip);
      }
      return;
    }
    if (aborted_.count(h.job)) return;
    const Key key{h.job, h.dst_chip, h.src_chip, h.tag};
    // A hook is taken out of hooks_ only once nothing can throw before it is
    // called: a hook lost on the way would leave its chip waiting for good.
    auto hooked = hooks_.find(key);
    run = hooked != hooks_.end() && may_run && usable_at <= now;
    if (!run) {
      if (job->second.buffered_bytes + bytes > job->second.max_buffered_bytes) {
        AbortLocked(h.job,
                    absl::ResourceExhaustedError(absl::StrCat(
                        RunName(h.job), ": a frame of ", bytes, " bytes from chip ", h.src_chip, " to chip ",
                        h.dst_chip,
                        " would make this worker hold ", job->second.buffered_bytes + bytes,
                        " bytes of the job's data, more than its plan allows here (", job->second.max_buffered_bytes,
                        ")")),
                    aborted);  // wakes the hook with the job's others
        hooked = hooks_.end();
      } else {
        Waiters& w = waiters_[std::get<1>(key)];
        auto [slot, fresh] = frames_.try_emplace(key);
        if (!fresh) job->second.buffered_bytes -= slot->second.bytes;  // a resent frame replaces the first
        slot->second = Entry{std::move(frame), usable_at, bytes};
        job->second.buffered_bytes += bytes;
        if (w.keys.count(key)) wake = &w.cv;
      }
    }
    if (hooked != hooks_.end()) {
      hook = hooked->second;
      hooks_.erase(hooked);
    }
  }
  // Outside the lock, so the woken chip does not block on it at once.
  if (wake) wake->notify_all();
  for (MailboxHook* h : aborted) h->Wake();
  if (hook == nullptr) return;
  if (run) {
    hook->Arrived(std::move(frame));
  } else {
    hook->Wake();
  }
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
    if (it != frames_.end() && it->second.usable_at <= WallClock::now()) return std::move(TakeEntryLocked(it).frame);
    // A paced frame not yet usable is waited for like one not yet here, so
    // that an abort wakes the chip: a sleep held a cancelled job's chips, and
    // the next job behind it, until the frame's due time (seconds, paced).
    if (it != frames_.end()) {
      const auto waiting = waiters.keys.insert(key);
      // A copy: an abort may free the entry during the wait, and the wait reads its deadline after.
      const WallClock::time_point usable_at = it->second.usable_at;
      waiters.cv.wait_until(lock, usable_at);
      waiters.keys.erase(waiting);
      continue;
    }
    const auto waiting = waiters.keys.insert(key);
    const bool timed_out = waiters.cv.wait_until(lock, deadline) == std::cv_status::timeout;
    waiters.keys.erase(waiting);
    if (timed_out && !frames_.count(key) && !aborted_.count(job)) {
      return absl::DeadlineExceededError(absl::StrCat("chip ", dst, " waited ", absl::FormatDuration(timeout),
                                                      " for data from chip ", src, " (", RunName(job), ")"));
    }
  }
}

absl::StatusOr<std::optional<Frame>> Mailbox::TakeOrHook(uint64_t job, int dst, int src, uint64_t tag,
                                                          MailboxHook* hook) {
  const Key key{job, dst, src, tag};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto aborted = aborted_.find(job); aborted != aborted_.end()) return aborted->second;
    auto it = frames_.find(key);
    if (it == frames_.end()) {
      hooks_[key] = hook;
      return std::nullopt;
    }
    if (it->second.usable_at <= WallClock::now()) return std::optional<Frame>(TakeEntryLocked(it).frame);
  }
  hook->Wake();  // paced: Take sleeps until it may be used
  return std::nullopt;
}

bool Mailbox::Unhook(uint64_t job, int dst, int src, uint64_t tag) {
  std::lock_guard<std::mutex> lock(mu_);
  return hooks_.erase(Key{job, dst, src, tag}) > 0;
}

bool Mailbox::AbortJob(uint64_t job, const absl::Status& why) {
  std::vector<MailboxHook*> to_wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_.count(job)) return false;
    AbortLocked(job, why, to_wake);
  }
  for (MailboxHook* h : to_wake) h->Wake();
  return true;
}

void Mailbox::AbortLocked(uint64_t job, const absl::Status& why, std::vector<MailboxHook*>& to_wake) {
  aborted_.emplace(job, why);
  DropFramesLocked(job);
  TakeHooksLocked(job, to_wake);
  for (auto& [_, w] : waiters_) w.cv.notify_all();
}

void Mailbox::TakeHooksLocked(uint64_t job, std::vector<MailboxHook*>& to_wake) {
  const auto first = hooks_.lower_bound(Key{job, INT32_MIN, INT32_MIN, 0});
  auto last = first;
  while (last != hooks_.end() && std::get<0>(last->first) == job) ++last;
  to_wake.reserve(to_wake.size() + std::distance(first, last));  // before any is taken out
  for (auto it = first; it != last; ++it) to_wake.push_back(it->second);
  hooks_.erase(first, last);
}

Mailbox::Entry Mailbox::TakeEntryLocked(std::map<Key, Entry>::iterator it) {
  const uint64_t job = std::get<0>(it->first);
  Entry entry = std::move(it->second);
  frames_.erase(it);
  if (auto open = open_.find(job); open != open_.end()) open->second.buffered_bytes -= entry.bytes;
  return entry;
}

void Mailbox::DropFramesLocked(uint64_t job) {
  for (auto it = frames_.lower_bound(Key{job, INT32_MIN, INT32_MIN, 0});
       it != frames_.end() && std::get<0>(it->first) == job;) {
    it = frames_.erase(it);
  }
  if (auto open = open_.find(job); open != open_.end()) open->second.buffered_bytes = 0;
}

void Mailbox::ClearJob(uint64_t job) {
  std::lock_guard<std::mutex> lock(mu_);
  DropFramesLocked(job);
}

size_t Mailbox::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return frames_.size();
}

uint64_t Mailbox::dropped_frames() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_frames_;
}

}  // namespace tpuemu
