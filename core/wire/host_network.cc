#include "core/wire/host_network.h"

#include <algorithm>

namespace tpuemu {

HostNetwork::HostNetwork(const Topology& topo, std::vector<int> local_chips, double time_scale, Fabric* fabric,
                         Mailbox* shared_mailbox, bool inline_delivery)
    : topo_(topo),
      local_chips_(std::move(local_chips)),
      time_scale_(time_scale),
      mailbox_(shared_mailbox ? shared_mailbox : &own_mailbox_) {
  for (int chip : local_chips_) {
    for (const auto& link : topo_.OutgoingLinks(chip)) {
      const bool in_thread = inline_delivery ||
                              std::find(local_chips_.begin(), local_chips_.end(), link.peer) != local_chips_.end();
      links_[{chip, static_cast<int>(link.axis), link.dir}] = std::make_unique<LinkSender>(
          topo_.Link(link.axis), time_scale_, [fabric](Frame&& f) { return fabric->Deliver(std::move(f)); },
          /*max_queued=*/8, /*inline_delivery=*/in_thread);
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
