#include "core/job/inprocess_pod.h"

#include "core/job/kinds.h"

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

absl::StatusOr<JobRun> InProcessPod::Run(const JobSpec& spec, const StepCallback& on_step) {
  auto planned = PlanJob(spec, topo_, net_->time_scale());
  if (!planned.ok()) return planned.status();
  if ((*planned)->part() != PodPart{}) {
    return absl::InvalidArgumentError("this in-process pod runs jobs on all of it; make it as large as the job");
  }
  return RunPlannedJob(**planned, *net_, next_job_++, on_step);
}

absl::StatusOr<JobRun> RunPlannedJob(const PlannedJob& planned, HostNetwork& net, uint64_t job,
                                     const StepCallback& on_step) {
  RunOptions options;
  options.job = job;
  auto host = planned.MakeHostJob(net, options);
  if (!host.ok()) return host.status();
  if (auto s = (*host)->Prepare(); !s.ok()) return s;
  JobRun out;
  std::vector<ChipRunResult> chips;
  for (int step = planned.first_step(); step < planned.steps(); ++step) {
    auto ran = (*host)->Run(step);
    if (!ran.ok()) return ran.status();
    JobReport report = planned.SummarizeStep(*ran);
    if (on_step) on_step(step, report, *ran);
    if (report.has_value()) out.steps.push_back(std::move(report));
    chips = *std::move(ran);
  }
  out.report = planned.Summarize(chips, (*host)->Check());
  return out;
}

}  // namespace tpuemu
