// PeerService: receives chunk streams from other workers and hands each frame
// to a sink (the worker's mailbox).
#pragma once

#include <functional>

#include "core/wire/frame.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {

class PeerServiceImpl : public v1::PeerService::WithRawCallbackMethod_Stream<v1::PeerService::Service> {
 public:
  using Sink = std::function<void(Frame&&)>;
  explicit PeerServiceImpl(Sink sink) : sink_(std::move(sink)) {}
  grpc::ServerReadReactor<grpc::ByteBuffer>* Stream(grpc::CallbackServerContext* context,
                                                    grpc::ByteBuffer* response) override;

 private:
  Sink sink_;
};

}  // namespace tpuemu
