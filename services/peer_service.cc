#include "services/peer_service.h"

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
    auto frame = DecodeFrame(buffer_);
    if (!frame.ok()) {
      spdlog::error("peer stream: {}", frame.status().ToString());
      Finish(grpc::Status(grpc::StatusCode::DATA_LOSS, std::string(frame.status().message())));
      return;
    }
    ++chunks_;
    sink_(*std::move(frame));
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
