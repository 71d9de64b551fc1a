// One chip's share of a CollectivePlan: its sends and receives cut into wire
// chunks, in program order, with each send's dependency on earlier receives.
#pragma once

#include <cstdint>
#include <vector>

#include "core/collective/plan.h"

namespace tpuemu {

struct ChunkOp {
  int peer = 0;  // destination (send) or source (receive) chip
  Axis axis = Axis::kX;
  int dir = +1;
  uint64_t tag = 0;
  bool reduce = false;
  std::vector<Range> ranges;
  uint64_t elements = 0;
  // Sends only: index of the last receive this send waits for (-1: none):
  // the data it carries, or the end of its part's earlier stages.
  int after_recv = -1;
  // Sends only: the last receive of the part's earlier stages (-1: none).
  // The send's emulated ready time is at least that receive's completion.
  int barrier_recv = -1;
};

struct ChipProgram {
  std::vector<ChunkOp> sends;
  std::vector<ChunkOp> recvs;
};

// Tag of a chunk on a link: unique per (step, link, chunk) within a job.
uint64_t ChunkTag(int step, Axis axis, int dir, uint32_t chunk);

ChipProgram BuildChipProgram(const CollectivePlan& plan, int chip, uint64_t chunk_elements);

}  // namespace tpuemu
