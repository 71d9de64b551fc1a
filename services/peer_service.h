// PeerService: receives chunk streams from other workers and hands each frame
// to a sink (the worker's mailbox), in the thread of the worker's PeerQueue.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "core/wire/frame.h"
#include "services/peer_queue.h"
#include "services/server.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {

class PeerServiceImpl : public v1::PeerService::WithRawMethod_Stream<v1::PeerService::Service>,
                        public QueuedService {
 public:
  using Sink = std::function<void(Frame&&)>;
  explicit PeerServiceImpl(Sink sink) : sink_(std::move(sink)) {}
  ~PeerServiceImpl() override { AwaitCallsEnded(); }

  void AddTo(grpc::ServerBuilder& builder) override;
  void Start() override;
  void AwaitCallsEnded() override;
  // The queue its streams are read on, for the fabric's streams to use too;
  // null until added to a server.
  std::shared_ptr<PeerQueue> queue() const { return queue_; }

 private:
  class Stream;
  void Accept();  // one stream at a time waits to be accepted
  void Ended();   // a stream's object is gone

  Sink sink_;
  std::shared_ptr<PeerQueue> queue_;
  std::mutex mu_;
  std::condition_variable ended_;
  int streams_ = 0;  // accepted or waiting to be
};

}  // namespace tpuemu
