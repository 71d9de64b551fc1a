// The one completion queue, and the one thread, that carry a worker's peer
// streams both ways: the PeerService streams other workers send to it, and
// the fabric's streams to them. That thread polls their sockets, reads and
// decodes frames, and starts each next write itself, so that no frame
// changes thread inside gRPC. With gRPC's callback API (two threads of
// gRPC's) or one thread for each direction, a bare ring all-gather of 1 MiB
// ran at half the speed (docs/benchmarks.md, "completion-queue API").
#pragma once

#include <memory>
#include <thread>

#include "grpcpp/grpcpp.h"

namespace tpuemu {

class PeerQueue {
 public:
  // What a completion's tag points at: `ok` as gRPC reports it.
  class Tag {
   public:
    virtual void Done(bool ok) = 0;
    // What to hand gRPC as an operation's tag: the queue's thread reads it
    // back as a Tag.
    void* AsTag() { return this; }

   protected:
    ~Tag() = default;
  };

  // Starts the thread. The queue comes from the ServerBuilder of the server
  // whose PeerService it serves; client streams may use it too.
  explicit PeerQueue(std::unique_ptr<grpc::ServerCompletionQueue> cq);
  // Shuts the queue down once everything on it has ended: the server shut
  // down first, and every stream using it ended (those who start operations
  // on the queue hold it, so this runs after the last of them).
  ~PeerQueue();
  PeerQueue(const PeerQueue&) = delete;
  PeerQueue& operator=(const PeerQueue&) = delete;

  grpc::ServerCompletionQueue* cq() const { return cq_.get(); }
  // Whether the caller is the queue's thread, which must never wait for a
  // completion: only it would deliver one.
  bool InThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread thread_;
};

}  // namespace tpuemu
