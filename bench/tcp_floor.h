// The kernel's floor under every TCP data path: plain sockets over loopback,
// no gRPC, no framing, no copy in user space. What they move per second is the
// most any data path over TCP on this machine can move, gRPC or MPI.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tpuemu {

struct TransferRate {
  double bytes_per_s = 0;      // aggregate, over all pairs
  double bytes_per_cpu_s = 0;  // per CPU-second, senders and receivers together
};

// `pairs` connections over 127.0.0.1, each with its own sending and receiving
// thread writing and reading `chunk` bytes at a time, `total` bytes in all.
TransferRate RawTcpLoopbackRate(int pairs, size_t chunk, uint64_t total);

}  // namespace tpuemu
