// A whole pod in one process: every chip a thread, every link through memory
// (still paced and clocked like any other link). The reference transport of
// the core tests and the "all memory" case of the data-path benchmark. It
// runs every kind of job through the same interface and summaries as the
// coordinator does.
#pragma once

#include <any>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/host/job_kind.h"
#include "core/wire/host_network.h"

namespace tpuemu {

// What a job did: its kind's summary and, for kinds that report steps
// (training), every step's.
struct JobRun {
  JobReport report;
  std::vector<JobReport> steps;
};

// Called after each step of a run, with the step's number, its report (empty
// for a kind without step reports) and every chip's result.
using StepCallback =
    std::function<void(int step, const JobReport& report, const std::vector<ChipRunResult>& chips)>;

// Prepares `planned` on the chips of `net` as job `job`, runs its steps,
// calling `on_step` after each, and checks it.
absl::StatusOr<JobRun> RunPlannedJob(const PlannedJob& planned, HostNetwork& net, uint64_t job,
                                     const StepCallback& on_step);

class InProcessPod : public Fabric {
 public:
  InProcessPod(const Topology& topo, double time_scale);
  absl::Status Deliver(Frame&& frame) override;
  // Plans the job with its kind, prepares it on every chip, runs its steps and
  // checks it, calling `on_step` (if any) after each step.
  absl::StatusOr<JobRun> Run(const JobSpec& spec, const StepCallback& on_step = nullptr);
  HostNetwork& network() { return *net_; }

 private:
  Topology topo_;
  std::unique_ptr<HostNetwork> net_;
  uint64_t next_job_ = 1;
};

// Runs a job whose kind's summary type the caller knows (CollectiveReport,
// MatmulReport, TrainReport).
template <class Report>
absl::StatusOr<Report> RunReport(InProcessPod& pod, const JobSpec& spec) {
  auto run = pod.Run(spec);
  if (!run.ok()) return run.status();
  return std::any_cast<Report>(run->report);
}

}  // namespace tpuemu
