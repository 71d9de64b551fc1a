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

absl::StatusOr<ChipRunResult> RunChipCollective(const CollectivePlan& plan, int chip, HostNetwork& net,
                                                const RunOptions& options);

}  // namespace tpuemu
