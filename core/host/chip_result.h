// What one chip's share of a job reports back from a run: its times on both
// clocks, its traffic on each link and, for training, its step's figures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/host/step_axes.h"
#include "core/pod/topology.h"

namespace tpuemu {

// One span on the emulated clock, for traces: a chip's compute op,
// collective or wait, or a transfer on a directed link.
struct TraceEvent {
  std::string track;  // "chip 3" or "link 3->4 x+"
  std::string name;
  double start_s = 0;
  double end_s = 0;
  uint64_t bytes = 0;  // transfers
};

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
  double compute_s = 0;   // emulated time of local compute ops (matmul and training jobs)
  uint64_t flops = 0;     // local compute ops (matmul jobs)
  uint64_t mismatches = 0;
  // Training jobs: the step, the chip's sum of squared errors, and its
  // exposed communication and sent bytes by mesh axis (data, fsdp, tensor,
  // pipeline).
  int step = 0;
  double loss_sum = 0;
  double mesh_comm_s[kMeshAxes] = {};  // exposed: the chip waited
  double mesh_busy_s[kMeshAxes] = {};  // the axis' transfers ran, hidden or not
  double compute_parts_s[kComputeParts] = {};  // forward matmuls, backward matmuls, the rest
  uint64_t mesh_bytes[kMeshAxes] = {};
  // Pipelined training: when the chip finished its microbatches, how long
  // of that it was not waiting for a neighbouring stage, and the most
  // activation bytes it held for backward passes at once.
  double pipeline_end_s = 0;
  double pipeline_busy_s = 0;
  uint64_t peak_activation_bytes = 0;
  std::vector<TraceEvent> trace;  // training jobs: the step's spans on the emulated clock
  std::vector<LinkUse> links;
};

}  // namespace tpuemu
