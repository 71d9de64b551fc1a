// What a hostile or broken peer can send a worker, for the soak test: a peer
// frame that declares a payload far larger than it carries, many frames for a
// job that does not exist, aborts for job numbers not issued yet, and a
// heartbeat in the name of a registration that does not hold a place. Each
// prints one line saying what the worker answered; the soak test then checks
// that the pod still computes exactly what one device would.
//   hostile_peer ADDRESS huge-frame
//   hostile_peer ADDRESS unknown-frames COUNT BYTES
//   hostile_peer ADDRESS abort JOB [JOB...]
//   hostile_peer COORDINATOR stale-heartbeat HOST
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/codegen/client_unary_call.h"
#include "services/transport_security.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace {

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// A tpuemu.v1.PeerChunk whose payload field declares `declared` bytes and
// carries `carried` of them (zeros).
std::string Chunk(uint64_t job, uint64_t declared, uint64_t carried) {
  tpuemu::v1::PeerChunkHeader header;
  header.set_job(job);
  header.set_src_chip(0);
  header.set_dst_chip(1);
  header.set_tag(1);
  header.set_emu_bytes(declared);
  std::string out;
  out.push_back(static_cast<char>((1 << 3) | 2));
  PutVarint(header.ByteSizeLong(), &out);
  out += header.SerializeAsString();
  out.push_back(static_cast<char>((2 << 3) | 2));
  PutVarint(declared, &out);
  out.append(carried, '\0');
  return out;
}

// Dials as a member of the pod: with the members' certificate from
// TPUEMU_TLS_DIR, as a compromised or buggy member would hold it (a stranger
// without it gets no further than the handshake: security_cluster_test), or
// in plaintext for a pod started with --insecure.
std::shared_ptr<grpc::Channel> Channel(const std::string& address, const grpc::ChannelArguments& args = {}) {
  const char* dir = std::getenv("TPUEMU_TLS_DIR");
  auto security = dir != nullptr && *dir != '\0' ? tpuemu::LoadMemberSecurity(dir, "TPUEMU_TLS_DIR")
                                                 : tpuemu::TransportSecurity::Insecure();
  if (!security.ok()) {
    std::fprintf(stderr, "%s\n", std::string(security.status().message()).c_str());
    std::exit(2);
  }
  return tpuemu::MakeChannel(address, args, *security);
}

int SendFrames(const std::string& address, int count, uint64_t declared, uint64_t carried, uint64_t job) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, 64 << 20);
  auto channel = Channel(address, args);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  grpc::ByteBuffer response;
  grpc::internal::RpcMethod method("/tpuemu.v1.PeerService/Stream", grpc::internal::RpcMethod::CLIENT_STREAMING,
                                   channel);
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
      grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(channel.get(), method, &ctx, &response));
  const auto start = std::chrono::steady_clock::now();
  int sent = 0;
  const std::string chunk = Chunk(job, declared, carried);
  for (; sent < count; ++sent) {
    grpc::Slice slice(chunk);
    grpc::ByteBuffer buffer(&slice, 1);
    if (!writer->Write(buffer)) break;
  }
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("sent %d of %d frames declaring %llu bytes; stream ended in %.2f s: %s %s\n", sent, count,
              static_cast<unsigned long long>(declared), took, status.ok() ? "OK" : "error",
              status.error_message().c_str());
  // A stream the worker ended on its own (not our deadline) is what we want.
  return status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ? 1 : 0;
}

int Abort(const std::string& address, char** jobs, int n) {
  auto stub = tpuemu::v1::WorkerService::NewStub(Channel(address));
  for (int i = 0; i < n; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    tpuemu::v1::AbortRequest req;
    req.set_job(std::strtoull(jobs[i], nullptr, 10));
    req.set_reason("sent by hostile_peer");
    tpuemu::v1::AbortResponse resp;
    const grpc::Status s = stub->Abort(&ctx, req, &resp);
    std::printf("abort job %s: %s %s\n", jobs[i], s.ok() ? "OK" : "refused:", s.error_message().c_str());
    if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED || s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      return 1;
    }
  }
  return 0;
}

// A heartbeat for HOST from incarnation 0, which no registration is given:
// the coordinator must refuse it (0), not count it as the worker's (1).
int StaleHeartbeat(const std::string& address, int host) {
  auto stub = tpuemu::v1::CoordinatorService::NewStub(Channel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  tpuemu::v1::HeartbeatRequest req;
  req.set_global_host(host);
  req.set_incarnation(0);
  tpuemu::v1::HeartbeatResponse resp;
  const grpc::Status s = stub->Heartbeat(&ctx, req, &resp);
  std::printf("heartbeat for host %d from incarnation 0: %s %s\n", host, s.ok() ? "accepted" : "refused:",
              s.error_message().c_str());
  return s.error_code() == grpc::StatusCode::FAILED_PRECONDITION ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage =
      "usage: hostile_peer ADDRESS huge-frame | unknown-frames COUNT BYTES | abort JOB [JOB...] | "
      "stale-heartbeat HOST\n";
  if (argc < 3) {
    std::fputs(usage.c_str(), stderr);
    return 2;
  }
  const std::string address = argv[1], what = argv[2];
  if (what == "huge-frame") return SendFrames(address, 1, uint64_t{1} << 40, 1024, 1);
  if (what == "unknown-frames" && argc == 5) {
    const uint64_t bytes = std::strtoull(argv[4], nullptr, 10);
    return SendFrames(address, std::atoi(argv[3]), bytes, bytes, 999999999);
  }
  if (what == "abort" && argc > 3) return Abort(address, argv + 3, argc - 3);
  if (what == "stale-heartbeat" && argc == 4) return StaleHeartbeat(address, std::atoi(argv[3]));
  std::fputs(usage.c_str(), stderr);
  return 2;
}
