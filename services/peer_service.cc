#include "services/peer_service.h"

#include <new>

#include "absl/strings/str_cat.h"
#include "services/frame_codec.h"
#include "spdlog/spdlog.h"
#include "tpuemu/v1/peer.pb.h"

namespace tpuemu {

// One stream from a peer: accepted, read frame after frame (one read in
// flight), then finished; its object goes once the finish completes.
class PeerServiceImpl::Stream final : public PeerQueue::Tag {
 public:
  explicit Stream(PeerServiceImpl& service) : service_(service), reader_(&context_) {
    service_.RequestStream(&context_, &reader_, service_.queue_->cq(), service_.queue_->cq(), AsTag());
  }

  void Done(bool ok) override {
    switch (state_) {
      case State::kAccepting:
        if (!ok) return End();  // the server is shutting down
        service_.Accept();      // the next one
        state_ = State::kReading;
        return reader_.Read(&buffer_, AsTag());
      case State::kReading:
        if (!ok) return Finish(grpc::Status::OK);  // the peer closed its end, or the call was cancelled
        return Take();
      case State::kFinishing:
        return End();
    }
  }

 private:
  enum class State { kAccepting, kReading, kFinishing };

  void Take() {
    // A stream that breaks the protocol ends with a status that says why;
    // nothing a peer sends may end the process.
    try {
      auto frame = DecodeFrame(buffer_);
      if (!frame.ok()) {
        spdlog::error("peer stream: {}", frame.status().ToString());
        return Finish(grpc::Status(grpc::StatusCode::DATA_LOSS, std::string(frame.status().message())));
      }
      ++chunks_;
      service_.sink_(*std::move(frame));
    } catch (const std::bad_alloc&) {
      spdlog::error("peer stream: out of host memory after {} chunks", chunks_);
      return Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 absl::StrCat("the receiving worker ran out of host memory after ", chunks_,
                                              " chunks")));
    }
    buffer_.Clear();
    reader_.Read(&buffer_, AsTag());
  }

  void Finish(const grpc::Status& status) {
    state_ = State::kFinishing;
    if (!status.ok()) return reader_.FinishWithError(status, AsTag());
    v1::PeerStreamSummary summary;
    summary.set_chunks(chunks_);
    const std::string bytes = summary.SerializeAsString();
    grpc::Slice slice(bytes.data(), bytes.size());
    reader_.Finish(grpc::ByteBuffer(&slice, 1), grpc::Status::OK, AsTag());
  }

  void End() {
    PeerServiceImpl& service = service_;
    delete this;
    service.Ended();
  }

  PeerServiceImpl& service_;
  grpc::ServerContext context_;
  grpc::ServerAsyncReader<grpc::ByteBuffer, grpc::ByteBuffer> reader_;
  grpc::ByteBuffer buffer_;
  State state_ = State::kAccepting;
  uint64_t chunks_ = 0;
};

void PeerServiceImpl::AwaitCallsEnded() {
  std::unique_lock<std::mutex> lock(mu_);
  ended_.wait(lock, [&] { return streams_ == 0; });
}

void PeerServiceImpl::AddTo(grpc::ServerBuilder& builder) {
  builder.RegisterService(this);
  queue_ = std::make_shared<PeerQueue>(builder.AddCompletionQueue());
}

void PeerServiceImpl::Start() { Accept(); }

void PeerServiceImpl::Accept() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++streams_;
  }
  new Stream(*this);
}

void PeerServiceImpl::Ended() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--streams_ == 0) ended_.notify_all();
}

}  // namespace tpuemu
