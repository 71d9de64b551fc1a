// Where a job runs on its pod: `num_slices` slices from `first_slice`, and
// in each of them either the whole slice or a block of whole hosts (a
// sub-slice). Jobs on disjoint placements run at the same time and share
// nothing: each sees a pod of its own (PlacedTopology), whose chips and
// hosts map onto the pod's (PlacedChips, PlacedHosts).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/pod/topology.h"

namespace tpuemu {

// The part of the pod a job asks for: how many slices (0: all of them) and,
// in each, a block of chips (all 0: the whole slice).
struct PodPart {
  int num_slices = 0;
  std::array<int, 3> block = {0, 0, 0};

  bool whole_slices() const { return block == std::array<int, 3>{0, 0, 0}; }
  bool operator==(const PodPart&) const = default;
};

struct Placement {
  int first_slice = 0;
  int num_slices = 0;                     // 0: the whole pod
  std::array<int, 3> origin = {0, 0, 0};  // the block's first chip, the same in each slice
  std::array<int, 3> block = {0, 0, 0};   // all 0: whole slices

  bool whole_pod() const { return num_slices == 0; }
  bool whole_slices() const { return block == std::array<int, 3>{0, 0, 0}; }
  bool operator==(const Placement&) const = default;
};

// The pod a job on `part` of `pod` sees: the same chip and chips per host,
// `num_slices` slices (its DCN axis is a ring of its own slices, as a
// multislice job's is) of the block's shape. A block wraps around only
// along an axis it spans whole where the pod wraps, as real sub-slices do.
// Refused, naming the value and what fits, unless the block fits in a slice
// and is made of whole hosts.
absl::StatusOr<Topology> PlacedTopology(const Topology& pod, const PodPart& part);

// Every placement of `part` on `pod`, lowest slice first, then the block
// with the lowest first chip: the order a scheduler tries them in.
std::vector<Placement> CandidatePlacements(const Topology& pod, const PodPart& part);

// The pod's id of each of the placement's chips and hosts, indexed by the
// job's own ids (as PlacedTopology numbers them).
std::vector<int> PlacedChips(const Topology& pod, const Placement& placement);
std::vector<int> PlacedHosts(const Topology& pod, const Placement& placement);

// "slice 1", "slices 0-1", "the whole pod", "the 2x2 block at (2,0) of
// slice 1", for people.
std::string DescribePlacement(const Placement& placement);

}  // namespace tpuemu
