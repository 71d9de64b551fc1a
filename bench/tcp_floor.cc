#include "bench/tcp_floor.h"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "bench/cpu_clock.h"
#include "bench/loopback_socket.h"

namespace tpuemu {
namespace {

void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

void Send(int fd, size_t chunk, uint64_t bytes) {
  std::vector<char> buf(chunk, 1);
  for (uint64_t sent = 0; sent < bytes;) {
    const ssize_t n = write(fd, buf.data(), std::min<uint64_t>(chunk, bytes - sent));
    if (n <= 0) Die("tcp floor: write");
    sent += n;
  }
  close(fd);
}

void Receive(int fd, size_t chunk, uint64_t bytes) {
  std::vector<char> buf(chunk);
  for (uint64_t got = 0; got < bytes;) {
    const ssize_t n = read(fd, buf.data(), chunk);
    if (n <= 0) Die("tcp floor: read");
    got += n;
  }
  close(fd);
}

}  // namespace

TransferRate RawTcpLoopbackRate(int pairs, size_t chunk, uint64_t total) {
  const LoopbackListener listener = ListenOnLoopback(pairs);
  std::vector<std::pair<int, int>> fds;  // (sending end, receiving end)
  for (int p = 0; p < pairs; ++p) {
    const int out = ConnectToLoopback(listener.port);
    const int in = accept(listener.fd, nullptr, nullptr);
    if (in < 0) Die("tcp floor: accept");
    fds.emplace_back(out, in);
  }
  close(listener.fd);
  const uint64_t each = total / pairs;
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = ProcessCpuSeconds();
  std::vector<std::thread> threads;
  for (auto [out, in] : fds) {
    threads.emplace_back(Send, out, chunk, each);
    threads.emplace_back(Receive, in, chunk, each);
  }
  for (auto& t : threads) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double bytes = static_cast<double>(each) * pairs;
  return {bytes / s, bytes / (ProcessCpuSeconds() - cpu0)};
}

}  // namespace tpuemu
