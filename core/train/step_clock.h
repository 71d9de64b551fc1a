// A chip's emulated clock through one training step, and the step's figures
// read off it (ChipRunResult's training fields). The clock moves only two
// ways: compute ops take their roofline time, and the chip waits for
// communication, which counts as exposed communication on a mesh axis.
// Transfers the chip does not wait for still count toward their axis' busy
// time and bytes, and every op, wait and transfer is a span of the trace.
// Paced runs (time_scale > 0) also stretch compute on the wall clock, so
// that a wall-clock run is the emulated one slowed down.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/collective/executor.h"
#include "core/host/chip_result.h"
#include "core/pod/faults.h"
#include "core/pod/link_clock.h"
#include "core/train/mesh.h"
#include "core/wire/host_network.h"
#include "core/wire/job_abort.h"

namespace tpuemu {

// The report's compute parts (compute_parts_s), in its order.
enum class ComputeKind { kForwardMatmul = 0, kBackwardMatmul = 1, kOther = 2 };

class StepClock {
 public:
  // `faults`: the job's (null: none); a straggler's compute takes longer on
  // both clocks.
  StepClock(int chip, HostNetwork& net, const JobAbort& abort, int dtype_bytes, const Faults* faults = nullptr);

  // At 0 on the emulated clock, with a fresh result for `step`.
  void Start(int step);
  double now() const { return now_; }
  int step() const { return result_.step; }
  // Where the step's spans go; collectives and permutes record their link
  // transfers here too.
  std::vector<TraceEvent>* trace() { return &result_.trace; }

  // A compute op, at its roofline time.
  void Compute(ComputeKind kind, double flops, double hbm_bytes);
  // Transfers on `axis` that ran from `start` to `end` and sent `bytes`,
  // whether or not the chip waits for them.
  void Transferred(MeshAxisKind axis, double start, double end, uint64_t bytes);
  // A collective the chip ran and did not carry on past: it waited until
  // `end` (its own span shows the wait).
  void Blocked(MeshAxisKind axis, double end);
  // Waits until `until` for something on `axis` issued earlier (no-op if
  // it is already in), shown as a span "wait: <what>".
  void Wait(MeshAxisKind axis, double until, const std::string& what);
  void Span(const std::string& name, double start, double end, uint64_t bytes = 0);

  // Activations held for backward passes (negative: released); the step
  // reports the most held at once.
  void HoldActivations(int64_t elements);
  // The stage's microbatches are through: when, and how much of that the
  // chip was not waiting for neighbouring stages.
  void PipelineDone();
  // The step's result: times, busy time by axis, and the bytes each of the
  // chip's links sent.
  ChipRunResult Finish(const LinkClocks& links);

 private:
  std::string Track() const;

  const int chip_;
  HostNetwork& net_;
  const JobAbort& abort_;
  const int dtype_bytes_;
  const Faults* faults_;
  WallClock::time_point wall_start_;
  double now_ = 0;
  int64_t activation_elements_ = 0;
  std::vector<std::pair<double, double>> busy_[kMeshAxes];  // transfer intervals, by mesh axis
  ChipRunResult result_;
};

}  // namespace tpuemu
