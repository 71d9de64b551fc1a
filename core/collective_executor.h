// Runs one chip's part of a collective: moves real data over its links,
// advances the emulated clocks by what it actually sends, receives and
// reduces, and checks its result against the reference.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/collective_plan.h"
#include "core/host_network.h"

namespace tpuemu {

struct LinkUse {
  int src = 0;
  int dst = 0;
  Axis axis = Axis::kX;
  int dir = +1;
  uint64_t emu_bytes = 0;  // emulated bytes this collective put on the link
};

struct ChipRunResult {
  int chip = 0;
  double emulated_s = 0;  // when the chip's result was complete, emulated clock
  double wall_s = 0;      // wall time of the data movement (inputs and checks excluded)
  double host_lag_s = 0;  // paced runs: wall time beyond emulated_s * time_scale
  uint64_t mismatches = 0;
  std::vector<LinkUse> links;
};

struct RunOptions {
  uint64_t job = 0;
  absl::Duration recv_timeout = absl::Seconds(120);
};

// One chip's run in three phases, so that a host can keep its chips in step:
// nobody's allocation or checking competes with another chip's data movement.
class ChipCollective {
 public:
  ChipCollective(const CollectivePlan& plan, int chip, HostNetwork& net, const RunOptions& options);
  ~ChipCollective();
  // Builds the program, allocates and fills the buffers (not timed).
  void Prepare();
  // Moves the data over the links on both clocks (timed).
  absl::Status Move();
  // Times, link bytes and link errors of the move (mismatches left at 0).
  absl::StatusOr<ChipRunResult> Report();
  // Elements of the result that differ from the reference.
  uint64_t CountMismatches();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpuemu
