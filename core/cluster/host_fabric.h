// The fabric a worker is given: its host's end of the links between the
// pod's hosts, made for each pod configuration by the factory its main (gRPC)
// or test (memory) hands it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/pod/pod_config.h"
#include "core/pod/topology.h"
#include "core/wire/host_network.h"

namespace tpuemu {

class HostFabric : public Fabric {
 public:
  // Frames for this host's own chips go to `local`. Opens the links from
  // `local_chips` to chips on other hosts now, so that no job pays for
  // connecting them, and fails if one is not up within `within`. Called
  // again before each job, for the links it uses: those to `job_chips`
  // (sorted pod ids; all chips when empty), so that a job on a part of the
  // pod neither waits for nor fails on a host outside it. Links not opened
  // here open when first used.
  virtual absl::Status Connect(Mailbox& local, const std::vector<int>& local_chips, const std::vector<int>& job_chips,
                               absl::Duration within) = 0;
  // Closes the links to other hosts and frees what they hold (a connection's
  // read buffers live as long as it does), while no job uses them.
  virtual void Disconnect() {}
  // The pod's addresses again, after a worker came back: links to hosts
  // that moved, and links whose connection is down, close and open again
  // when next used; the others, and the jobs on them, go on untouched.
  virtual void UpdatePeers(const std::map<int, std::string>& host_addresses) {}
};

using FabricFactory =
    std::function<std::unique_ptr<HostFabric>(const PodConfig& config, const Topology& topo, int host)>;

}  // namespace tpuemu
