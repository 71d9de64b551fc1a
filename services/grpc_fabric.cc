#include "services/grpc_fabric.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "services/frame_codec.h"
#include "services/peer_service.h"
#include "services/server.h"
#include "services/tcp_congestion.h"
#include "services/transport_security.h"
#include "spdlog/spdlog.h"

namespace tpuemu {

// One directed link's stream, on the worker's PeerQueue. Frames queue here
// and are written one at a time (gRPC allows one in flight); each write's
// completion, in the queue's thread, starts the next and tells the sender.
// Chips start writes from their own threads when nothing is in flight. A
// stream holds the queue, which is not shut down while any stream has an
// operation on it; the fabric frees a stream only once nothing of it is in
// flight any more (WaitDone).
class GrpcFabric::PeerStream final : public PeerQueue::Tag {
 public:
  // The channel outlives the stream's use of it, and is not the stream's to
  // close.
  PeerStream(const std::shared_ptr<grpc::Channel>& channel, std::shared_ptr<PeerQueue> queue, std::string peer)
      : peer_(std::move(peer)), peer_queue_(std::move(queue)), stub_(channel) {
    // Initial metadata goes with the first chunk: opening the stream then
    // never waits for the peer. (Uncorked, the sync writer's constructor
    // waited for the metadata to be sent, without a deadline; between
    // containers that wait hung for 10-50 s on a fresh pod's first Configure.
    // Connect bounds the wait for the connection.) Corked, the start is no
    // operation of its own: the first write may follow at once.
    context_.set_initial_metadata_corked(true);
    call_ = stub_.PrepareCall(&context_, "/tpuemu.v1.PeerService/Stream", peer_queue_->cq());
    call_->StartCall(nullptr);
  }

  const std::string& peer() const { return peer_; }
  bool broken() {
    std::lock_guard<std::mutex> lock(mu_);
    return broken_;
  }

  // Ends the stream; frames not yet written fail.
  void Cancel() {
    std::deque<Pending> failed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return;
      closed_ = true;
      // The one in flight fails when its write completes.
      if (writing_) {
        failed.assign(std::make_move_iterator(queue_.begin() + 1), std::make_move_iterator(queue_.end()));
        queue_.erase(queue_.begin() + 1, queue_.end());
      } else {
        failed.swap(queue_);
      }
    }
    context_.TryCancel();
    for (Pending& p : failed) p.sent(Broken());
  }

  void Send(grpc::ByteBuffer message, SentFn sent) {
    std::unique_lock<std::mutex> lock(mu_);
    if (broken_ || closed_) {
      lock.unlock();
      sent(Broken());
      return;
    }
    queue_.push_back({std::move(message), std::move(sent)});
    if (!writing_) WriteFront();
  }

