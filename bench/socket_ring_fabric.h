// A ring's links as plain TCP sockets over loopback, for bench/ring_floor: the
// same frames as over gRPC, with no HTTP/2 and no gRPC threads. One socket to
// each neighbour, written by a thread of its own from a queue (a ring of
// blocking writers would deadlock once every socket's buffer is full), and
// one from each, read by a thread of its own. A frame is read
// where the ring says it goes (as MPI reads into the rank's buffer), or, when
// the ring gives no place (a sum's addend; or always, to count the copy gRPC
// forces), into a fresh payload the ring copies from.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/wire/fabric.h"

namespace tpuemu {

class SocketRingFabric : public Fabric {
 public:
  using Sink = std::function<void(Frame&&)>;
  // Where a frame with this tag and size is read to, or nullptr: a payload.
  // A frame read in place reaches the sink with no elements.
  using Place = std::function<std::byte*(uint64_t tag, size_t bytes)>;

  // Listens on 127.0.0.1; `port()` is where the neighbours connect.
  SocketRingFabric();
  ~SocketRingFabric() override;
  int port() const { return port_; }
  // Connects to each neighbour (rank -> its port), by which frames are sent
  // to their dst_chip, and accepts each one's connection; received frames go
  // to `sink`, in the thread that read them.
  void Connect(const std::map<int, int>& neighbour_ports, Sink sink, Place place);

  absl::Status Deliver(Frame&& frame) override;
  void Send(Frame&& frame, SentFn sent) override;

 private:
  struct Out {
    int fd = -1;
    std::mutex mu;
    std::condition_variable queued;
    std::deque<std::pair<Frame, SentFn>> queue;
    bool closing = false;
    std::thread writer;
  };
  static void WriteLoop(Out& out);
  void ReadLoop(int fd);

  int listen_fd_ = -1, port_ = 0;
  Sink sink_;
  Place place_;
  std::map<int, std::unique_ptr<Out>> outs_;  // by neighbour rank
  std::vector<int> in_fds_;
  std::vector<std::thread> readers_;
};

}  // namespace tpuemu
