#include "core/inprocess_pod.h"

#include <barrier>
#include <thread>

namespace tpuemu {

InProcessPod::InProcessPod(const Topology& topo, double time_scale) : topo_(topo) {
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
  auto chips = RunHostCollective(*plan, *net_, options);
  if (!chips.ok()) return chips.status();
  return Summarize(*plan, topo_, *chips);
}

absl::StatusOr<std::vector<ChipRunResult>> RunHostCollective(const CollectivePlan& plan, HostNetwork& net,
                                                             const RunOptions& options) {
  const auto& chips = net.local_chips();
  const size_t n = chips.size();
  std::vector<std::unique_ptr<ChipCollective>> runs;
  for (int chip : chips) runs.push_back(std::make_unique<ChipCollective>(plan, chip, net, options));
  std::vector<absl::StatusOr<ChipRunResult>> results(n, absl::UnknownError("not run"));
  // The host's chips prepare, move and check in lockstep, so no chip's set-up
  // or checking steals the cores another chip is moving data with.
  std::barrier<> sync(static_cast<std::ptrdiff_t>(n));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      runs[i]->Prepare();
      sync.arrive_and_wait();
      absl::Status moved = runs[i]->Move();
      // One chip failing dooms the job: wake the others instead of letting
      // them wait for data that will never come.
      if (!moved.ok()) net.mailbox().AbortJob(options.job, moved);
      sync.arrive_and_wait();
      results[i] = moved.ok() ? runs[i]->Finish() : absl::StatusOr<ChipRunResult>(moved);
    });
  }
  for (auto& t : threads) t.join();
  net.ForgetJob(options.job);
  std::vector<ChipRunResult> out;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    out.push_back(*std::move(r));
  }
  return out;
}

}  // namespace tpuemu
