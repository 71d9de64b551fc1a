// Plain TCP sockets over 127.0.0.1 for the benchmarks that measure what the
// kernel alone moves (tcp_floor, socket_ring_fabric). Both exit the process
// with a message on failure: a benchmark has nothing to fall back to.
#pragma once

namespace tpuemu {

// A socket listening on a free loopback port, and that port.
struct LoopbackListener {
  int fd;
  int port;
};
LoopbackListener ListenOnLoopback(int backlog);

// A socket connected to 127.0.0.1:port.
int ConnectToLoopback(int port);

}  // namespace tpuemu
