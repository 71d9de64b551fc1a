#include "core/wire/link_sender.h"

#include <algorithm>

namespace tpuemu {

void LinkSender::State::Left(uint64_t job, absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu);
    --leaving;
    JobFrames& j = jobs[job];
    --j.leaving;
    if (!status.ok() && !j.forgotten && j.error.ok()) j.error = std::move(status);
    if (j.leaving == 0 && (j.forgotten || j.error.ok())) jobs.erase(job);  // nothing left to tell
  }
  cv.notify_all();
}

LinkSender::LinkSender(LinkParams params, double time_scale, Fabric& fabric, size_t max_queued)
    : pacer_(params, time_scale), fabric_(fabric), max_queued_(max_queued) {
  if (pacer_.paced()) thread_ = std::thread([this] { Run(); });
}

LinkSender::~LinkSender() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    stop_ = true;
  }
  state_->cv.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool LinkSender::Enqueue(Frame frame, std::shared_ptr<const JobAbort> abort) {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mu);
  auto room = [&] { return s.leaving < max_queued_ || stop_; };
  if (abort == nullptr) {
    s.cv.wait(lock, room);
  } else {
    // The abort does not notify this link: look at it now and then while full.
    while (!s.cv.wait_for(lock, std::chrono::milliseconds(50), room)) {
      if (abort->aborted()) return false;
    }
  }
  Admit(std::move(lock), std::move(frame), std::move(abort));
  return true;
}

bool LinkSender::TryEnqueue(Frame& frame, std::shared_ptr<const JobAbort> abort) {
  std::unique_lock<std::mutex> lock(state_->mu);
  if (state_->leaving >= max_queued_ && !stop_) return false;
  Admit(std::move(lock), std::move(frame), std::move(abort));
  return true;
}

void LinkSender::Admit(std::unique_lock<std::mutex> lock, Frame&& frame, std::shared_ptr<const JobAbort> abort) {
  State& s = *state_;
  ++s.leaving;
  State::JobFrames& j = s.jobs[frame.header.job];
  ++j.leaving;
  j.forgotten = false;  // the job runs again (a retry under the same number)
  if (thread_.joinable()) {  // paced: the link's thread sends it when its turn comes
    queue_.push_back({std::move(frame), WallClock::now(), std::move(abort)});
    lock.unlock();
    s.cv.notify_all();
    return;
  }
  lock.unlock();
  HandOver(std::move(frame));
}

void LinkSender::HandOver(Frame&& frame) {
  const uint64_t job = frame.header.job;
  fabric_.Send(std::move(frame), [state = state_, job](absl::Status status) { state->Left(job, std::move(status)); });
}

absl::Status LinkSender::JobStatus(uint64_t job) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->jobs.find(job);
  return it == state_->jobs.end() ? absl::OkStatus() : it->second.error;
}

void LinkSender::ForgetJob(uint64_t job) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->jobs.find(job);
  if (it == state_->jobs.end()) return;
  if (it->second.leaving == 0) {
    state_->jobs.erase(it);
  } else {
    it->second.error = absl::OkStatus();
    it->second.forgotten = true;
  }
}

void LinkSender::Run() {
  State& s = *state_;
  while (true) {
    std::unique_lock<std::mutex> lock(s.mu);
    s.cv.wait(lock, [&] { return !queue_.empty() || stop_; });
    if (queue_.empty()) return;
    Frame frame = std::move(queue_.front().frame);
    const WallClock::time_point ready = queue_.front().ready;
    const std::shared_ptr<const JobAbort> abort = std::move(queue_.front().abort);
    queue_.pop_front();
    lock.unlock();
    if (abort != nullptr && abort->aborted()) {  // its job ended: nobody waits for it
      s.Left(frame.header.job, abort->status());
      continue;
    }

    // Like netem: the frame is handed over at once with the time it is due
    // (end of transmission + hop latency), the receiver holds it until then,
    // and this link takes its next frame only when the transmission is over.
    // Transit through the host overlaps the emulated transmission. Handed
    // over without waiting for the wire: a stopped peer holds only frames,
    // never this thread, so the link can always be closed.
    const WallClock::time_point tx_end =
        pacer_.Book(static_cast<double>(frame.header.emu_bytes) / frame.pace_bandwidth, ready);
    auto ns = [](WallClock::time_point t) {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    };
    frame.header.sent_at_ns = ns(WallClock::now());
    frame.header.due_at_ns = ns(tx_end + pacer_.latency() + pacer_.Stretched(frame.pace_extra_latency_s));
    HandOver(std::move(frame));
    // Until the transmission is over, or its job is aborted: then the link
    // is free at once (the receiver drops the aborted job's frame).
    if (abort == nullptr) {
      std::this_thread::sleep_until(tx_end);
      continue;
    }
    constexpr auto kAbortCheck = std::chrono::milliseconds(20);
    for (auto now = WallClock::now(); now < tx_end; now = WallClock::now()) {
      if (abort->aborted()) {
        pacer_.Release(now);
        break;
      }
      std::this_thread::sleep_until(std::min(tx_end, now + kAbortCheck));
    }
  }
}

}  // namespace tpuemu
