// A collective over a set of mesh axes, planned for every chip of the pod as
// transfers of element ranges over directed links, step by step.
//
// Every chip works in a "virtual" buffer laid out like the collective's full
// array (AllToAll: the N x N blocks), so a piece of data has the same offset on
// every chip it visits. Multi-axis collectives split the data into one part per
// ICI axis; part p visits the axes in an order rotated by p, so all axes' links
// carry data at once (the seed's n_axes speed-up), parts sized to load every
// axis alike (axis_parts.h), each phase forwarding data as the one before
// delivers it. A DCN axis comes first in
// every part's gather order, hence last in its reduce order: an AllReduce over
// ICI and DCN is hierarchical (ReduceScatter on ICI, AllReduce over DCN on the
// shard, AllGather on ICI).
#pragma once

#include <cstdint>
#include <vector>

#include "core/collective/spec.h"
#include "core/collective/ring_schedule.h"
#include "core/pod/topology.h"

namespace tpuemu {

struct Range {
  uint64_t offset = 0;  // elements
  uint64_t len = 0;
  uint64_t end() const { return offset + len; }
};

struct PlannedTransfer {
  int step = 0;  // global, 0-based
  int src = 0;
  int dst = 0;
  Axis axis = Axis::kX;
  int dir = +1;
  bool reduce = false;  // receiver adds into its buffer instead of copying
  int part = 0;         // which axis-order part this transfer belongs to
  int stage = 0;        // a stage of the part starts when the previous one ended (DCN is one)
  // Sent once every receive of the steps before has been taken, not as soon
  // as its data is there: a transfer that yields its links to the steps
  // before (an AllToAll block's last hop, sorted after its part's last step).
  bool after_all_before = false;
  std::vector<Range> ranges;
  uint64_t elements() const;
};

struct AxisPlan {
  Axis axis;
  int size;
  RingAlgorithm algorithm;
  int way = 0;  // +1/-1: a one-way ring routed around a down link, every phase this way
};

class CollectivePlan {
 public:
  // The whole pod's plan: every transfer of every chip.
  static absl::StatusOr<CollectivePlan> Create(const Topology& topo, const CollectiveSpec& spec);
  // The same plan seen from `chips`: only the transfers they send or
  // receive, in the whole plan's order, so that a chip's program is the same
  // as from Create. A chip (or a host) plans only its own share: planning
  // the whole pod on every chip costs chips x transfers, which at 256 chips
  // took longer than the step. With no chips, the spec is checked and nothing
  // is planned (what the coordinator needs of a collective job).
  static absl::StatusOr<CollectivePlan> CreateFor(const Topology& topo, const CollectiveSpec& spec,
                                                  const std::vector<int>& chips);

  const CollectiveSpec& spec() const { return spec_; }
  const std::vector<AxisPlan>& axes() const { return axes_; }
  int group_size() const { return group_size_; }
  int num_parts() const { return num_parts_; }
  int num_steps() const { return num_steps_; }
  uint64_t virtual_len() const { return virtual_len_; }
  // AllGather/ReduceScatter/AllReduce: part p carries elements
  // [part_offsets()[p], part_offsets()[p+1]) of every shard.
  const std::vector<uint64_t>& part_offsets() const { return part_offsets_; }
  uint64_t input_len() const;
  uint64_t output_len() const;
  const std::vector<PlannedTransfer>& transfers() const { return transfers_; }

  // Position of a chip in its group (spec axes, first listed most significant).
  int GroupRank(int chip) const;
  // Where a chip's input sits in the virtual buffer, and where its result is.
  std::vector<Range> InputRanges(int chip) const;
  std::vector<Range> ResultRanges(int chip) const;
  // The AlgorithmName of each axis, "bi-ring" or "x:bi-ring,y:line".
  std::string AlgorithmLabel() const;
  // "x routed round its down link(s): ..." for each axis that is.
  std::vector<std::string> Routed() const;

 private:
  // `chips` null: the whole pod.
  static absl::StatusOr<CollectivePlan> Make(const Topology& topo, const CollectiveSpec& spec,
                                             const std::vector<int>* chips);

  Topology topo_;
  CollectiveSpec spec_;
  std::vector<AxisPlan> axes_;
  int group_size_ = 1;
  int num_parts_ = 1;
  int num_steps_ = 0;
  uint64_t virtual_len_ = 0;
  std::vector<uint64_t> part_offsets_;
  std::vector<PlannedTransfer> transfers_;
};

// Host memory a collective job's chips hold together: every chip of the pod
// keeps the whole array in fp32 (its virtual buffer), and up to as much again
// in what it receives before copying it there.
double CollectiveHostBytes(const CollectivePlan& plan, const Topology& topo);

// Checks a collective job, refusing one whose chips would not fit in the pod's
// host memory (the coordinator at submit, and every worker before it
// allocates). The plan it returns has no transfers: each host plans its own
// chips' (CreateFor).
absl::StatusOr<CollectivePlan> PlanCollectiveJob(const Topology& topo, const CollectiveSpec& spec);

}  // namespace tpuemu
