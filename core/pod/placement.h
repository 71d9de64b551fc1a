// Where a job runs on its pod: whole slices, `num_slices` of them from
// `first_slice`. Jobs on disjoint placements run at the same time and share
// nothing: each sees a pod of its own (PlacedTopology) whose chips and hosts
// are the pod's from an offset (chips and hosts are numbered slice by slice).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "core/pod/topology.h"

namespace tpuemu {

struct Placement {
  int first_slice = 0;
  int num_slices = 0;  // 0: the whole pod

  bool whole_pod() const { return num_slices == 0; }
  bool operator==(const Placement&) const = default;
};

// The pod a job on `num_slices` of `pod`'s slices sees: the same chip, slice
// shape, hosts and wraparound, fewer slices (so its DCN axis is a ring of its
// own slices, as a multislice job's is).
absl::StatusOr<Topology> PlacedTopology(const Topology& pod, int num_slices);

// The pod's id of the placement's chip 0 and host 0.
int FirstChip(const Topology& pod, const Placement& placement);
int FirstHost(const Topology& pod, const Placement& placement);
// How many of the pod's hosts the placement holds.
int PlacedHosts(const Topology& pod, const Placement& placement);

// "slice 1", "slices 0-1", "the whole pod", for people.
std::string DescribePlacement(const Placement& placement);

}  // namespace tpuemu