  // A write completed.
  void Done(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    writing_ = false;
    std::deque<Pending> done;
    done.push_back(std::move(queue_.front()));
    queue_.pop_front();
    if (!ok) {
      if (!broken_ && !closed_) spdlog::warn("{} broke", peer_);
      broken_ = true;
      done.insert(done.end(), std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
      queue_.clear();
    }
    if (!queue_.empty() && !closed_) WriteFront();
    const absl::Status broken = ok && done.size() == 1 ? absl::OkStatus() : Broken();
    if (!writing_) idle_.notify_all();
    // Nothing of the stream is touched after the unlock: the fabric may free it then.
    lock.unlock();
    for (size_t i = 0; i < done.size(); ++i) done[i].sent(ok && i == 0 ? absl::OkStatus() : broken);
  }

  // Cancelled, with nothing in flight: freeing it now is safe.
  bool Ended() {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_ && !writing_;
  }

  // Waits, after Cancel, until nothing of the stream is in flight; false if
  // something still is after `within`.
  bool WaitDone(absl::Duration within) {
    std::unique_lock<std::mutex> lock(mu_);
    return idle_.wait_for(lock, absl::ToChronoNanoseconds(within), [&] { return !writing_; });
  }

 private:
  struct Pending {
    grpc::ByteBuffer message;
    SentFn sent;
  };
  void WriteFront() {  // under mu_
    writing_ = true;
    call_->Write(queue_.front().message, AsTag());  // a deque keeps it in place
  }
  absl::Status Broken() const {
    return absl::UnavailableError(absl::StrCat(peer_, " is broken: the peer worker is gone"));
  }

  const std::string peer_;  // for errors: "link chip 3 -> chip 4 (worker host 1 at 127.0.0.1:4567)"
  const std::shared_ptr<PeerQueue> peer_queue_;  // declared before the call on it: outlives it
  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  std::mutex mu_;
  std::condition_variable idle_;
  std::deque<Pending> queue_;  // the first is being written while `writing_`
  bool writing_ = false;
  bool broken_ = false;  // a write failed: the peer is gone
  bool closed_ = false;  // cancelled
};

GrpcFabric::GrpcFabric(const Topology& topo, int my_host, std::map<int, std::string> host_addresses,
                       std::shared_ptr<PeerQueue> queue)
    : topo_(topo), my_host_(my_host), addresses_(std::move(host_addresses)), queue_(std::move(queue)) {}

GrpcFabric::~GrpcFabric() { Disconnect(); }

std::vector<GrpcFabric::Link> GrpcFabric::TakeEndedRetired() {
  std::vector<Link> ended;
  for (auto it = retired_.begin(); it != retired_.end();) {
    if (it->stream->Ended()) {
      ended.push_back(std::move(*it));
      it = retired_.erase(it);
    } else {
      ++it;
    }
  }
  return ended;
}

void GrpcFabric::UpdatePeers(const std::map<int, std::string>& host_addresses) {
  std::vector<std::shared_ptr<PeerStream>> cancelled;
  std::unique_lock<std::mutex> lock(mu_);
  const std::vector<Link> ended = TakeEndedRetired();  // freed with the lock let go
  // A stream goes if its host moved, or if its connection is down (idle or
  // failing): a worker back under the same name (a restarted Kubernetes pod)
  // may be at a new address, which only a new channel looks up at once.
  // Streams in use by a running job are up, and stay; so do those a job's
  // Connect is bringing up, which it would otherwise find gone when it sends.
  for (auto it = links_.begin(); it != links_.end();) {
    const auto address = host_addresses.find(topo_.HostOf(it->first.second));
    const bool moved = address != host_addresses.end() && address->second != addresses_[address->first];
    const grpc_connectivity_state state = it->second.channel->GetState(/*try_to_connect=*/false);
    if (!moved && (state == GRPC_CHANNEL_READY || state == GRPC_CHANNEL_CONNECTING)) {
      ++it;
      continue;
    }
    cancelled.push_back(it->second.stream);
    retired_.push_back(std::move(it->second));
    it = links_.erase(it);
  }
  for (const auto& [host, address] : host_addresses) addresses_[host] = address;
  lock.unlock();
  // Outside mu_: cancelling tells the frames still queued, whose callbacks may send again.
  for (auto& stream : cancelled) stream->Cancel();
}

size_t GrpcFabric::retired_links() {
  std::lock_guard<std::mutex> lock(mu_);
  return retired_.size();
}

void GrpcFabric::Disconnect() {
  {
    std::lock_guard<std::mutex> lock(abort_in_->mu);
    abort_in_->mailbox = nullptr;  // no job uses the links now
  }
  std::map<std::pair<int, int>, Link> closing;
  std::vector<Link> retired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing.swap(links_);
    retired.swap(retired_);
  }
  // Cancelled, not finished: a finish waits for the peer's handler to answer,
  // and a peer that is itself reconfiguring (or gone) may not for a long time;
  // two workers reconfiguring at once each waited for the other. No job uses
  // the links when they close, so nothing in flight is lost that matters.
  // Each link has a channel of its own: its connection closes with it, here
  // and at the peer.
  for (auto& [_, link] : closing) {
    link.stream->Cancel();
    retired.push_back(std::move(link));
  }
  // A stream's last completion comes in the peer queue's thread. Where that
  // thread itself lets go of the fabric (the last holder of a replaced pod,
  // delivering a frame), waiting here would wait for itself: another thread
  // waits and frees the links.
  if (queue_ && queue_->InThread()) {
    std::thread([retired = std::move(retired)]() mutable { FreeWhenDone(retired); }).detach();
  } else {
    FreeWhenDone(retired);
  }
}

