#include "core/wire/placed_network.h"

#include "absl/strings/str_cat.h"

namespace tpuemu {

absl::Status PlacedNetwork::OffsetFabric::Deliver(Frame&& frame) {
  frame.header.chip_base = chip_base_;
  return pod_fabric_->Deliver(std::move(frame));
}

absl::StatusOr<std::unique_ptr<PlacedNetwork>> PlacedNetwork::Create(const Topology& pod, const Placement& placement,
                                                                     int pod_host, double time_scale,
                                                                     Fabric* pod_fabric, Mailbox* pod_mailbox) {
  auto placed = PlacedTopology(pod, placement.num_slices);
  if (!placed.ok()) return placed.status();
  const int host = pod_host - FirstHost(pod, placement);
  if (placement.first_slice < 0 || placement.first_slice + placement.num_slices > pod.slices() || host < 0 ||
      host >= placed->num_hosts()) {
    return absl::InvalidArgumentError(absl::StrCat("the job is placed on ", DescribePlacement(placement), " of ",
                                                   pod.slices(), ", which does not hold host ", pod_host));
  }
  return std::unique_ptr<PlacedNetwork>(
      new PlacedNetwork(*placed, host, FirstChip(pod, placement), time_scale, pod_fabric, pod_mailbox));
}

PlacedNetwork::PlacedNetwork(const Topology& placed, int host, int chip_base, double time_scale, Fabric* pod_fabric,
                             Mailbox* pod_mailbox)
    : fabric_(pod_fabric, chip_base), net_(placed, placed.ChipsOfHost(host), time_scale, &fabric_, pod_mailbox) {}

}  // namespace tpuemu
