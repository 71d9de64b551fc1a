#include "core/job/inprocess_pod.h"

namespace tpuemu {

InProcessPod::InProcessPod(const Topology& topo, double time_scale) : topo_(topo) {
  PrepareProcessForDataPath();
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
  const std::vector<ChipCheck> checks = host.Check();
  for (size_t i = 0; i < chips->size(); ++i) (*chips)[i].mismatches = checks[i].mismatches;
  return Summarize(*plan, topo_, *chips);
}

absl::StatusOr<MatmulReport> InProcessPod::RunMatmul(const MatmulSpec& spec) {
  auto program = MatmulProgram::Create(spec, topo_);
  if (!program.ok()) return program.status();
  RunOptions options;
  options.job = next_job_++;
  HostMatmul host(*program, *net_, options);
  host.Prepare();
  auto chips = host.Run();
  if (!chips.ok()) return chips.status();
  return SummarizeMatmul((*program)->plan, *chips, host.Check(), topo_.num_chips());
}

}  // namespace tpuemu
