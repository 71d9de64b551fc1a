#include "core/pod/placement.h"

#include "absl/strings/str_cat.h"

namespace tpuemu {

absl::StatusOr<Topology> PlacedTopology(const Topology& pod, int num_slices) {
  if (num_slices < 1 || num_slices > pod.slices()) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_slices: ", num_slices, ", but the pod has ", pod.slices(), " slice(s): from 1 to ", pod.slices()));
  }
  TopologyRequest request = pod.request();
  request.slices = num_slices;
  return Topology::Create(request);
}

int FirstChip(const Topology& pod, const Placement& placement) {
  return placement.first_slice * pod.chips_per_slice();
}

int FirstHost(const Topology& pod, const Placement& placement) {
  return placement.first_slice * pod.hosts_per_slice();
}

int PlacedHosts(const Topology& pod, const Placement& placement) {
  return placement.whole_pod() ? pod.num_hosts() : placement.num_slices * pod.hosts_per_slice();
}

std::string DescribePlacement(const Placement& placement) {
  if (placement.whole_pod()) return "the whole pod";
  if (placement.num_slices == 1) return absl::StrCat("slice ", placement.first_slice);
  return absl::StrCat("slices ", placement.first_slice, "-", placement.first_slice + placement.num_slices - 1);
}

}  // namespace tpuemu
