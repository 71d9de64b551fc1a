// A whole pod run by one chip, for shape-only training jobs whose chips are
// all alike: on a torus whose every axis wraps, with no pipeline stages and
// no faults, moving every chip by the same step along any axis maps the job
// onto itself (each logical axis holds whole physical axes, so every ring
// maps onto a ring), and every chip's program and clocks are the same as
// any other's. One chip then runs its program as it is, and what its
// neighbour along a link would have sent it is what it sent along that link
// itself: a frame it sends to the chip one step along (axis, dir) arrives
// as the frame from the chip one step against it. Its figures are every
// chip's, with one chip's work instead of all of theirs
// (docs/simulate.md). Tests hold it equal to the every-chip run.
#pragma once

#include <map>
#include <memory>

#include "absl/status/statusor.h"
#include "core/job/inprocess_pod.h"
#include "core/train/job.h"

namespace tpuemu {

// Why `spec` cannot run with one chip standing for all (OK if it can).
absl::Status CheckOneChipStandsForAll(const TrainSpec& spec, const Topology& topo);

class SymmetricPod : public Fabric {
 public:
  explicit SymmetricPod(const Topology& topo);
  absl::Status Deliver(Frame&& frame) override;
  // Runs a job that CheckOneChipStandsForAll allows, as InProcessPod::Run
  // does: the steps' and the job's reports are the whole pod's; the chips'
  // results passed to `on_step` are the stand-in's alone.
  absl::StatusOr<JobRun> Run(const TrainSpec& spec, const StepCallback& on_step = nullptr);

 private:
  Topology topo_;
  std::map<int, int> mirror_;  // the chip a neighbour's frames seem to come from, by neighbour
  std::unique_ptr<HostNetwork> net_;
};

}  // namespace tpuemu
