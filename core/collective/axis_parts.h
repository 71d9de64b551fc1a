// How a multi-axis AllGather, ReduceScatter or AllReduce divides each shard
// among its parts. Part p visits the ICI axes in an order rotated by p; a
// phase late in a part's order moves more bytes (it passes on everything the
// earlier phases gathered), so equal parts load a large axis's links more
// than a small one's. The parts are sized so that every axis's busiest link
// carries the same bytes-over-bandwidth: then each link carries 1/(2k) of
// what a chip must receive, the per-link lower bound (seed 000's n_axes
// speed-up, (N-1)/N included).
#pragma once

#include <vector>

#include "core/collective/plan.h"
#include "core/pod/topology.h"

namespace tpuemu {

// Seconds per byte that one phase gathering (or reduce-scattering) an array
// of G bytes puts on the busiest link of `axis`: coefficient x G.
double GatherLinkSecondsPerByte(const AxisPlan& axis, LinkParams link);

// Fraction of each shard that part p carries, for ICI axes in the spec's
// order (part p's order is ici rotated by p). Equal parts where sizing cannot
// balance the links (a fraction would be negative).
std::vector<double> PartFractions(const std::vector<AxisPlan>& ici, const Topology& topo);

}  // namespace tpuemu
