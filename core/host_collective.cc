#include "core/host_collective.h"

#include <functional>
#include <thread>

namespace tpuemu {

HostCollective::HostCollective(CollectivePlan plan, HostNetwork& net, const RunOptions& options)
    : plan_(std::move(plan)), net_(net), options_(options) {}

namespace {

void OnThreads(size_t n, const std::function<void(size_t)>& fn) {
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) threads.emplace_back(fn, i);
  for (auto& t : threads) t.join();
}

}  // namespace

void HostCollective::Prepare() {
  for (int chip : net_.local_chips()) chips_.push_back(std::make_unique<ChipCollective>(plan_, chip, net_, options_));
  OnThreads(chips_.size(), [&](size_t i) { chips_[i]->Prepare(); });
  prepared_ = true;
}

absl::StatusOr<std::vector<ChipRunResult>> HostCollective::Run() {
  if (!prepared_) Prepare();
  const size_t n = chips_.size();
  std::vector<absl::Status> moved(n);
  OnThreads(n, [&](size_t i) {
    moved[i] = chips_[i]->Move();
    // One chip failing dooms the job: wake the others instead of letting
    // them wait for data that will never come.
    if (!moved[i].ok()) net_.mailbox().AbortJob(options_.job, moved[i]);
  });
  std::vector<absl::StatusOr<ChipRunResult>> results;
  for (size_t i = 0; i < n; ++i) {
    results.push_back(moved[i].ok() ? chips_[i]->Report() : absl::StatusOr<ChipRunResult>(moved[i]));
  }
  net_.ForgetJob(options_.job);
  std::vector<ChipRunResult> out;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    out.push_back(*std::move(r));
  }
  return out;
}

std::vector<uint64_t> HostCollective::Check() {
  std::vector<uint64_t> mismatches(chips_.size());
  OnThreads(chips_.size(), [&](size_t i) { mismatches[i] = chips_[i]->CountMismatches(); });
  return mismatches;
}

}  // namespace tpuemu
