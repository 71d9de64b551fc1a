// A start line for a collective job's chips. Each worker starts its chips
// when the coordinator's call reaches it, and on a busy host those calls land
// milliseconds apart: timed from there, an early chip's wall time would
// include waiting for the last one to start (half the wall time of a 1 MiB
// all-gather over eight workers on 2 cores). MPI benchmarks time after
// MPI_Barrier for the same reason; a collective job times after this.
//
// In each of its rounds a chip sends an empty frame to every chip it sends to
// in its program, and waits for one from every chip it receives from; after
// as many rounds as the longest path, each chip has heard, hop by hop, from
// every chip that sends to it directly or not. The frames book nothing on the
// emulated clock and carry no bytes. ChipCollective::Move runs the rounds as
// the start of the chip's program, in whichever thread carries it on
// (core/collective/executor.cc), so a chip leaves the line as the last frame
// comes, not when its thread next gets a core.
#pragma once

#include <cstdint>

#include "core/collective/plan.h"

namespace tpuemu {

// Tag bit of the barrier's frames: chunk tags (ChunkTag) stay below it.
inline constexpr uint64_t kStartBarrierTagBit = uint64_t{1} << 61;

// Rounds the barrier needs: the most hops between two chips of a group along
// the plan's links, each the shortest way (0 for a group of one chip).
int StartBarrierRounds(const CollectivePlan& plan);

}  // namespace tpuemu
