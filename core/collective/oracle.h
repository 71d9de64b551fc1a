// Closed-form collective times (DESIGN §4): test oracles that the emulated
// clock is checked against, never used in its place. Two per case:
// - the closed form of the algorithm the emulator runs. Its chunks are
//   pipelined, so once bandwidth-bound it takes its busiest link's load over the link's
//   bandwidth plus one hop (the last chunk's flight); otherwise the chain of
//   its hops: a hop latency each, the first chunk (or the hop's whole piece,
//   if smaller) on the wire once, and a slice of it per further hop
//   (cut-through; a reduction waits for its chunk whole and its add): the
//   larger, with a reduction's last adds;
// - the seed's rule of thumb (seed 000: V / W_bidir per axis, n_axes times
//   faster over several axes, twice for AllReduce, a quarter for AllToAll),
//   which drops the (N-1)/N the closed form keeps and takes the larger of the
//   latency and bandwidth terms instead of their sum.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/collective/plan.h"
#include "core/pod/topology.h"

namespace tpuemu {

// One axis of n chips, full array v_bytes, links of bandwidth W (one
// direction) and hop latency T, wire chunks of chunk_bytes (emulated), a
// received chunk's add taking reduce(bytes): the busiest link's load over W;
// the chain of hops; and the adds after the last arrivals. Alone, an axis
// takes max(chain, load / W + T + tail).
using ReduceTime = std::function<double(double bytes)>;
double OracleTransferSeconds(CollectiveOp op, RingAlgorithm alg, int n, double v_bytes, LinkParams link);
double OracleChainSeconds(CollectiveOp op, RingAlgorithm alg, int n, double v_bytes, double chunk_bytes,
                          LinkParams link, const ReduceTime& reduce);
double OracleTailSeconds(CollectiveOp op, RingAlgorithm alg, int n, double v_bytes, double chunk_bytes,
                         const ReduceTime& reduce);

// A planned collective, exactly: each ICI axis's busiest link carries its
// phases of every part (sized as the plan sized them) while the parts run at
// once and each phase forwards what the one before delivers, so the busiest
// axis sets the time (the larger of it plus one hop, and the longest path's
// hops); a DCN phase, which waits for the ICI phases before it, adds its own
// time (hierarchical AllReduce: ICI ReduceScatter, DCN AllReduce of the
// 1/N_ici shard, ICI AllGather).
double PredictSeconds(const CollectivePlan& plan, const Topology& topo);

// `count` such collectives issued one right after the other: they share the
// links, so their transfers add, while their hops overlap: the first one's
// stages, or, where longer, the others streaming behind it through a kind
// of link (ICI or DCN) that stays busy while each waits between its stages.
double PredictRepeatedSeconds(const CollectivePlan& plan, const Topology& topo, double count);

// The seed's rule for the same case, composed the same way. 0 where the
// seeds give none (AllToAll on a unidirectional ring or a line).
double SeedFormulaSeconds(const CollectivePlan& plan, const Topology& topo);

// PredictRepeatedSeconds for `count` collectives `op` of about v_bytes (bf16)
// each over `axes` of the pod, rounded to what splits evenly; 0 if the axes
// cannot carry it. For predictions outside a collective job (the training
// per-layer table).
double PredictAxesSeconds(const Topology& topo, CollectiveOp op, const std::vector<Axis>& axes, double v_bytes,
                          double count);

// How PredictAxesSeconds composes `axes`: "ICI x,y" or "ICI y, then DCN
// (hierarchical)".
std::string PredictAxesLabel(const std::vector<Axis>& axes);

// Hops a transfer needs end to end: the latency-bound floor is hops * T.
int OracleHops(CollectiveOp op, RingAlgorithm alg, int n);

}  // namespace tpuemu
