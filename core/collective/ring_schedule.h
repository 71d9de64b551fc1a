// Collective schedules on one axis of n chips (positions 0..n-1), as hops of
// blocks between neighbours, step by step (store and forward).
#pragma once

#include <vector>

#include "core/collective/spec.h"

namespace tpuemu {

// One block moving one hop at one step. For AllGather/ReduceScatter `block` is
// the shard's owner; for AllToAll the block goes from `block` to `dest`.
// `half` is 0 (whole) or 1/2 (the first/second half): on an even
// bidirectional ring the block for the opposite chip goes half each way.
struct Hop {
  int step = 1;  // 1-based
  int from = 0;
  int to = 0;
  int dir = +1;
  int block = 0;
  int dest = -1;
  int half = 0;
};

// The algorithm an axis really runs: auto becomes bi-ring on a wraparound
// axis and line otherwise; asking for a ring on a line is an error.
absl::StatusOr<RingAlgorithm> ResolveAlgorithm(RingAlgorithm requested, bool wraps, const std::string& axis_name,
                                               const std::string& topology);

// Shard `o` travels h(o, dir) hops in direction dir (0 if none); a one-way
// ring travels `way` (+1 or -1).
int GatherHops(int n, RingAlgorithm alg, int origin, int dir, int way = +1);

// `way`: the direction a one-way ring (kUniRing) travels; the other
// algorithms ignore it. By default an AllGather and an AllToAll go + and a
// ReduceScatter - (the AllGather's transpose), so a one-way AllReduce uses
// both directions unless told one way.
std::vector<Hop> AllGatherHops(int n, RingAlgorithm alg, int way = +1);
// The time-reversed transpose of an AllGather going the other way: partial
// sums flow toward each block's owner and every receiver adds what it gets.
std::vector<Hop> ReduceScatterHops(int n, RingAlgorithm alg, int way = -1);
std::vector<Hop> AllToAllHops(int n, RingAlgorithm alg, int way = +1);
int NumSteps(const std::vector<Hop>& hops);

}  // namespace tpuemu
