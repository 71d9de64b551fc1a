#include "services/peer_service.h"

#include <new>

#include "absl/strings/str_cat.h"
#include "services/frame_codec.h"
#include "spdlog/spdlog.h"
#include "tpuemu/v1/peer.pb.h"

namespace tpuemu {
namespace {

class StreamReader : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  StreamReader(const PeerServiceImpl::Sink& sink, grpc::ByteBuffer* response) : sink_(sink), response_(response) {
    StartRead(&buffer_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      v1::PeerStreamSummary summary;
      summary.set_chunks(chunks_);
      const std::string bytes = summary.SerializeAsString();
      grpc::Slice slice(bytes.data(), bytes.size());
      *response_ = grpc::ByteBuffer(&slice, 1);
      Finish(grpc::Status::OK);
      return;
    }
    // A stream that breaks the protocol ends with a status that says why;
    // nothing a peer sends may end the process (an allocation that fails
    // here would unwind into gRPC, which drops the stream without a status).
    try {
      auto frame = DecodeFrame(buffer_);
      if (!frame.ok()) {
        spdlog::error("peer stream: {}", frame.status().ToString());
        Finish(grpc::Status(grpc::StatusCode::DATA_LOSS, std::string(frame.status().message())));
        return;
      }
      ++chunks_;
      sink_(*std::move(frame));
    } catch (const std::bad_alloc&) {
      spdlog::error("peer stream: out of host memory after {} chunks", chunks_);
      Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("the receiving worker ran out of host memory after ", chunks_, " chunks")));
      return;
    }
    buffer_.Clear();
    StartRead(&buffer_);
  }

  void OnDone() override { delete this; }

 private:
  const PeerServiceImpl::Sink& sink_;
  grpc::ByteBuffer* response_;
  grpc::ByteBuffer buffer_;
  uint64_t chunks_ = 0;
};

}  // namespace

grpc::ServerReadReactor<grpc::ByteBuffer>* PeerServiceImpl::Stream(grpc::CallbackServerContext* context,
                                                                   grpc::ByteBuffer* response) {
  return new StreamReader(sink_, response);
}

}  // namespace tpuemu
