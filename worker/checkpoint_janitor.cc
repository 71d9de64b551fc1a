#include "worker/checkpoint_janitor.h"

#include <algorithm>
#include <utility>

#include "core/train/checkpoint.h"
#include "spdlog/spdlog.h"

namespace tpuemu {

CheckpointJanitor::CheckpointJanitor(std::unique_ptr<Registrar> coordinator, std::string dir, absl::Duration grace)
    : coordinator_(std::move(coordinator)), dir_(std::move(dir)), grace_(grace) {}

CheckpointJanitor::~CheckpointJanitor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CheckpointJanitor::Start(absl::Duration every) {
  thread_ = std::thread([this, every] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!wake_.wait_for(lock, absl::ToChronoMilliseconds(every), [this] { return stop_; })) {
      lock.unlock();
      // A coordinator that does not answer now is asked again next time.
      SweepOnce(absl::Now()).IgnoreError();
      lock.lock();
    }
  });
}

absl::StatusOr<std::vector<uint64_t>> CheckpointJanitor::SweepOnce(absl::Time now) {
  const std::vector<uint64_t> kept = CheckpointedJobs(dir_);
  if (kept.empty()) {
    forgotten_since_.clear();
    return kept;
  }
  auto forgotten = coordinator_->ForgottenJobs(kept);
  if (!forgotten.ok()) return forgotten.status();
  std::map<uint64_t, absl::Time> since;  // forgotten now, and since when without a break
  for (uint64_t job : *forgotten) {
    if (!std::binary_search(kept.begin(), kept.end(), job)) continue;  // only what it asked about
    auto before = forgotten_since_.find(job);
    since[job] = before == forgotten_since_.end() ? now : before->second;
  }
  forgotten_since_ = since;
  std::vector<uint64_t> deleted;
  for (const auto& [job, from] : since) {
    if (now - from < grace_) continue;
    RemoveCheckpoints(dir_, job);
    forgotten_since_.erase(job);
    deleted.push_back(job);
    spdlog::info("deleted the checkpoints of job-{} under {}: the coordinator keeps no record that could resume it",
                 job, dir_);
  }
  return deleted;
}

}  // namespace tpuemu
