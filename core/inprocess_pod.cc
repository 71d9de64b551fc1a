#include "core/inprocess_pod.h"

#include <functional>
#include <thread>

namespace tpuemu {

InProcessPod::InProcessPod(const Topology& topo, double time_scale) : topo_(topo) {
  KeepChunkBuffersInHeap();
  std::vector<int> chips(topo.num_chips());
  for (int i = 0; i < topo.num_chips(); ++i) chips[i] = i;
  net_ = std::make_unique<HostNetwork>(topo, chips, time_scale, this);
}

absl::Status InProcessPod::Deliver(Frame&& frame) {
  net_->mailbox().Put(std::move(frame));
  return absl::OkStatus();
}

absl::StatusOr<CollectiveReport> InProcessPod::Run(const CollectiveSpec& spec) {
  auto plan = CollectivePlan::Create(topo_, spec);
  if (!plan.ok()) return plan.status();
  RunOptions options;
  options.job = next_job_++;
  HostCollective host(*plan, *net_, options);
  host.Prepare();
  auto chips = host.Run();
  if (!chips.ok()) return chips.status();
  const std::vector<uint64_t> mismatches = host.Check();
  for (size_t i = 0; i < chips->size(); ++i) (*chips)[i].mismatches = mismatches[i];
  return Summarize(*plan, topo_, *chips);
}

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
