// The fabric between workers: frames for chips on this host go straight to
// the local mailbox; frames for chips on another host go over one long-lived
// PeerService stream per directed link, each on its own connection.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/wire/host_network.h"
#include "core/pod/pod_config.h"
#include "grpcpp/grpcpp.h"

namespace tpuemu {

class GrpcFabric : public Fabric {
 public:
  GrpcFabric(const Topology& topo, int my_host, std::map<int, std::string> host_addresses);
  ~GrpcFabric() override;
  // Where frames for this host's own chips go.
  void set_local_mailbox(Mailbox* mailbox) { local_ = mailbox; }
  absl::Status Deliver(Frame&& frame) override;
  // Opens the stream of every link from a local chip to a chip on another
  // host now, so that no collective pays for connection set-up.
  absl::Status ConnectLinks(const std::vector<int>& local_chips);

 private:
  struct PeerStream;
  absl::StatusOr<PeerStream*> StreamFor(int src, int dst);

  Topology topo_;
  int my_host_;
  std::map<int, std::string> addresses_;
  Mailbox* local_ = nullptr;
  std::mutex mu_;
  std::map<std::pair<int, int>, std::unique_ptr<PeerStream>> streams_;
};

}  // namespace tpuemu
