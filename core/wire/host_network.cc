#include "core/wire/host_network.h"

namespace tpuemu {

HostNetwork::HostNetwork(const Topology& topo, std::vector<int> local_chips, double time_scale, Fabric* fabric,
                         Mailbox* shared_mailbox)
    : topo_(topo),
      local_chips_(std::move(local_chips)),
      time_scale_(time_scale),
      mailbox_(shared_mailbox ? shared_mailbox : &own_mailbox_) {
  for (int chip : local_chips_) {
    for (const auto& link : topo_.OutgoingLinks(chip)) {
      links_[{chip, static_cast<int>(link.axis), link.dir}] =
          std::make_unique<LinkSender>(topo_.Link(link.axis), time_scale_, *fabric);
    }
  }
}

LinkSender* HostNetwork::Link(int chip, Axis axis, int dir) {
  auto it = links_.find({chip, static_cast<int>(axis), dir});
  return it == links_.end() ? nullptr : it->second.get();
}

void HostNetwork::ForgetJob(uint64_t job) {
  mailbox_->ClearJob(job);
  for (auto& [_, link] : links_) link->ForgetJob(job);
}

}  // namespace tpuemu
