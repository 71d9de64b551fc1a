#include "core/wire/placed_network.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tpuemu {

void PlacedNetwork::PodIdFabric::Rename(FrameHeader& header) const {
  header.pod_src = pod_chips_.at(header.src_chip);
  header.pod_dst = pod_chips_.at(header.dst_chip);
}

absl::Status PlacedNetwork::PodIdFabric::Deliver(Frame&& frame) {
  Rename(frame.header);
  return pod_fabric_->Deliver(std::move(frame));
}

void PlacedNetwork::PodIdFabric::Send(Frame&& frame, SentFn sent) {
  Rename(frame.header);
  pod_fabric_->Send(std::move(frame), std::move(sent));
}

absl::StatusOr<std::unique_ptr<PlacedNetwork>> PlacedNetwork::Create(const Topology& pod, const Placement& placement,
                                                                     int pod_host, double time_scale,
                                                                     Fabric* pod_fabric, Mailbox* pod_mailbox) {
  if (placement.num_slices < 1 || placement.first_slice < 0 ||
      placement.first_slice + placement.num_slices > pod.slices()) {
    return absl::InvalidArgumentError(absl::StrCat("the job is placed on ", DescribePlacement(placement),
                                                   ", but the pod has ", pod.slices(), " slice(s)"));
  }
  auto placed = PlacedTopology(pod, PodPart{placement.num_slices, placement.block});
  if (!placed.ok()) return placed.status();
  for (int a = 0; a < 3; ++a) {
    if (placement.origin[a] < 0 || placement.origin[a] + placed->AxisSize(static_cast<Axis>(a)) > pod.AxisSize(static_cast<Axis>(a)) ||
        placement.origin[a] % pod.host_block()[a] != 0) {
      return absl::InvalidArgumentError(absl::StrCat(DescribePlacement(placement), " does not fit the pod's ",
                                                     pod.ShapeString(), " slices in whole hosts"));
    }
  }
  const std::vector<int> hosts = PlacedHosts(pod, placement);
  const auto mine = std::find(hosts.begin(), hosts.end(), pod_host);
  if (mine == hosts.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the job is placed on ", DescribePlacement(placement), ", which does not hold host ", pod_host));
  }
  const int host = static_cast<int>(mine - hosts.begin());
  return std::unique_ptr<PlacedNetwork>(
      new PlacedNetwork(*placed, host, PlacedChips(pod, placement), time_scale, pod_fabric, pod_mailbox));
}

PlacedNetwork::PlacedNetwork(const Topology& placed, int host, std::vector<int> pod_chips, double time_scale,
                             Fabric* pod_fabric, Mailbox* pod_mailbox)
    : fabric_(pod_fabric, std::move(pod_chips)),
      net_(placed, placed.ChipsOfHost(host), time_scale, &fabric_, pod_mailbox) {}

}  // namespace tpuemu
