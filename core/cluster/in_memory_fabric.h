// The fabric between hosts that share one process: a frame for a chip on
// another host goes straight into that host's mailbox (paced and clocked by
// its link like any other). Lets a coordinator and its workers run in one
// process without gRPC.
#pragma once

#include <map>
#include <mutex>

#include "core/cluster/host_fabric.h"

namespace tpuemu {

class InMemoryFabric {
 public:
  // Each host's end, for one configuration of it. The fabric outlives them.
  FabricFactory Factory();

 private:
  class End;
  absl::Status Deliver(int host, Frame&& frame);

  std::mutex mu_;
  std::map<int, Mailbox*> mailboxes_;  // of the hosts' current ends
};

}  // namespace tpuemu
