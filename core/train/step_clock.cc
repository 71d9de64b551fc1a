#include "core/train/step_clock.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "core/pod/link_clock.h"

namespace tpuemu {

StepClock::StepClock(int chip, HostNetwork& net, const JobAbort& abort, int dtype_bytes, const Faults* faults)
    : chip_(chip), net_(net), abort_(abort), dtype_bytes_(dtype_bytes), faults_(faults) {}

void StepClock::Start(int step) {
  wall_start_ = WallClock::now();
  result_ = ChipRunResult{};
  result_.chip = chip_;
  result_.step = step;
  for (auto& b : busy_) b.clear();
  now_ = 0;
  activation_elements_ = 0;
}

std::string StepClock::Track() const { return absl::StrCat("chip ", chip_); }

void StepClock::Compute(ComputeKind kind, double flops, double hbm_bytes) {
  static const char* kNames[] = {"forward matmul", "backward matmul", "elementwise"};
  const double slower = faults_ != nullptr ? faults_->ComputeFactor(chip_, result_.step) : 1;
  const double dt = RooflineSeconds(net_.topology().profile(), flops, hbm_bytes) * slower;
  result_.trace.push_back({Track(),
                           slower > 1 ? absl::StrCat(kNames[static_cast<int>(kind)], " (straggler ", slower, "x)")
                                      : std::string(kNames[static_cast<int>(kind)]),
                           now_, now_ + dt, 0});
  // Paced: the op ends on the wall clock no sooner than its emulated end,
  // stretched, from the step's start. Not "dt stretched from when the chip
  // got here": a collective issued ahead runs on this thread before the op
  // and overlaps it on the emulated clock, so it must on the wall clock too
  // (measured: a 41 us FSDP step took 15 us x S more than emulated x S).
  now_ += dt;
  const double scale = net_.time_scale();
  if (scale > 0) {
    abort_.SleepUntil(wall_start_ + WallSeconds(now_ * scale));
  }
  result_.compute_s += dt;
  result_.compute_parts_s[static_cast<int>(kind)] += dt;
}

void StepClock::Transferred(MeshAxisKind axis, double start, double end, uint64_t bytes) {
  const int k = static_cast<int>(axis);
  result_.mesh_bytes[k] += bytes;
  busy_[k].push_back({start, end});
}

void StepClock::Blocked(MeshAxisKind axis, double end) {
  result_.mesh_comm_s[static_cast<int>(axis)] += end - now_;
  now_ = end;
}

void StepClock::Wait(MeshAxisKind axis, double until, const std::string& what) {
  if (until <= now_) return;
  result_.mesh_comm_s[static_cast<int>(axis)] += until - now_;
  result_.trace.push_back({Track(), absl::StrCat("wait: ", what), now_, until, 0});
  now_ = until;
}

void StepClock::Span(const std::string& name, double start, double end, uint64_t bytes) {
  result_.trace.push_back({Track(), name, start, end, bytes});
}

void StepClock::HoldActivations(int64_t elements) {
  activation_elements_ += elements;
  result_.peak_activation_bytes = std::max<uint64_t>(
      result_.peak_activation_bytes, static_cast<uint64_t>(activation_elements_) * dtype_bytes_);
}

void StepClock::PipelineDone() {
  // The chip waits on the pipeline axis only for its neighbouring stages'
  // activations and gradients (no collective runs over it), so that axis'
  // exposed communication is the whole of the pipeline's waiting.
  result_.pipeline_end_s = now_;
  result_.pipeline_busy_s = now_ - result_.mesh_comm_s[static_cast<int>(MeshAxisKind::kPipeline)];
}

ChipRunResult StepClock::Finish(const LinkClocks& links) {
  result_.emulated_s = now_;
  for (int k = 0; k < kMeshAxes; ++k) {
    // The union of the axis' transfer intervals: its links' busy time,
    // however much of it the chip's compute hid.
    std::sort(busy_[k].begin(), busy_[k].end());
    double end = 0;
    for (const auto& [from, to] : busy_[k]) {
      result_.mesh_busy_s[k] += std::max(0.0, to - std::max(from, end));
      end = std::max(end, to);
    }
  }
  for (const auto& [key, link] : links) {
    const Axis axis = static_cast<Axis>(key.first);
    result_.links.push_back({chip_, *net_.topology().Neighbor(chip_, axis, key.second), axis, key.second,
                             static_cast<uint64_t>(link.bytes_sent())});
  }
  result_.wall_s = std::chrono::duration<double>(WallClock::now() - wall_start_).count();
  const double time_scale = net_.time_scale();
  if (time_scale > 0) result_.host_lag_s = std::max(0.0, result_.wall_s - now_ * time_scale);
  // Each track's spans by start, an enclosing span before the spans it holds
  // (it is recorded when it ends): the order trace viewers nest them in.
  // After the wall clock: sorting is no chip's work.
  std::stable_sort(result_.trace.begin(), result_.trace.end(), [](const TraceEvent& a, const TraceEvent& b) {
    if (a.track != b.track) return a.track < b.track;
    if (a.start_s != b.start_s) return a.start_s < b.start_s;
    return a.end_s > b.end_s;
  });
  return result_;
}

}  // namespace tpuemu
