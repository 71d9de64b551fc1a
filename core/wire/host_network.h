// The links of the chips one host (worker) owns: a paced LinkSender for every
// outgoing directed link, and the mailbox their incoming frames land in. The
// Fabric decides how a frame reaches its destination chip: through memory
// for chips on this host, or over the wire for chips on another.
#pragma once

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "core/wire/fabric.h"
#include "core/wire/link_sender.h"
#include "core/wire/mailbox.h"
#include "core/pod/topology.h"

namespace tpuemu {

class HostNetwork {
 public:
  // Frames for the local chips land in `shared_mailbox` when given (a job
  // placed on part of the pod shares its host's), else in a mailbox of its own.
  HostNetwork(const Topology& topo, std::vector<int> local_chips, double time_scale, Fabric* fabric,
              Mailbox* shared_mailbox = nullptr);

  const Topology& topology() const { return topo_; }
  const std::vector<int>& local_chips() const { return local_chips_; }
  double time_scale() const { return time_scale_; }
  Mailbox& mailbox() { return *mailbox_; }
  // The outgoing link of a local chip along axis/dir; nullptr if none.
  LinkSender* Link(int chip, Axis axis, int dir);
  void ForgetJob(uint64_t job);

 private:
  Topology topo_;
  std::vector<int> local_chips_;
  double time_scale_;
  Mailbox own_mailbox_;
  Mailbox* mailbox_;
  std::map<std::tuple<int, int, int>, std::unique_ptr<LinkSender>> links_;
};

}  // namespace tpuemu
