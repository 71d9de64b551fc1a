#include "bench/socket_ring_fabric.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/loopback_socket.h"

namespace tpuemu {
namespace {

struct WireHeader {
  uint64_t tag;
  uint64_t bytes;
};

[[noreturn]] void Fail(const char* what) {
  std::perror(what);
  std::_Exit(1);
}

constexpr uint64_t kMaxFrameBytes = 64 << 20;

// False once the peer has closed the connection.
bool ReadFully(int fd, void* dst, size_t n) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) Fail("read");
    if (got == 0) return false;
    p += got;
    n -= got;
  }
  return true;
}

void WriteFully(int fd, std::vector<iovec> iov) {
  size_t i = 0;
  while (i < iov.size()) {
    ssize_t put = writev(fd, iov.data() + i, static_cast<int>(iov.size() - i));
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) Fail("writev");
    while (i < iov.size() && static_cast<size_t>(put) >= iov[i].iov_len) put -= iov[i++].iov_len;
    if (i < iov.size()) {
      iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + put;
      iov[i].iov_len -= put;
    }
  }
}

}  // namespace

SocketRingFabric::SocketRingFabric() {
  const LoopbackListener listener = ListenOnLoopback(SOMAXCONN);
  listen_fd_ = listener.fd;
  port_ = listener.port;
}

void SocketRingFabric::Connect(const std::map<int, int>& neighbour_ports, Sink sink, Place place) {
  sink_ = std::move(sink);
  place_ = std::move(place);
  // A neighbour may connect before or after this one does: the kernel
  // completes either connection before accept.
  for (const auto& [rank, port] : neighbour_ports) {
    auto out = std::make_unique<Out>();
    out->fd = ConnectToLoopback(port);
    const int one = 1;
    setsockopt(out->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    out->writer = std::thread(WriteLoop, std::ref(*out));
    outs_[rank] = std::move(out);
  }
  for (size_t i = 0; i < neighbour_ports.size(); ++i) {
    const int fd = accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) Fail("accept");
    in_fds_.push_back(fd);
    readers_.emplace_back([this, fd] { ReadLoop(fd); });
  }
}

SocketRingFabric::~SocketRingFabric() {
  for (auto& [rank, out] : outs_) {
    {
      std::lock_guard<std::mutex> lock(out->mu);
      out->closing = true;
    }
    out->queued.notify_all();
    out->writer.join();
    shutdown(out->fd, SHUT_WR);  // the neighbour's reader sees the end
  }
  for (std::thread& t : readers_) t.join();
  for (auto& [rank, out] : outs_) close(out->fd);
  for (int fd : in_fds_) close(fd);
  close(listen_fd_);
}

absl::Status SocketRingFabric::Deliver(Frame&& frame) { return SendAndWait(std::move(frame)); }

void SocketRingFabric::Send(Frame&& frame, SentFn sent) {
  auto it = outs_.find(frame.header.dst_chip);
  if (it == outs_.end()) {
    sent(absl::InvalidArgumentError("not a neighbour"));
    return;
  }
  Out& out = *it->second;
  {
    std::lock_guard<std::mutex> lock(out.mu);
    out.queue.emplace_back(std::move(frame), std::move(sent));
  }
  out.queued.notify_one();
}

void SocketRingFabric::WriteLoop(Out& out) {
  while (true) {
    std::pair<Frame, SentFn> next;
    {
      std::unique_lock<std::mutex> lock(out.mu);
      out.queued.wait(lock, [&] { return out.closing || !out.queue.empty(); });
      if (out.queue.empty()) return;
      next = std::move(out.queue.front());
      out.queue.pop_front();
    }
    Frame& f = next.first;
    WireHeader h{f.header.tag, f.elements() * sizeof(float)};
    std::vector<iovec> iov = {{&h, sizeof(h)}};
    for (const Segment& s : f.lent) iov.push_back({const_cast<std::byte*>(s.data), s.bytes});
    if (!f.payload.empty()) iov.push_back({f.payload.data(), f.payload.size() * sizeof(float)});
    if (f.received) {
      f.received->ForEachPiece(0, f.received->size(), [&](const std::byte* p, size_t n) {
        iov.push_back({const_cast<std::byte*>(p), n});
      });
    }
    WriteFully(out.fd, std::move(iov));
    next.second(absl::OkStatus());
  }
}

void SocketRingFabric::ReadLoop(int fd) {
  WireHeader h;
  while (ReadFully(fd, &h, sizeof(h))) {
    if (h.bytes % sizeof(float) != 0 || h.bytes > kMaxFrameBytes) Fail("read: not a frame of whole floats");
    Frame f;
    f.header.tag = h.tag;
    f.header.emu_bytes = h.bytes;
    std::byte* dst = place_(h.tag, h.bytes);
    if (dst == nullptr) {
      f.payload.resize(h.bytes / sizeof(float));
      dst = reinterpret_cast<std::byte*>(f.payload.data());
    }
    if (!ReadFully(fd, dst, h.bytes)) Fail("read: a neighbour closed mid-frame");
    sink_(std::move(f));
  }
}

}  // namespace tpuemu
