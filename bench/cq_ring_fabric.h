// A ring's links over gRPC's completion-queue API, for bench/ring_floor: the
// same PeerService streams, frames and channel arguments as tpuemu's
// GrpcFabric, but every accepted stream, read, write completion and received
// frame handled by one thread of the rank's own that waits on one completion
// queue (the thread that waits polls the sockets itself), and no thread of the
// callback API: gRPC with the fewest thread hand-offs it allows. (Two threads
// on the queue, or one queue for reads and one for writes, were slower at
// 1 MiB: docs/benchmarks.md.)
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "core/wire/fabric.h"
#include "grpcpp/grpcpp.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {

class CqRingFabric : public Fabric {
 public:
  using Sink = std::function<void(Frame&&)>;
  // Listens on 127.0.0.1 (plaintext); `port()` is where the neighbours connect.
  CqRingFabric();
  ~CqRingFabric() override;
  int port() const { return port_; }
  // Accepts `incoming` streams and opens one to each neighbour (rank -> its
  // port), by which frames are sent to their dst_chip; received frames go to
  // `sink`, in the queue's thread. Nothing is torn down: ring_floor's ranks
  // leave with _Exit.
  void Connect(const std::map<int, int>& neighbour_ports, int incoming, Sink sink);

  absl::Status Deliver(Frame&& frame) override { return SendAndWait(std::move(frame)); }
  void Send(Frame&& frame, SentFn sent) override;

 private:
  class Incoming;
  class Outgoing;

  v1::PeerService::WithRawMethod_Stream<v1::PeerService::Service> service_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  Sink sink_;
  std::vector<std::unique_ptr<Incoming>> incoming_;
  std::map<int, std::unique_ptr<Outgoing>> outgoing_;  // by neighbour rank
  std::thread poller_;
};

}  // namespace tpuemu
