#include "services/grpc_fabric.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/support/sync_stream.h"
#include "services/frame_codec.h"
#include "services/server.h"
#include "services/transport_security.h"
#include "spdlog/spdlog.h"

namespace tpuemu {

struct GrpcFabric::PeerStream {
  std::shared_ptr<grpc::Channel> channel;
  grpc::ClientContext context;
  grpc::ByteBuffer response;
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer;
  std::string peer;  // for errors: "chip 3 -> chip 4 (host 1 at 127.0.0.1:4567)"
  bool broken = false;
};

GrpcFabric::GrpcFabric(const Topology& topo, int my_host, std::map<int, std::string> host_addresses)
    : topo_(topo), my_host_(my_host), addresses_(std::move(host_addresses)) {}

GrpcFabric::~GrpcFabric() { Disconnect(); }

void GrpcFabric::UpdatePeers(const std::map<int, std::string>& host_addresses) {
  std::lock_guard<std::mutex> lock(mu_);
  // A stream goes if its host moved, or if its connection is down: a worker
  // back under the same name (a restarted Kubernetes pod) may be at a new
  // address, which only a new channel looks up at once. Streams in use by a
  // running job are up, and stay.
  for (auto it = streams_.begin(); it != streams_.end();) {
    const auto address = host_addresses.find(topo_.HostOf(it->first.second));
    const bool moved = address != host_addresses.end() && address->second != addresses_[address->first];
    if (!moved && it->second->channel->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY) {
      ++it;
      continue;
    }
    it->second->context.TryCancel();
    retired_.push_back(std::move(it->second));
    it = streams_.erase(it);
  }
  for (const auto& [host, address] : host_addresses) addresses_[host] = address;
}

void GrpcFabric::Disconnect() {
  std::map<std::pair<int, int>, std::unique_ptr<PeerStream>> closing;
  std::vector<std::unique_ptr<PeerStream>> retired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing.swap(streams_);
    retired.swap(retired_);
  }
  // Cancelled, not finished: a finish waits for the peer's handler to answer,
  // and a peer that is itself reconfiguring (or gone) may not for a long time;
  // two workers reconfiguring at once each waited for the other. No job uses
  // the links when they close, so nothing in flight is lost that matters.
  // Each stream owns its channel: its connection closes with it, here and at
  // the peer.
  for (auto& [_, s] : closing) s->context.TryCancel();
}

absl::StatusOr<GrpcFabric::PeerStream*> GrpcFabric::StreamFor(int src, int dst) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = streams_[{src, dst}];
  if (slot) return slot.get();
  const int host = topo_.HostOf(dst);
  auto it = addresses_.find(host);
  if (it == addresses_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("no address for host ", host, " (chip ", dst, ")"));
  }
  auto s = std::make_unique<PeerStream>();
  s->peer = absl::StrCat("link chip ", src, " -> chip ", dst, " (worker host ", host, " at ", it->second, ")");
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
  args.SetInt(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, 8 << 20);
  for (const auto& [name, value] : PeerStreamArgs()) args.SetInt(name, value);
  s->channel = MakeChannel(it->second, args);
  // Initial metadata goes with the first chunk: opening the stream then
  // never blocks. (Uncorked, the writer's constructor waits for the metadata
  // to be sent, without a deadline; between containers on this project's
  // machines that wait hung for 10-50 s on a fresh pod's first Configure, and
  // with it the whole pod. ConnectLinks bounds the wait for the connection.)
  s->context.set_initial_metadata_corked(true);
  grpc::internal::RpcMethod method("/tpuemu.v1.PeerService/Stream", grpc::internal::RpcMethod::CLIENT_STREAMING,
                                   s->channel);
  s->writer.reset(grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(s->channel.get(), method,
                                                                                 &s->context, &s->response));
  slot = std::move(s);
  return slot.get();
}

absl::Status GrpcFabric::Connect(Mailbox& local, const std::vector<int>& local_chips, absl::Duration within) {
  local_ = &local;
  // Every link starts connecting at once; all share one deadline.
  std::vector<PeerStream*> streams;
  for (int chip : local_chips) {
    for (const auto& link : topo_.OutgoingLinks(chip)) {
      if (topo_.HostOf(link.peer) == my_host_) continue;
      auto stream = StreamFor(chip, link.peer);
      if (!stream.ok()) return stream.status();
      (*stream)->channel->GetState(/*try_to_connect=*/true);
      streams.push_back(*stream);
    }
  }
  const absl::Time start = absl::Now();
  const auto deadline = absl::ToChronoTime(start + within);
  for (PeerStream* s : streams) {
    if (!s->channel->WaitForConnected(deadline)) {
      return absl::UnavailableError(
          absl::StrCat("cannot connect ", s->peer, " within ", absl::FormatDuration(within)));
    }
  }
  // Slow connections between containers have failed jobs before (a lost
  // first packet, a name resolved slowly): say how slow, to tell them apart.
  if (const absl::Duration took = absl::Now() - start; took > absl::Seconds(1)) {
    spdlog::warn("connecting {} links to other hosts took {}", streams.size(), absl::FormatDuration(took));
  }
  return absl::OkStatus();
}

absl::Status GrpcFabric::Deliver(Frame&& frame) {
  // Routed by the pod's chip ids (a placed job's own ids are offset).
  const int dst = frame.header.pod_dst_chip();
  if (topo_.HostOf(dst) == my_host_) {
    local_->Put(std::move(frame));
    return absl::OkStatus();
  }
  auto stream = StreamFor(frame.header.pod_src_chip(), dst);
  if (!stream.ok()) return stream.status();
  PeerStream* s = *stream;
  // Only the link's own sender thread writes to its stream.
  if (s->broken || !s->writer->Write(EncodeFrame(std::move(frame)))) {
    if (!s->broken) spdlog::warn("{} broke", s->peer);
    s->broken = true;
    return absl::UnavailableError(absl::StrCat(s->peer, " is broken: the peer worker is gone"));
  }
  return absl::OkStatus();
}

FabricFactory GrpcFabricFactory() {
  return [](const PodConfig& config, const Topology& topo, int host) {
    return std::make_unique<GrpcFabric>(topo, host, config.host_addresses);
  };
}

}  // namespace tpuemu
