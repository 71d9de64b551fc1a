// The fabric between workers: frames for chips on this host go straight to
// the local mailbox; frames for chips on another host go over one long-lived
// PeerService stream per directed link, each on its own connection, written
// asynchronously on the worker's PeerQueue: the sending chip hands a frame
// over and goes on.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/cluster/host_fabric.h"
#include "grpcpp/grpcpp.h"
#include "services/peer_queue.h"

namespace tpuemu {

class PeerServiceImpl;

class GrpcFabric : public HostFabric {
 public:
  GrpcFabric(const Topology& topo, int my_host, std::map<int, std::string> host_addresses,
             std::shared_ptr<PeerQueue> queue);
  ~GrpcFabric() override;
  absl::Status Connect(Mailbox& local, const std::vector<int>& local_chips, const std::vector<int>& job_chips,
                       absl::Duration within) override;
  absl::Status Deliver(Frame&& frame) override;
  void Send(Frame&& frame, SentFn sent) override;
  void Disconnect() override;
  void UpdatePeers(const std::map<int, std::string>& host_addresses) override;
  size_t retired_links();  // cancelled links not yet freed (for tests)

 private:
  class PeerStream;
  struct Link {
    std::shared_ptr<grpc::Channel> channel;  // its own connection
    std::shared_ptr<PeerStream> stream;
  };
  absl::StatusOr<Link> LinkFor(int src, int dst);
  // Under mu_: the retired links whose streams have ended, taken out for the
  // caller to free once it lets go of mu_. Without it a worker whose peers
  // registered again and again between idle spells kept every old channel.
  std::vector<Link> TakeEndedRetired();
  // Waits until each cancelled link's stream has ended, and frees it.
  static void FreeWhenDone(std::vector<Link>& links);

  Topology topo_;
  int my_host_;
  std::map<int, std::string> addresses_;
  std::shared_ptr<PeerQueue> queue_;
  Mailbox* local_ = nullptr;
  // Where a frame that could not leave aborts its job: local_ from Connect
  // until Disconnect. Shared with the streams' callbacks, which a stream
  // left to gRPC may call after the fabric is gone; they abort under `mu`,
  // so that once Disconnect has cleared it none is still using the mailbox.
  struct AbortTarget {
    std::mutex mu;
    Mailbox* mailbox = nullptr;
  };
  std::shared_ptr<AbortTarget> abort_in_ = std::make_shared<AbortTarget>();
  std::mutex mu_;
  std::map<std::pair<int, int>, Link> links_;
  // Links of hosts that moved, cancelled: freed once gRPC is done with their
  // streams, seen at the next retirement, or when the fabric is idle
  // (Disconnect) or gone.
  std::vector<Link> retired_;
};

// A worker's fabric for each pod configuration: to the addresses it lists, on
// the queue of the worker's PeerService (which outlives the factory).
FabricFactory GrpcFabricFactory(const PeerServiceImpl& peer);

}  // namespace tpuemu
