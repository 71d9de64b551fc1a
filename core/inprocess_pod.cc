#include "core/inprocess_pod.h"

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
  std::vector<absl::StatusOr<ChipRunResult>> results(chips.size(), absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < chips.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = RunChipCollective(plan, chips[i], net, options);
      // One chip failing dooms the job: wake the others instead of letting
      // them wait for data that will never come.
      if (!results[i].ok()) net.mailbox().AbortJob(options.job, results[i].status());
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
