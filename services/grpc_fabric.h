// The fabric between workers: frames for chips on this host go straight to
// the local mailbox; frames for chips on another host go over one long-lived
// PeerService stream per directed link, each on its own connection.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/cluster/host_fabric.h"
#include "grpcpp/grpcpp.h"

namespace tpuemu {

class GrpcFabric : public HostFabric {
 public:
  GrpcFabric(const Topology& topo, int my_host, std::map<int, std::string> host_addresses);
  ~GrpcFabric() override;
  absl::Status Connect(Mailbox& local, const std::vector<int>& local_chips, absl::Duration within) override;
  absl::Status Deliver(Frame&& frame) override;
  void Disconnect() override;
  void UpdatePeers(const std::map<int, std::string>& host_addresses) override;

 private:
  struct PeerStream;
  absl::StatusOr<PeerStream*> StreamFor(int src, int dst);

  Topology topo_;
  int my_host_;
  std::map<int, std::string> addresses_;
  Mailbox* local_ = nullptr;
  std::mutex mu_;
  std::map<std::pair<int, int>, std::unique_ptr<PeerStream>> streams_;
  // Streams to hosts that moved, cancelled: kept until the fabric is idle
  // (Disconnect) or gone, as a job's sender may still hold one.
  std::vector<std::unique_ptr<PeerStream>> retired_;
};

// A worker's fabric for each pod configuration: to the addresses it lists.
FabricFactory GrpcFabricFactory();

}  // namespace tpuemu
