// Plain TCP sockets over 127.0.0.1 for the benchmarks that measure what the
// kernel alone moves (tcp_floor, socket_ring_fabric). Both exit the process
// with a message on failure: a benchmark has nothing to fall back to. Their
// sockets take the congestion control a worker's peer links take, so that
// the floors they measure are those of the same kind of connection.
#pragma once

#include <string>

namespace tpuemu {

// Chooses the workers' congestion control for this process's peer channels,
// servers and plain sockets (TPUEMU_PEER_TCP_CONGESTION, as a worker reads
// it; cubic by default) and returns a line saying which, for a table's
// heading. Exits on a refused value.
std::string UseWorkersTcpCongestion();

// A socket listening on a free loopback port, and that port.
struct LoopbackListener {
  int fd;
  int port;
};
LoopbackListener ListenOnLoopback(int backlog);

// A socket connected to 127.0.0.1:port.
int ConnectToLoopback(int port);

}  // namespace tpuemu