void GrpcFabric::FreeWhenDone(std::vector<Link>& links) {
  // Cancelled streams end at once; one that does not is left to gRPC (and
  // its channel with it) rather than freed under it.
  for (Link& link : links) {
    if (!link.stream->WaitDone(absl::Seconds(5))) {
      spdlog::warn("{} did not end within 5 s of being cancelled; left to gRPC", link.stream->peer());
      new Link(std::move(link));
    }
  }
  links.clear();
}

absl::StatusOr<GrpcFabric::Link> GrpcFabric::LinkFor(int src, int dst) {
  std::vector<Link> ended;  // declared before the lock: freed after it is let go
  std::lock_guard<std::mutex> lock(mu_);
  Link& slot = links_[{src, dst}];
  // A stream whose call failed while its connection stays up (the peer
  // refused a message) is replaced for the frames that follow; one to a
  // peer that is gone fails them at once until the pod is configured again.
  if (slot.stream && slot.stream->broken() && slot.channel->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY) {
    // Safe under mu_: a broken stream holds no frames (its failed write
    // failed them all, and it refuses more), so cancelling calls nothing back.
    slot.stream->Cancel();
    ended = TakeEndedRetired();
    retired_.push_back(slot);
    slot.stream = std::make_shared<PeerStream>(slot.channel, queue_, slot.stream->peer());
    return slot;
  }
  if (slot.stream) return slot;
  const int host = topo_.HostOf(dst);
  auto it = addresses_.find(host);
  if (it == addresses_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("no address for host ", host, " (chip ", dst, ")"));
  }
  if (!queue_) return absl::FailedPreconditionError("this worker's PeerService is not serving");
  grpc::ChannelArguments args;
  // Every directed link gets its own TCP connection, like its own ICI cable.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // A failed connection attempt (the peer not listening yet) is tried again
  // within 200 ms to 2 s, not gRPC's 1 s to 120 s. gRPC also takes the
  // minimum backoff as the time it gives one attempt, TLS handshake
  // included: at 200 ms, handshakes slowed by a busy host (every link of a
  // pod opening at once, between containers on 2 cores) were given up and
  // begun again until Connect's deadline passed, twice in CI replicas of the
  // two-slice Kubernetes test. An attempt now has 5 s, and a hung one (a
  // lost SYN is sent again by the kernel after 1 s) is given up after them.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // A peer whose container restarts may come back at a new address (its
  // pod's network namespace made again): a failed connection looks the name
  // up again after 1 s, not gRPC's default 30 s, as the workers' channel to
  // the coordinator does (services/registrar_client.cc).
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 1000);
  args.SetInt(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, 8 << 20);
  for (const auto& [name, value] : PeerStreamArgs()) args.SetInt(name, value);
  ApplyPeerTcpCongestion(args);
  slot.channel = MakeChannel(it->second, args);
  slot.stream = std::make_shared<PeerStream>(
      slot.channel, queue_, absl::StrCat("link chip ", src, " -> chip ", dst, " (worker host ", host, " at ", it->second, ")"));
  return slot;
}

namespace {

const char* StateName(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE: return "idle";
    case GRPC_CHANNEL_CONNECTING: return "connecting";
    case GRPC_CHANNEL_READY: return "ready";
    case GRPC_CHANNEL_TRANSIENT_FAILURE: return "failing";
    case GRPC_CHANNEL_SHUTDOWN: return "shut down";
  }
  return "unknown";
}

