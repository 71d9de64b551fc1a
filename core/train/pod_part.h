// The part of the pod a training job asks for (issue 16): its `topology`
// (the pod's slice shape, or a block of it), `num_slices` and `num_chips`
// keys, checked against the pod, as a PodPart (core/pod/placement.h).
#pragma once

#include "absl/status/statusor.h"
#include "core/pod/placement.h"
#include "core/train/config.h"

namespace tpuemu {

// 0s where the job asks for the whole pod (or leaves the key out): its
// slices' count when it names fewer, its block when smaller than a slice.
// `num_chips` alone takes the fewest slices that hold them and, in each, the
// first block of whole hosts with that many chips, widest along x first (an
// axis it spans whole keeps its wraparound). Errors name the key and what
// this pod allows.
absl::StatusOr<PodPart> TrainPodPart(const TrainConfig& config, const Topology& pod);

}  // namespace tpuemu
