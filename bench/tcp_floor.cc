#include "bench/tcp_floor.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "bench/cpu_clock.h"

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
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(listener, pairs) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    Die("tcp floor: listen");
  }
  std::vector<std::pair<int, int>> fds;  // (sending end, receiving end)
  for (int p = 0; p < pairs; ++p) {
    const int out = socket(AF_INET, SOCK_STREAM, 0);
    if (out < 0 || connect(out, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Die("tcp floor: connect");
    const int in = accept(listener, nullptr, nullptr);
    if (in < 0) Die("tcp floor: accept");
    fds.emplace_back(out, in);
  }
  close(listener);
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