// Why a link's channel is not up: its state, and what one call on it is told
// (gRPC keeps its last connection error for calls: refused, reset, a failed
// handshake, a name it cannot resolve), so that a link that does not come up
// between containers says which of them it was.
std::string WhyNotConnected(const std::shared_ptr<grpc::Channel>& channel) {
  const grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/false);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status probe = grpc::health::v1::Health::NewStub(channel)->Check(&context, request, &response);
  return absl::StrCat("the connection is ", StateName(state), "; a health check on it: ",
                      probe.ok() ? "answered" : probe.error_message());
}

}  // namespace

absl::Status GrpcFabric::Connect(Mailbox& local, const std::vector<int>& local_chips, const std::vector<int>& job_chips,
                                absl::Duration within) {
  local_ = &local;
  {
    std::lock_guard<std::mutex> lock(abort_in_->mu);
    abort_in_->mailbox = &local;
  }
  const auto in_job = [&](int chip) {
    return job_chips.empty() || std::binary_search(job_chips.begin(), job_chips.end(), chip);
  };
  // Every link starts connecting at once; all share one deadline.
  std::vector<Link> links;
  for (int chip : local_chips) {
    if (!in_job(chip)) continue;
    for (const auto& out : topo_.OutgoingLinks(chip)) {
      if (topo_.HostOf(out.peer) == my_host_ || !in_job(out.peer)) continue;
      auto link = LinkFor(chip, out.peer);
      if (!link.ok()) return link.status();
      link->channel->GetState(/*try_to_connect=*/true);
      links.push_back(*std::move(link));
    }
  }
  const absl::Time start = absl::Now();
  const auto deadline = absl::ToChronoTime(start + within);
  for (const Link& link : links) {
    if (!link.channel->WaitForConnected(deadline)) {
      return absl::UnavailableError(
          absl::StrCat("cannot connect ", link.stream->peer(), " within ", absl::FormatDuration(within), " (",
                       WhyNotConnected(link.channel), ")"));
    }
  }
  // Slow connections between containers have failed jobs before (a lost
  // first packet, a name resolved slowly): say how slow, to tell them apart.
  if (const absl::Duration took = absl::Now() - start; took > absl::Seconds(1)) {
    spdlog::warn("connecting {} links to other hosts took {}", links.size(), absl::FormatDuration(took));
  }
  return absl::OkStatus();
}

void GrpcFabric::Send(Frame&& frame, SentFn sent) {
  // Routed by the pod's chip ids (a placed job's own ids are offset).
  const int dst = frame.header.pod_dst_chip();
  if (topo_.HostOf(dst) == my_host_) {
    local_->Put(std::move(frame));
    sent(absl::OkStatus());
    return;
  }
  auto link = LinkFor(frame.header.pod_src_chip(), dst);
  if (!link.ok()) return sent(link.status());
  // A frame that could not leave fails its job here at once: the chips
  // waiting for it downstream would otherwise wait out their receive timeout
  // (2 minutes), and the chip that sent it learns only when its step ends.
  const uint64_t job = frame.header.job;
  link->stream->Send(EncodeFrame(std::move(frame)),
                     [abort_in = abort_in_, job, sent = std::move(sent)](absl::Status status) {
                       if (!status.ok()) {
                         std::lock_guard<std::mutex> lock(abort_in->mu);
                         if (abort_in->mailbox != nullptr) {
                           abort_in->mailbox->AbortJob(job, absl::AbortedError(status.message()));
                         }
                       }
                       sent(std::move(status));
                     });
}

absl::Status GrpcFabric::Deliver(Frame&& frame) { return SendAndWait(std::move(frame)); }

FabricFactory GrpcFabricFactory(const PeerServiceImpl& peer) {
  return [&peer](const PodConfig& config, const Topology& topo, int host) {
    return std::make_unique<GrpcFabric>(topo, host, config.host_addresses, peer.queue());
  };
}

}  // namespace tpuemu
