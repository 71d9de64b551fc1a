#include "bench/cq_ring_fabric.h"

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "services/frame_codec.h"
#include "grpcpp/generic/generic_stub.h"
#include "services/server.h"

namespace tpuemu {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "cq ring fabric: %s\n", what.c_str());
  std::_Exit(1);
}

// What a completion's tag points at.
struct Tag {
  virtual ~Tag() = default;
  virtual void Done(bool ok) = 0;
};

}  // namespace

// One accepted stream: accepted, then read frame after frame, one read in
// flight, each frame handed to the sink in the thread that completed it.
class CqRingFabric::Incoming : public Tag {
 public:
  explicit Incoming(CqRingFabric& fabric) : fabric_(fabric), reader_(&context_) {
    fabric_.service_.RequestStream(&context_, &reader_, fabric_.cq_.get(), fabric_.cq_.get(), this);
  }
  void Done(bool ok) override {
    if (!ok) return;  // the peer closed, or shutdown
    if (accepted_) {
      auto frame = DecodeFrame(buffer_);
      if (!frame.ok()) Fail(frame.status().ToString());
      fabric_.sink_(*std::move(frame));
      buffer_.Clear();
    }
    accepted_ = true;
    reader_.Read(&buffer_, this);
  }

 private:
  CqRingFabric& fabric_;
  grpc::ServerContext context_;
  grpc::ServerAsyncReader<grpc::ByteBuffer, grpc::ByteBuffer> reader_;
  grpc::ByteBuffer buffer_;
  bool accepted_ = false;
};

// One stream to a neighbour: frames queue and are written one at a time (gRPC
// allows one write in flight), each completion starting the next.
class CqRingFabric::Outgoing : public Tag {
 public:
  Outgoing(std::shared_ptr<grpc::Channel> channel, grpc::CompletionQueue* cq) : stub_(std::move(channel)) {
    call_ = stub_.PrepareCall(&context_, "/tpuemu.v1.PeerService/Stream", cq);
    call_->StartCall(this);
  }
  void Send(grpc::ByteBuffer message, SentFn sent) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(message), std::move(sent)});
    if (started_ && queue_.size() == 1) call_->Write(queue_.front().first, this);
  }
  // The call's start, then each write.
  void Done(bool ok) override {
    if (!ok) Fail("a write failed");
    SentFn sent;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (started_) {
        sent = std::move(queue_.front().second);
        queue_.pop_front();
      }
      started_ = true;
      if (!queue_.empty()) call_->Write(queue_.front().first, this);
    }
    if (sent) sent(absl::OkStatus());
  }

 private:
  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  std::mutex mu_;
  bool started_ = false;  // the call has started: writes may go
  std::deque<std::pair<grpc::ByteBuffer, SentFn>> queue_;  // the first is being written
};

CqRingFabric::CqRingFabric() {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  for (const auto& [name, value] : PeerStreamArgs()) builder.AddChannelArgument(name, value);
  builder.RegisterService(&service_);
  cq_ = builder.AddCompletionQueue();
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) Fail("could not listen on 127.0.0.1");
}

CqRingFabric::~CqRingFabric() = default;

void CqRingFabric::Connect(const std::map<int, int>& neighbour_ports, int incoming, Sink sink) {
  sink_ = std::move(sink);
  for (int i = 0; i < incoming; ++i) incoming_.push_back(std::make_unique<Incoming>(*this));
  for (const auto& [rank, port] : neighbour_ports) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection per link
    args.SetInt(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, kMaxRequestBytes);
    for (const auto& [name, value] : PeerStreamArgs()) args.SetInt(name, value);
    auto channel =
        grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(), args);
    outgoing_[rank] = std::make_unique<Outgoing>(channel, cq_.get());
  }
  poller_ = std::thread([this] {
    void* tag = nullptr;
    bool ok = false;
    while (cq_->Next(&tag, &ok)) static_cast<Tag*>(tag)->Done(ok);
  });
}

void CqRingFabric::Send(Frame&& frame, SentFn sent) {
  auto it = outgoing_.find(frame.header.dst_chip);
  if (it == outgoing_.end()) Fail(absl::StrCat("no link to rank ", frame.header.dst_chip));
  it->second->Send(EncodeFrame(std::move(frame)), std::move(sent));
}

}  // namespace tpuemu
