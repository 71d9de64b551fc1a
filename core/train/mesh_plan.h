// The collectives of a training job's mesh, planned: by every chip as it
// runs them, and once at submit for all of them (kept apart from the chip's
// transport so that the job-file fuzzer can link the submit check).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collective/plan.h"
#include "core/pod/topology.h"
#include "core/train/config.h"
#include "core/train/mesh.h"

namespace tpuemu {

// The plan of a collective over a mesh axis of `elements` (the op's whole
// array): only the transfers `chips` send or receive (a chip plans its own
// share; every chip planning the whole pod cost chips x transfers, seconds
// per chip at 256 chips), none when `chips` is empty (the spec checked).
// With `step` (0 or more) it avoids the job's down links in force at that
// step, or fails naming one it needs.
absl::StatusOr<CollectivePlan> PlanMeshCollective(const TrainConfig& c, const TrainMesh& mesh,
                                                  const Topology& topo, CollectiveOp op, MeshAxisKind axis,
                                                  uint64_t elements, const std::vector<int>& chips, int step = -1);

// Every collective a training step runs, planned at submit: an array the
// axis cannot split evenly is refused then, naming the array, the keys
// that size it and what would split, not on the workers mid-job. With
// on_down_link route, the same at the first step of each of c.faults' down
// links: a collective that needs a down link and cannot go
// round it (a line; links down both ways) is refused, at submit or when
// `tpuemu fault` adds the link, not at that step. (With on_down_link fail,
// the job failing at that step, naming the link, is what was asked.)
absl::Status CheckMeshCollectives(const TrainConfig& c, const TrainMesh& mesh, const Topology& topo);

}  // namespace tpuemu
