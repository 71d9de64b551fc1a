// The seeds' closed-form collective times (DESIGN §4): test oracles that the
// emulated clock is checked against, never used in its place.
#pragma once

#include "core/collective/plan.h"
#include "core/pod/topology.h"

namespace tpuemu {

// One axis of n chips, full array v_bytes, links of bandwidth W (one direction)
// and hop latency T.
double OracleSeconds(CollectiveOp op, RingAlgorithm alg, int n, double v_bytes, LinkParams link);

// A planned collective: the 1D closed forms composed along each part's axis
// order (one part per ICI axis, each carrying V / parts), slowest part, plus
// the DCN phase, which every part crosses at once with the whole shard.
double PredictSeconds(const CollectivePlan& plan, const Topology& topo);

// Hops a transfer needs end to end: the latency-bound floor is hops * T.
int OracleHops(CollectiveOp op, RingAlgorithm alg, int n);

}  // namespace tpuemu
