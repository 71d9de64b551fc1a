#include "core/wire/link_sender.h"

namespace tpuemu {

LinkSender::LinkSender(LinkParams params, double time_scale, DeliverFn deliver, size_t max_queued,
                       bool inline_delivery)
    : pacer_(params, time_scale), deliver_(std::move(deliver)), max_queued_(max_queued),
      inline_(inline_delivery && !pacer_.paced()) {
  if (!inline_) thread_ = std::thread([this] { Run(); });
}

LinkSender::~LinkSender() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool LinkSender::Enqueue(Frame frame, const JobAbort* abort) {
  if (inline_) {
    const uint64_t job = frame.header.job;
    if (absl::Status status = deliver_(std::move(frame)); !status.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      job_errors_.emplace(job, status);
    }
    return true;
  }
  std::unique_lock<std::mutex> lock(mu_);
  auto room = [&] { return queue_.size() < max_queued_ || stop_; };
  if (abort == nullptr) {
    cv_.wait(lock, room);
  } else {
    // The abort does not notify this link: look at it now and then while full.
    while (!cv_.wait_for(lock, std::chrono::milliseconds(50), room)) {
      if (abort->aborted()) return false;
    }
  }
  queue_.push_back({std::move(frame), WallClock::now()});
  lock.unlock();
  cv_.notify_all();
  return true;
}

absl::Status LinkSender::JobStatus(uint64_t job) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = job_errors_.find(job);
  return it == job_errors_.end() ? absl::OkStatus() : it->second;
}

void LinkSender::ForgetJob(uint64_t job) {
  std::lock_guard<std::mutex> lock(mu_);
  job_errors_.erase(job);
}

void LinkSender::Run() {
  while (true) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !queue_.empty() || stop_; });
    if (queue_.empty()) return;
    Frame frame = std::move(queue_.front().frame);
    const WallClock::time_point ready = queue_.front().ready;
    queue_.pop_front();
    lock.unlock();
    cv_.notify_all();

    // Like netem: the frame is handed over at once with the time it is due
    // (end of transmission + hop latency), the receiver holds it until then,
    // and this link takes its next frame only when the transmission is over.
    // Transit through the host overlaps the emulated transmission.
    WallClock::time_point tx_end{};
    if (pacer_.paced()) {
      tx_end = pacer_.Book(static_cast<double>(frame.header.emu_bytes) / frame.pace_bandwidth, ready);
      auto ns = [](WallClock::time_point t) {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
      };
      frame.header.sent_at_ns = ns(WallClock::now());
      frame.header.due_at_ns = ns(tx_end + pacer_.latency() + pacer_.Stretched(frame.pace_extra_latency_s));
    }
    const uint64_t job = frame.header.job;
    absl::Status status = deliver_(std::move(frame));
    if (pacer_.paced()) std::this_thread::sleep_until(tx_end);
    if (!status.ok()) {
      std::lock_guard<std::mutex> relock(mu_);
      job_errors_.emplace(job, status);
    }
  }
}

}  // namespace tpuemu
