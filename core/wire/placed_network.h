// One host's links for a job placed on part of the pod (core/pod/placement.h):
// a HostNetwork on the job's own pod, its chips named by the job's ids, whose
// frames go out through the host's fabric named by the pod's ids as well and
// land in the host's mailbox. Links of its own: jobs on disjoint placements
// share no link, so none sees the other on either clock.
#pragma once

#include <vector>

#include "core/pod/placement.h"
#include "core/wire/host_network.h"

namespace tpuemu {

class PlacedNetwork {
 public:
  // `pod_host` is this host's id on the pod; `pod_fabric` and `pod_mailbox`
  // are the host's (both outlive this).
  static absl::StatusOr<std::unique_ptr<PlacedNetwork>> Create(const Topology& pod, const Placement& placement,
                                                               int pod_host, double time_scale, Fabric* pod_fabric,
                                                               Mailbox* pod_mailbox);

  HostNetwork& net() { return net_; }

 private:
  // Names each frame's chips by the pod's ids too, for the pod's fabric.
  class PodIdFabric : public Fabric {
   public:
    PodIdFabric(Fabric* pod_fabric, std::vector<int> pod_chips)
        : pod_fabric_(pod_fabric), pod_chips_(std::move(pod_chips)) {}
    absl::Status Deliver(Frame&& frame) override;
    void Send(Frame&& frame, SentFn sent) override;

   private:
    void Rename(FrameHeader& header) const;
    Fabric* const pod_fabric_;
    const std::vector<int> pod_chips_;  // by the job's chip id
  };

  PlacedNetwork(const Topology& placed, int host, std::vector<int> pod_chips, double time_scale, Fabric* pod_fabric,
                Mailbox* pod_mailbox);

  PodIdFabric fabric_;
  HostNetwork net_;  // after fabric_, which its links send through
};

}  // namespace tpuemu
